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

// classify adds the class and evidence of the point's writer to the
// request's event, which the point has just set. The elected writer's own
// events (a repeat, an election) carry no class.
func (j *judging) classify(id streams.ID, d streams.Decision) {
	e := &j.c.event
	if !j.shape.Cumulative() || d.Writer == d.Elected || d.Election != streams.ElectionNone {
		return // deltas and gauges are not classified
	}
	e.judged, e.class = true, d.Class
	if jd, ok := j.tracker.Judgement(id, d.Writer); ok {
		e.evidence = jd.Evidence.String()
	} else {
		e.evidence = "not judged: metrics.max_judged_writers reached"
	}
}

// observeWriters reports the writers under judgement by class and the
// writers refused at metrics.max_judged_writers.
func (u *metricUnit) observeWriters(tb *metadata.TelemetryBuilder) error {
	var byClass [streams.NumClasses]metric.ObserveOption
	for c := range streams.Class(streams.NumClasses) {
		byClass[c] = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"), attribute.String("class", c.String())))
	}
	signal := metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics")))
	stats := func() streams.JudgeStats {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.tracker.JudgeStats()
	}
	return errors.Join(
		tb.RegisterProcessorDedupWritersCallback(func(_ context.Context, o metric.Int64Observer) error {
			if !u.auto {
				return nil
			}
			s := stats()
			for c, n := range s.ByClass {
				o.Observe(int64(n), byClass[c])
			}
			return nil
		}),
		tb.RegisterProcessorDedupWritersRefusedCallback(func(_ context.Context, o metric.Int64Observer) error {
			if !u.auto {
				return nil
			}
			o.Observe(int64(stats().Refused), signal)
			return nil
		}),
	)
}
