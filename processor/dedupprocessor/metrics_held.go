package dedupprocessor

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// This file holds a copy of a dropped point when the tracker asks for it
// (Decision.Hold), per point type: put into a new held metric, or merged
// into or overwriting the one held already.

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
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	j.rm.Resource().CopyTo(rm.Resource())
	rm.SetSchemaUrl(j.rm.SchemaUrl())
	sm := rm.ScopeMetrics().AppendEmpty()
	j.sm.Scope().CopyTo(sm.Scope())
	sm.SetSchemaUrl(j.sm.SchemaUrl())
	m := sm.Metrics().AppendEmpty()
	m.SetName(j.m.Name())
	m.SetDescription(j.m.Description())
	m.SetUnit(j.m.Unit())
	j.m.Metadata().CopyTo(m.Metadata())
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

// The overwrite functions copy a newer point of a held point's stream into
// it, all but the attributes (the stream's, and labelled), and say whether
// its encoded size is the same (the lists it holds are as long).

func overwriteNumber(c, dp pmetric.NumberDataPoint) bool {
	same := c.Exemplars().Len() == dp.Exemplars().Len() && c.ValueType() == dp.ValueType() && dp.Exemplars().Len() == 0
	c.SetStartTimestamp(dp.StartTimestamp())
	c.SetTimestamp(dp.Timestamp())
	c.SetFlags(dp.Flags())
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		c.SetIntValue(dp.IntValue())
	case pmetric.NumberDataPointValueTypeDouble:
		c.SetDoubleValue(dp.DoubleValue())
	}
	dp.Exemplars().CopyTo(c.Exemplars())
	return same
}

// The merge functions add a newer delta point of a held point's chain to
// it: a delta writer's held point is every interval it was held for, from
// the first one's start to the newest one's time (a chain's intervals are
// contiguous), so a peer found later loses none of its counts.

// mergeNumber adds dp to the held delta point c. An integer held point
// that meets a double one becomes a double. It says whether the encoded
// size is the same.
func mergeNumber(c, dp pmetric.NumberDataPoint) bool {
	same := c.ValueType() == dp.ValueType() && c.Exemplars().Len() == 0
	c.SetTimestamp(dp.Timestamp())
	c.Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
	switch {
	case c.ValueType() == pmetric.NumberDataPointValueTypeInt && dp.ValueType() == pmetric.NumberDataPointValueTypeInt:
		c.SetIntValue(c.IntValue() + dp.IntValue())
	default:
		c.SetDoubleValue(numberOf(c) + numberOf(dp))
	}
	return same
}

func numberOf(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// mergeHistogram adds dp to the held delta point c when their buckets'
// bounds are the same, and says whether it did (not: the caller
// overwrites the held point, and the counts held before are lost).
func mergeHistogram(c, dp pmetric.HistogramDataPoint) bool {
	if !c.ExplicitBounds().Equal(dp.ExplicitBounds()) || c.BucketCounts().Len() != dp.BucketCounts().Len() || c.HasSum() != dp.HasSum() {
		return false
	}
	c.SetTimestamp(dp.Timestamp())
	c.Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
	if dp.Count() > 0 {
		if dp.HasMin() && (!c.HasMin() || c.Count() == 0 || dp.Min() < c.Min()) {
			c.SetMin(dp.Min())
		}
		if dp.HasMax() && (!c.HasMax() || c.Count() == 0 || dp.Max() > c.Max()) {
			c.SetMax(dp.Max())
		}
	}
	c.SetCount(c.Count() + dp.Count())
	if dp.HasSum() {
		c.SetSum(c.Sum() + dp.Sum())
	}
	for i := range dp.BucketCounts().Len() {
		c.BucketCounts().SetAt(i, c.BucketCounts().At(i)+dp.BucketCounts().At(i))
	}
	return true
}

func overwriteHistogram(c, dp pmetric.HistogramDataPoint) bool {
	same := c.BucketCounts().Len() == dp.BucketCounts().Len() && c.ExplicitBounds().Len() == dp.ExplicitBounds().Len() &&
		c.HasSum() == dp.HasSum() && c.HasMin() == dp.HasMin() && c.HasMax() == dp.HasMax() &&
		c.Exemplars().Len() == 0 && dp.Exemplars().Len() == 0
	c.SetStartTimestamp(dp.StartTimestamp())
	c.SetTimestamp(dp.Timestamp())
	c.SetFlags(dp.Flags())
	c.SetCount(dp.Count())
	c.RemoveSum()
	if dp.HasSum() {
		c.SetSum(dp.Sum())
	}
	c.RemoveMin()
	if dp.HasMin() {
		c.SetMin(dp.Min())
	}
	c.RemoveMax()
	if dp.HasMax() {
		c.SetMax(dp.Max())
	}
	dp.BucketCounts().CopyTo(c.BucketCounts())
	dp.ExplicitBounds().CopyTo(c.ExplicitBounds())
	dp.Exemplars().CopyTo(c.Exemplars())
	return same
}

func overwriteExponential(c, dp pmetric.ExponentialHistogramDataPoint) {
	attrs := pcommon.NewMap()
	c.Attributes().MoveTo(attrs)
	dp.CopyTo(c)
	attrs.MoveTo(c.Attributes())
}

func overwriteSummary(c, dp pmetric.SummaryDataPoint) bool {
	same := c.QuantileValues().Len() == dp.QuantileValues().Len()
	c.SetStartTimestamp(dp.StartTimestamp())
	c.SetTimestamp(dp.Timestamp())
	c.SetFlags(dp.Flags())
	c.SetCount(dp.Count())
	c.SetSum(dp.Sum())
	dp.QuantileValues().CopyTo(c.QuantileValues())
	return same
}
