package dedupprocessor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/sanitize"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/metadata"
)

// otherService is the service.name label for services past the cap.
const otherService = "_other"

// telemetry holds the processor's instruments: the generated
// TelemetryBuilder's (metadata.yaml declares them, with their attributes),
// under the names the processor's code records to.
type telemetry struct {
	builder *metadata.TelemetryBuilder

	received   metric.Int64Counter
	duplicates metric.Int64Counter
	conflicts  metric.Int64Counter
	invalid    metric.Int64Counter
	evicted    metric.Int64Counter
	rolledBack metric.Int64Counter
	lost       metric.Int64Counter

	// Metrics only (metrics.go).
	metricPoints    metric.Int64Counter
	metricElections metric.Int64Counter
	unjudged        metric.Int64Counter

	// Nested duplicates (nested.go).
	nestedSpans metric.Int64Counter

	// The status page's streams it did not remember (status.go).
	statusRefused metric.Int64Counter

	// The stored journals (persist.go) the journal gauges observe; nil
	// while storage is closed, and then they observe nothing.
	journals atomic.Pointer[journalLens]

	// recovered observes what was found damaged in the data dir at start.
	recovered metric.Registration
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	t := &telemetry{
		builder:         tb,
		received:        tb.ProcessorDedupReceivedItems,
		duplicates:      tb.ProcessorDedupDuplicateItems,
		conflicts:       tb.ProcessorDedupConflictItems,
		invalid:         tb.ProcessorDedupInvalidIDItems,
		evicted:         tb.ProcessorDedupEvictedEntries,
		rolledBack:      tb.ProcessorDedupRolledBackEntries,
		lost:            tb.ProcessorDedupLostItems,
		metricPoints:    tb.ProcessorDedupMetricPoints,
		metricElections: tb.ProcessorDedupMetricElections,
		unjudged:        tb.ProcessorDedupUnjudgedPoints,
		nestedSpans:     tb.ProcessorDedupNestedSpans,
		statusRefused:   tb.ProcessorDedupStatusRefusedEvents,
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
			if t.journals.Load() != nil {
				o.Observe(maxSegments, tracesOpt)
				o.Observe(maxSegments, logsOpt)
			}
			return nil
		}),
	)
	if err == nil {
		t.recovered, err = observeRecovered(set)
	}
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return t, nil
}

// journalLens is what the journal gauges read: the stored span and log
// journals' lengths.
type journalLens struct {
	spans, logs interface{ Len() int }
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
func (t *telemetry) observeJournals(spans, logs interface{ Len() int }) (metric.Registration, error) {
	j := &journalLens{spans: spans, logs: logs}
	t.journals.Store(j)
	return &journalGauges{t: t, j: j}, nil
}

// observe registers the gauges, read from the windows at collection time.
func (t *telemetry) observe(_ component.TelemetrySettings, windows []*signalWindow) error {
	snapshots := func(f func(s windowSnapshot, attrs metric.ObserveOption)) {
		now := time.Now().UnixNano()
		for _, w := range windows {
			f(w.snapshot(now), metric.WithAttributeSet(w.signalAttrs))
		}
	}
	return errors.Join(
		t.builder.RegisterProcessorDedupEntriesCallback(func(_ context.Context, o metric.Int64Observer) error {
			snapshots(func(s windowSnapshot, attrs metric.ObserveOption) { o.Observe(int64(s.entries), attrs) })
			return nil
		}),
		t.builder.RegisterProcessorDedupEntriesLimitCallback(func(_ context.Context, o metric.Int64Observer) error {
			snapshots(func(s windowSnapshot, attrs metric.ObserveOption) { o.Observe(int64(s.limit), attrs) })
			return nil
		}),
		t.builder.RegisterProcessorDedupEffectiveWindowCallback(func(_ context.Context, o metric.Float64Observer) error {
			snapshots(func(s windowSnapshot, attrs metric.ObserveOption) { o.Observe(s.effective.Seconds(), attrs) })
			return nil
		}),
	)
}

// shutdown unregisters the gauges' callbacks.
func (t *telemetry) shutdown() error {
	t.builder.Shutdown()
	if t.recovered != nil {
		return t.recovered.Unregister()
	}
	return nil
}

// serviceStats is one service's label sets and its warning state.
type serviceStats struct {
	name string

	received        metric.MeasurementOption
	dupDropped      metric.MeasurementOption
	dupPassed       metric.MeasurementOption
	conflictDropped metric.MeasurementOption
	conflictPassed  metric.MeasurementOption
	invalid         metric.MeasurementOption

	// metrics holds the metric signal's label sets (metrics_telemetry.go);
	// nil for the other signals.
	metrics *metricLabels

	totals serviceTotals // for the status page (status.go); guarded by services.mu

	// Since the last warning (guarded by services.mu).
	lastWarn        time.Time
	dups, items     int64
	wholeRequests   int64 // requests that were duplicates from end to end
	partialRequests int64 // requests with some duplicates among new items
}

// services caps the service.name label and keeps each service's label sets
// so that recording allocates nothing.
type services struct {
	signal string
	max    int
	logger *zap.Logger
	every  time.Duration

	mu    sync.Mutex
	known map[string]*serviceStats
	other *serviceStats
}

func newServices(signal string, max int, every time.Duration, logger *zap.Logger) *services {
	s := &services{signal: signal, max: max, every: every, logger: logger, known: make(map[string]*serviceStats)}
	s.other = s.make(otherService)
	return s
}

// setLogger makes the warnings of this signal go to logger: the logger of
// the pipeline that carries the signal (the state is shared by all).
func (s *services) setLogger(logger *zap.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logger = logger
}

func (s *services) make(name string) *serviceStats {
	attrs := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		kv = append(kv, attribute.String("signal", s.signal), attribute.String("service.name", name))
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	dropped, passed := attribute.String("action", "dropped"), attribute.String("action", "passed")
	st := &serviceStats{
		name:            name,
		received:        attrs(),
		dupDropped:      attrs(dropped),
		dupPassed:       attrs(passed),
		conflictDropped: attrs(dropped),
		conflictPassed:  attrs(passed),
		invalid:         attrs(),
	}
	if s.signal == "metrics" {
		st.metrics = newMetricLabels(name)
	}
	return st
}

// get returns the stats of the service a resource names. The name becomes
// a label and a log field: it is sanitized first (valid UTF-8, escaped,
// bounded), and it is also the map key, so that no long string from a
// request is kept.
func (s *services) get(res pcommon.Resource) *serviceStats {
	name := "unknown_service"
	if v, ok := res.Attributes().Get("service.name"); ok {
		name = sanitize.Label(v.AsString())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.known[name]; ok {
		return st
	}
	if len(s.known) >= s.max {
		return s.other
	}
	st := s.make(name)
	s.known[name] = st
	return st
}

// counts is what one request brought for one service.
type counts struct {
	svc        *serviceStats
	received   int64
	duplicates int64
	conflicts  int64
	invalid    int64
}

// record adds one request's counts to the instruments and, at most once per
// service per interval, warns about what the pattern suggests.
func (s *services) record(ctx context.Context, t *telemetry, c []counts, drop, dropConflicts bool, wholeRequest bool, noun string) {
	for i := range c {
		cs := &c[i]
		if cs.received > 0 {
			t.received.Add(ctx, cs.received, cs.svc.received)
		}
		if cs.duplicates > 0 {
			if drop {
				t.duplicates.Add(ctx, cs.duplicates, cs.svc.dupDropped)
			} else {
				t.duplicates.Add(ctx, cs.duplicates, cs.svc.dupPassed)
			}
		}
		if cs.conflicts > 0 {
			if dropConflicts {
				t.conflicts.Add(ctx, cs.conflicts, cs.svc.conflictDropped)
			} else {
				t.conflicts.Add(ctx, cs.conflicts, cs.svc.conflictPassed)
			}
		}
		if cs.invalid > 0 {
			t.invalid.Add(ctx, cs.invalid, cs.svc.invalid)
		}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range c {
		cs := &c[i]
		st := cs.svc
		st.items += cs.received
		st.totals.add(cs.received, cs.duplicates, wholeRequest, now)
		if cs.duplicates == 0 {
			continue
		}
		st.dups += cs.duplicates
		if wholeRequest {
			st.wholeRequests++
		} else {
			st.partialRequests++
		}
		if now.Sub(st.lastWarn) < s.every {
			continue
		}
		s.logger.Warn("duplicate "+noun+" received",
			zap.String("service.name", st.name),
			zap.Int64("duplicates", st.dups),
			zap.Int64("received", st.items),
			zap.String("suggests", diagnose(st.wholeRequests, st.partialRequests)),
			zap.Bool("dropped", drop))
		st.lastWarn = now
		st.dups, st.items, st.wholeRequests, st.partialRequests = 0, 0, 0, 0
	}
}

// diagnose names the likely cause from the shape of the duplicates: whole
// requests repeated point at re-sent batches; copies mixed with new items
// point at a second exporter in the process, which batches on its own.
func diagnose(whole, partial int64) string {
	switch {
	case whole > 0 && partial == 0:
		return "whole requests arrive again: an exporter re-sending batches that had already arrived (retries), or two identical export pipelines in one process"
	case partial > 0 && whole == 0:
		return "copies arrive mixed with new items: a second span processor or exporter in the same process (e.g. an SDK or framework that adds its own OTLP exporter)"
	default:
		return "both whole repeated requests and mixed copies: a second exporter in the process and/or re-sent batches"
	}
}
