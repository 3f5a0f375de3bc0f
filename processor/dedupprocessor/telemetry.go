package dedupprocessor

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/metadata"
)

// telemetry holds the processor's instruments: the generated
// TelemetryBuilder's (metadata.yaml declares them, with their attributes),
// under the names the processor's code records to.
type telemetry struct {
	builder *metadata.TelemetryBuilder

	evicted    metric.Int64Counter
	rolledBack metric.Int64Counter
	lost       metric.Int64Counter
	// Requests that waited for the originals of their copies (copies.go).
	copyWaits metric.Int64Counter

	// Nested duplicates (nested.go).
	nestedSpans metric.Int64Counter

	// The status page's streams it did not remember (status.go).
	statusRefused metric.Int64Counter

	// The stored journals (persist.go) the journal gauges observe; nil
	// while storage is closed, and then they observe nothing.
	journals atomic.Pointer[journalLens]
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	t := &telemetry{
		builder:       tb,
		evicted:       tb.ProcessorDedupEvictedEntries,
		rolledBack:    tb.ProcessorDedupRolledBackEntries,
		lost:          tb.ProcessorDedupLostItems,
		copyWaits:     tb.ProcessorDedupCopyWaits,
		nestedSpans:   tb.ProcessorDedupNestedSpans,
		statusRefused: tb.ProcessorDedupStatusRefusedEvents,
	}
	tracesOpt := metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "traces")))
	logsOpt := metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "logs")))
	err = errors.Join(
		tb.RegisterProcessorDedupJournalSegmentsCallback(func(_ context.Context, o metric.Int64Observer) error {
			if j := t.journals.Load(); j != nil {
				o.Observe(int64(j.spans.Len()), tracesOpt)
				o.Observe(int64(j.logs.Len()), logsOpt)
			}
			return nil
		}),
		tb.RegisterProcessorDedupJournalSegmentsLimitCallback(func(_ context.Context, o metric.Int64Observer) error {
			if j := t.journals.Load(); j != nil {
				o.Observe(int64(j.limit), tracesOpt)
				o.Observe(int64(j.limit), logsOpt)
			}
			return nil
		}),
		observeRecovered(tb), // recovered.go
	)
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return t, nil
}

// journalLens is what the journal gauges read: the stored span and log
// journals' lengths, and their bound.
type journalLens struct {
	spans, logs interface{ Len() int }
	limit       int
}

// journalGauges ends the journal gauges' observation of one pair of
// journals.
type journalGauges struct {
	embedded.Registration
	t *telemetry
	j *journalLens
}

func (g *journalGauges) Unregister() error {
	g.t.journals.CompareAndSwap(g.j, nil)
	return nil
}

// observeJournals reports the stored journals' segments against their
// bound until the registration is unregistered (when storage closes).
func (t *telemetry) observeJournals(spans, logs interface{ Len() int }, limit int) metric.Registration {
	j := &journalLens{spans: spans, logs: logs, limit: limit}
	t.journals.Store(j)
	return &journalGauges{t: t, j: j}
}

// shutdown unregisters the gauges' callbacks.
func (t *telemetry) shutdown() { t.builder.Shutdown() }
