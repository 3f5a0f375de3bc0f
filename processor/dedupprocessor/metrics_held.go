package dedupprocessor

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// This file brings a held point up to date, per point type: a newer point
// of its stream overwrites it, or a newer delta point of its chain is
// merged into it (judging.hold).

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

// The merge functions add a delta point of a held point's chain to it: a
// delta writer's held point is every interval it was held for, from the
// first one's start to the newest one's time (a chain's intervals follow
// each other, across intervals it sent nothing for; one that arrives late
// lies within them: the span only ever widens), so a peer found later
// loses none of its counts.

// mergeNumber adds dp to the held delta point c. An integer held point
// that meets a double one becomes a double. It says whether the encoded
// size is the same.
func mergeNumber(c, dp pmetric.NumberDataPoint) bool {
	same := c.ValueType() == dp.ValueType() && c.Exemplars().Len() == 0
	widen(c, dp)
	c.Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
	switch {
	case c.ValueType() == pmetric.NumberDataPointValueTypeInt && dp.ValueType() == pmetric.NumberDataPointValueTypeInt:
		c.SetIntValue(c.IntValue() + dp.IntValue())
	default:
		c.SetDoubleValue(numberOf(c) + numberOf(dp))
	}
	return same
}

// spanned is a data point with a delta interval (start, time].
type spanned interface {
	StartTimestamp() pcommon.Timestamp
	SetStartTimestamp(pcommon.Timestamp)
	Timestamp() pcommon.Timestamp
	SetTimestamp(pcommon.Timestamp)
}

// widen makes the held point c's span cover dp's too.
func widen[P spanned](c, dp P) {
	if s := dp.StartTimestamp(); s < c.StartTimestamp() {
		c.SetStartTimestamp(s)
	}
	if t := dp.Timestamp(); t > c.Timestamp() {
		c.SetTimestamp(t)
	}
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
	widen(c, dp)
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
