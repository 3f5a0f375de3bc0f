package dedupprocessor

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/streams"
)

// This file judges a metric request's points one at a time: the request's
// context, the per-point decision and its labels, and one loop over the
// point types, and the copy of a dropped point held when the tracker asks
// for it (Decision.Hold); bringing a held point up to date is
// metrics_held.go.

// shift rewrites a Sum point of a writer elected at an interpolated
// change-over: it starts where the previous writer ended, and counts from
// there. An integer point loses the offset rounded to the nearest integer,
// the same for every point of the writer, so that its increments are kept
// exactly; no value goes below zero.
func shift(dp pmetric.NumberDataPoint, sh streams.Shift) {
	dp.SetStartTimestamp(pcommon.Timestamp(sh.Start))
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		off := math.Round(sh.Offset)
		if off >= math.MaxInt64 { // only from a value at the int64 limit
			dp.SetIntValue(0)
			return
		}
		dp.SetIntValue(max(dp.IntValue()-int64(off), 0))
	case pmetric.NumberDataPointValueTypeDouble:
		dp.SetDoubleValue(max(dp.DoubleValue()-sh.Offset, 0))
	}
}

// remove judges one point and says whether to remove it. With overlap:
// split it labels the point of a writer that was not elected.
func (j *judging) remove(attrs pcommon.Map, pt streams.Point) bool {
	id := j.hasher.Point(attrs)
	pt.Conn = j.conn
	n := j.park.journal.Len()
	d := j.tracker.ObserveFrom(id, j.origin, j.shape, pt, j.now)
	j.id, j.d = id, d
	j.shift, j.shifted = d.Shift, d.Shifted
	j.c.received++
	// A held restart's point is not noted: held, not dropped, until its
	// writer is elected or found a second writer (metrics_restart.go).
	held := d.Restart && j.mutate
	if (d.Reason != streams.ReasonNone || d.Election != streams.ElectionNone) && !held {
		set := j.c.event.set
		j.c.note(d, j.metric, attrs, j.mutate)
		if j.auto && !set && j.c.event.set {
			classify(&j.c.event, j.tracker, j.shape, id, d) // metrics_class.go
			if j.c.event.class == streams.ClassCopy || j.c.event.streamClass == streams.ClassCopy {
				j.c.event.release = copyRelease(j.releases, j.rm) // releases.go
			}
		}
	}
	switch d.Verdict {
	case streams.Drop:
		if j.mutate && d.Reason == streams.ReasonDuplicate {
			j.park.check(j.copies, j.tracker, n)
		}
		return j.mutate
	case streams.Label:
		if j.mutate {
			j.labelSharer(attrs, d.Writer, d.Sharer)
		}
	}
	return false
}

// label adds the split attribute that names writer.
func (j *judging) label(attrs pcommon.Map, writer uint64) { j.labelSharer(attrs, writer, 0) }

// labelSharer adds the split attribute that names writer, or its chain
// sharer of a shared start (metrics_class.go).
func (j *judging) labelSharer(attrs pcommon.Map, writer uint64, sharer uint8) {
	if writer != j.named || sharer != j.sharer || j.name == "" {
		j.named, j.sharer = writer, sharer // one string per run of a writer's points
		if sharer == 0 {
			j.name = streams.WriterName(writer)
		} else {
			j.name = streams.SharerName(writer, sharer)
		}
	}
	attrs.PutStr(j.splitAttr, j.name)
}

// pointSlice is a metric's points of one type; dataPoint is one of them.
type pointSlice[P dataPoint] interface {
	Len() int
	At(i int) P
}

type dataPoint interface {
	Attributes() pcommon.Map
}

// pointKind is what judging needs of one point type: the point as the
// tracker reads it, how a dropped one is held (the put of judging.hold),
// what is done to one kept whose writer was elected shifted (nil:
// nothing), and the slice's RemoveIf.
type pointKind[S pointSlice[P], P dataPoint] struct {
	point func(P) streams.Point
	put   func(j *judging, dp P, m pmetric.Metric, reuse bool) (pcommon.Map, bool)
	kept  func(j *judging, dp P)
	// removeIf removes the points of dps that judgePoint drops. It calls
	// the slice's RemoveIf, and reads each point, directly: called through
	// S, its closure would escape, one allocation per metric, and each
	// point's reading would be an indirect call.
	removeIf func(dps S, j *judging, k *pointKind[S, P])
}

type (
	numberKind      = pointKind[pmetric.NumberDataPointSlice, pmetric.NumberDataPoint]
	histogramKind   = pointKind[pmetric.HistogramDataPointSlice, pmetric.HistogramDataPoint]
	exponentialKind = pointKind[pmetric.ExponentialHistogramDataPointSlice, pmetric.ExponentialHistogramDataPoint]
	summaryKind     = pointKind[pmetric.SummaryDataPointSlice, pmetric.SummaryDataPoint]
)

var (
	numberPoints = numberKind{point: streams.NumberPoint, put: putNumber, kept: shiftKept,
		removeIf: func(dps pmetric.NumberDataPointSlice, j *judging, k *numberKind) {
			dps.RemoveIf(func(dp pmetric.NumberDataPoint) bool {
				return judgePoint(j, dp, dp.Attributes(), streams.NumberPoint(dp), k)
			})
		}}
	histogramPoints = histogramKind{point: streams.HistogramPoint, put: putHistogram,
		removeIf: func(dps pmetric.HistogramDataPointSlice, j *judging, k *histogramKind) {
			dps.RemoveIf(func(dp pmetric.HistogramDataPoint) bool {
				return judgePoint(j, dp, dp.Attributes(), streams.HistogramPoint(dp), k)
			})
		}}
	exponentialPoints = exponentialKind{point: streams.ExponentialHistogramPoint, put: putExponential,
		removeIf: func(dps pmetric.ExponentialHistogramDataPointSlice, j *judging, k *exponentialKind) {
			dps.RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
				return judgePoint(j, dp, dp.Attributes(), streams.ExponentialHistogramPoint(dp), k)
			})
		}}
	summaryPoints = summaryKind{point: streams.SummaryPoint, put: putSummary,
		removeIf: func(dps pmetric.SummaryDataPointSlice, j *judging, k *summaryKind) {
			dps.RemoveIf(func(dp pmetric.SummaryDataPoint) bool {
				return judgePoint(j, dp, dp.Attributes(), streams.SummaryPoint(dp), k)
			})
		}}
)

// judgePoints judges a metric's points dps of kind k and says whether any
// are left; with mutate it removes (and holds) those to be dropped.
func judgePoints[S pointSlice[P], P dataPoint](j *judging, dps S, k *pointKind[S, P]) bool {
	if j.mutate {
		k.removeIf(dps, j, k)
		return dps.Len() > 0
	}
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		j.remove(dp.Attributes(), k.point(dp))
	}
	return true
}

// judgePoint judges point dp of kind k (its attributes attrs, as the
// tracker reads it pt), with mutate, and says whether to remove it: a
// dropped point is held when the tracker asks, a kept one rewritten when
// its kind says.
func judgePoint[S pointSlice[P], P dataPoint](j *judging, dp P, attrs pcommon.Map, pt streams.Point, k *pointKind[S, P]) bool {
	if !j.remove(attrs, pt) {
		if j.shifted && k.kept != nil {
			k.kept(j, dp)
		}
		return false
	}
	j.hold(func(m pmetric.Metric, reuse bool) (pcommon.Map, bool) { return k.put(j, dp, m, reuse) })
	return true
}

// shiftKept rewrites a kept Sum point of a writer elected at an
// interpolated change-over.
func shiftKept(j *judging, dp pmetric.NumberDataPoint) { shift(dp, j.shift) }

// keepMetric judges a metric's points and says whether any are left.
// Metrics the tracker cannot judge (no data, unspecified temporality) pass
// untouched.
func (j *judging) keepMetric(m pmetric.Metric) bool {
	shape, ok := j.hasher.Metric(m)
	if !ok {
		return true
	}
	j.shape, j.metric, j.m = shape, m.Name(), m
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return judgePoints(j, m.Gauge().DataPoints(), &numberPoints)
	case pmetric.MetricTypeSum:
		return judgePoints(j, m.Sum().DataPoints(), &numberPoints)
	case pmetric.MetricTypeHistogram:
		return judgePoints(j, m.Histogram().DataPoints(), &histogramPoints)
	case pmetric.MetricTypeExponentialHistogram:
		return judgePoints(j, m.ExponentialHistogram().DataPoints(), &exponentialPoints)
	case pmetric.MetricTypeSummary:
		return judgePoints(j, m.Summary().DataPoints(), &summaryPoints)
	}
	return true
}

// hold keeps a copy of the point just dropped, when the tracker asked for
// it (Decision.Hold): the metric being judged with the one point that
// put copies into it, in its resource and scope, labelled as its writer's
// own series, to be sent if the writer is found a peer (streams/held.go).
// A point held for the pair already is overwritten in place: its
// resource, scope and metric are the stream's; it is sized again only
// when put says the point's lists differ in length from the one before.
func (j *judging) hold(put func(m pmetric.Metric, reuse bool) (pcommon.Map, bool)) {
	if j.park.this {
		j.park.add(j, put)
		return
	}
	if j.d.Restart && j.mutate {
		j.holdRestart(put) // metrics_restart.go
	}
	if !j.d.Hold || !j.mutate {
		return
	}
	if md, size, ok := j.tracker.Held(j.id, j.d.Writer); ok {
		// The attributes are the stream's, labelled already.
		_, same := put(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0), true)
		if !same {
			size = j.sizer.MetricsSize(md)
		}
		j.tracker.Hold(j.id, j.d.Writer, md, size)
		return
	}
	md, m := j.envelope()
	attrs, _ := put(m, false)
	j.label(attrs, j.d.Writer)
	j.tracker.Hold(j.id, j.d.Writer, md, j.sizer.MetricsSize(md))
}

// The put functions hold a dropped point dp (judging.hold): into the held
// metric m, merged or overwritten when reuse, else as m's first point of
// its type, returning its attributes to label.

func putNumber(j *judging, dp pmetric.NumberDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse && !j.shape.Cumulative() {
		return pcommon.Map{}, mergeNumber(m.Sum().DataPoints().At(0), dp)
	}
	if reuse {
		return pcommon.Map{}, overwriteNumber(m.Sum().DataPoints().At(0), dp)
	}
	if j.m.Type() == pmetric.MetricTypeGauge { // a parked gauge point
		c := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.CopyTo(c)
		return c.Attributes(), false
	}
	sum := m.SetEmptySum()
	sum.SetAggregationTemporality(j.m.Sum().AggregationTemporality())
	sum.SetIsMonotonic(j.m.Sum().IsMonotonic())
	c := sum.DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

func putHistogram(j *judging, dp pmetric.HistogramDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse && !j.shape.Cumulative() && mergeHistogram(m.Histogram().DataPoints().At(0), dp) {
		return pcommon.Map{}, true
	}
	if reuse {
		return pcommon.Map{}, overwriteHistogram(m.Histogram().DataPoints().At(0), dp)
	}
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(j.m.Histogram().AggregationTemporality())
	c := h.DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

func putExponential(j *judging, dp pmetric.ExponentialHistogramDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse {
		overwriteExponential(m.ExponentialHistogram().DataPoints().At(0), dp)
		return pcommon.Map{}, false // its buckets vary: sized again
	}
	h := m.SetEmptyExponentialHistogram()
	h.SetAggregationTemporality(j.m.ExponentialHistogram().AggregationTemporality())
	c := h.DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

func putSummary(_ *judging, dp pmetric.SummaryDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse {
		return pcommon.Map{}, overwriteSummary(m.Summary().DataPoints().At(0), dp)
	}
	c := m.SetEmptySummary().DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}
