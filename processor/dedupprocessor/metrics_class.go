package dedupprocessor

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/metadata"
)

// metrics.overlap auto: the class of a stream's second writer, judged from
// its values by internal/streams (classify.go), in the warnings, on the
// status page and in otelcol_processor_dedup_writers{class}.

// classify adds the class and evidence of the point's writer, and the
// stream's class folded over all its later writers, to the request's
// event e, which the point of stream id (of shape) has just
// set. The elected writer's own events (a repeat, an election) carry no
// class. Call with the tracker's lock held.
func classify(e *metricEvent, tracker *streams.Tracker, shape streams.Shape, id streams.ID, d streams.Decision) {
	if !shape.Cumulative() && !streams.JudgedDelta(shape) || d.Writer == d.Elected || d.Election != streams.ElectionNone {
		return // gauges, UpDownCounter deltas and exponential histogram deltas are not classified
	}
	e.judged, e.class = true, d.Class
	if jd, ok := tracker.Judgement(id, d.Writer); ok {
		e.evidence = jd.String()
	} else {
		e.evidence = "not judged: metrics.max_judged_writers reached"
	}
	// The stream's class, for the status page: folded over all its later
	// writers (streams.Fold), as verify and audit fold it.
	e.streamClass, e.streamEvidence = e.class, e.evidence
	if f := tracker.StreamClass(id); f.Len() > 1 {
		e.streamClass, e.streamEvidence = f.Class(), f.Evidence()
	}
}

// observeWriters reports the writers under judgement by class, the
// writers refused at metrics.max_judged_writers and what became of the
// held points, as stats reads them;
// nothing unless auto (metrics.overlap auto).
func observeWriters(tb *metadata.TelemetryBuilder, auto bool, stats func() streams.JudgeStats) error {
	var byClass [streams.NumClasses]metric.ObserveOption
	for c := range streams.Class(streams.NumClasses) {
		byClass[c] = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"), attribute.String("class", c.String())))
	}
	signal := metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics")))
	var byOutcome [streams.NumHeldOutcomes]metric.ObserveOption
	for o := range streams.HeldOutcome(streams.NumHeldOutcomes) {
		byOutcome[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"), attribute.String("outcome", o.String())))
	}
	return errors.Join(
		tb.RegisterProcessorDedupHeldPointsCallback(func(_ context.Context, o metric.Int64Observer) error {
			if !auto {
				return nil
			}
			for k, n := range stats().Held {
				o.Observe(int64(n), byOutcome[k])
			}
			return nil
		}),
		tb.RegisterProcessorDedupWritersCallback(func(_ context.Context, o metric.Int64Observer) error {
			if !auto {
				return nil
			}
			s := stats()
			for c, n := range s.ByClass {
				o.Observe(int64(n), byClass[c])
			}
			return nil
		}),
		tb.RegisterProcessorDedupWritersRefusedCallback(func(_ context.Context, o metric.Int64Observer) error {
			if !auto {
				return nil
			}
			o.Observe(int64(stats().Refused), signal)
			return nil
		}),
	)
}
