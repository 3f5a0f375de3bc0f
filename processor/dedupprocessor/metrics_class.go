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
	if d.Writer == d.Elected && shape.Cumulative() && (d.Sharer > 0 || d.Reason == streams.ReasonDecrease || d.Reason == streams.ReasonOverlap) {
		classifyShared(e, tracker, id, d)
		return
	}
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

// classifyShared names writers that share one start (streams/shared.go):
// split (the point's chain is a peer's own series) or not (a value fell
// that no chain could take), with the Tracker's evidence.
func classifyShared(e *metricEvent, tracker *streams.Tracker, id streams.ID, d streams.Decision) {
	ev, ok := tracker.Shared(id)
	switch {
	case ok && ev.Writers > 1:
		e.judged, e.class, e.evidence = true, streams.ClassPeer, ev.String()
	case ok:
		e.judged, e.class, e.evidence = true, streams.ClassUndecided, ev.String()
	case d.Reason == streams.ReasonDecrease:
		e.judged, e.class = true, streams.ClassUndecided
		e.evidence = "writers sharing one start: not split (yet): their values fell without a new start; split once their times repeat an export interval, never if they export within 50ms of each other"
	default:
		return
	}
	e.streamClass, e.streamEvidence = e.class, e.evidence
}

// The rules that decide writers without a pair's bounds, as
// otelcol_processor_dedup_writer_rules names them: quiet (a peer that went
// quiet while the elected writer went on), shared_start_split (streams
// whose writers shared a start, split) and shared_start_unsplit (points of
// a shared start that could not be split), continued (delta chains whose
// first point arrived before the point it follows, decided with that
// point's writer; intervals that arrived after the point that went on
// across them), across_gap (delta points that went on from their chain
// after intervals it sent nothing for) and empty_interval (those of them
// across one interval known empty: exports.go).
const (
	ruleQuiet = iota
	ruleSharedSplit
	ruleSharedUnsplit
	ruleContinued
	ruleAcrossGap
	ruleEmptyInterval
	numRules
)

var ruleNames = [numRules]string{"quiet", "shared_start_split", "shared_start_unsplit", "continued", "across_gap", "empty_interval"}

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
	var byRule [numRules]metric.ObserveOption
	for r, name := range ruleNames {
		byRule[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"), attribute.String("rule", name)))
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
		tb.RegisterProcessorDedupWriterRulesCallback(func(_ context.Context, o metric.Int64Observer) error {
			if !auto {
				return nil
			}
			s := stats()
			o.Observe(int64(s.Quiet), byRule[ruleQuiet])
			o.Observe(int64(s.SharedSplit), byRule[ruleSharedSplit])
			o.Observe(int64(s.SharedUnsplit), byRule[ruleSharedUnsplit])
			o.Observe(int64(s.Continued), byRule[ruleContinued])
			o.Observe(int64(s.AcrossGap), byRule[ruleAcrossGap])
			o.Observe(int64(s.EmptyIntervals), byRule[ruleEmptyInterval])
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
