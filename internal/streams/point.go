package streams

import (
	"math"
	"math/bits"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Kind is a metric's data type.
type Kind uint8

// Kinds, one per OTLP metric data type.
const (
	KindGauge Kind = iota + 1
	KindSum
	KindHistogram
	KindExponentialHistogram
	KindSummary
)

var kindNames = [...]string{"", "gauge", "sum", "histogram", "exponential_histogram", "summary"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Shape is what the Tracker needs to know of a stream's metric: its kind,
// whether it is cumulative and whether its value must not decrease.
type Shape uint8

const (
	kindMask      Shape = 7
	cumulativeBit Shape = 1 << 3
	monotonicBit  Shape = 1 << 4
)

// NewShape makes a Shape. Gauges are neither cumulative nor monotonic
// whatever the arguments say.
func NewShape(k Kind, cumulative, monotonic bool) Shape {
	s := Shape(k) & kindMask
	if k == KindGauge {
		return s
	}
	if cumulative {
		s |= cumulativeBit
	}
	if monotonic {
		s |= monotonicBit
	}
	return s
}

// Kind returns the metric's data type.
func (s Shape) Kind() Kind { return Kind(s & kindMask) }

// Cumulative says whether points carry running totals since their start
// time (Sum, Histogram and ExponentialHistogram with cumulative temporality;
// every Summary).
func (s Shape) Cumulative() bool { return s&cumulativeBit != 0 }

// Monotonic says whether a writer's values never decrease within one start
// time: monotonic Sums, and the count and sum of histograms and summaries
// (OTLP fills a histogram's or summary's sum only when it is monotonic).
func (s Shape) Monotonic() bool { return s&monotonicBit != 0 }

func (s Shape) String() string {
	t := s.Kind().String()
	if s.Kind() == KindGauge {
		return t
	}
	if s.Cumulative() {
		t += "/cumulative"
	} else {
		t += "/delta"
	}
	if s.Monotonic() {
		t += "/monotonic"
	}
	return t
}

// ShapeOf returns a metric's Shape; false for a type the Tracker does not
// judge: an empty metric, or a temporality that is neither cumulative nor
// delta.
func ShapeOf(m pmetric.Metric) (Shape, bool) {
	temporal := func(t pmetric.AggregationTemporality) (bool, bool) {
		switch t {
		case pmetric.AggregationTemporalityCumulative:
			return true, true
		case pmetric.AggregationTemporalityDelta:
			return false, true
		}
		return false, false
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return NewShape(KindGauge, false, false), true
	case pmetric.MetricTypeSum:
		cum, ok := temporal(m.Sum().AggregationTemporality())
		return NewShape(KindSum, cum, m.Sum().IsMonotonic()), ok
	case pmetric.MetricTypeHistogram:
		cum, ok := temporal(m.Histogram().AggregationTemporality())
		return NewShape(KindHistogram, cum, true), ok
	case pmetric.MetricTypeExponentialHistogram:
		cum, ok := temporal(m.ExponentialHistogram().AggregationTemporality())
		return NewShape(KindExponentialHistogram, cum, true), ok
	case pmetric.MetricTypeSummary:
		return NewShape(KindSummary, true, true), true
	}
	return 0, false
}

// Point is what the Tracker needs of one data point.
type Point struct {
	Start uint64 // StartTimeUnixNano: tells cumulative writers apart
	Time  uint64 // TimeUnixNano
	// Value is the number (Sum, Gauge) or the count (Histogram,
	// ExponentialHistogram, Summary): what must not decrease within one
	// start time when the stream is monotonic.
	Value float64
	// Sum is the sum of a histogram or summary, when HasSum.
	Sum    float64
	HasSum bool
	// NoValue marks a point flagged "no recorded value" (a staleness
	// marker): it is ordered by time like any point, but its value is not
	// compared or remembered.
	NoValue bool
	// Fingerprint summarises the whole value (not the times), so that an
	// exact repeat is recognised.
	Fingerprint uint64
	// Buckets are an explicit Histogram's bucket counts, when HasBuckets,
	// and Layout a digest of its bounds: the classifier compares them
	// (classify.go).
	Buckets    pcommon.UInt64Slice
	Layout     uint64
	HasBuckets bool
	// Min and Max are a histogram's smallest and largest measurement since
	// its start, when HasMinMax (both set, and a count above zero): the
	// classifier compares them (classify.go).
	Min, Max  float64
	HasMinMax bool
	// Conn names the connection the point arrived on (a keyed digest of
	// the sender's address; 0: not known, as in verify and audit): a
	// shared start's writers each export on their own (shared_conn.go).
	Conn uint64
}

// Fingerprint constants: odd 64-bit numbers with well mixed bits.
const (
	fp0 = 0xa0761d6478bd642f
	fp1 = 0xe7037ed1a0b428db
	fp2 = 0x8ebc6af09c88c6e3
	fp3 = 0x589965cc75374cc3
)

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

type fingerprint uint64

func (f *fingerprint) add(v uint64) { *f = fingerprint(mix(uint64(*f)^v, fp1)) }

func (f *fingerprint) float(v float64) { f.add(math.Float64bits(v)) }

// optional adds a histogram's optional sum, min and max, those it has.
func (f *fingerprint) optional(hasSum bool, sum float64, hasMin bool, min float64, hasMax bool, max float64) {
	if hasSum {
		f.float(sum)
	}
	if hasMin {
		f.float(min)
	}
	if hasMax {
		f.float(max + 1) // +1: a min equal to a max in the other slot still differs
	}
}

func noValue(flags pmetric.DataPointFlags) bool { return flags.NoRecordedValue() }

// NumberPoint reads a Gauge or Sum point.
func NumberPoint(dp pmetric.NumberDataPoint) Point {
	p := Point{Start: uint64(dp.StartTimestamp()), Time: uint64(dp.Timestamp()), NoValue: noValue(dp.Flags())}
	f := fingerprint(fp0 ^ uint64(dp.Flags()))
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		p.Value = float64(dp.IntValue())
		f.add(uint64(dp.IntValue()) ^ fp2)
	default:
		p.Value = dp.DoubleValue()
		f.float(dp.DoubleValue())
	}
	p.Fingerprint = uint64(f)
	return p
}

// HistogramPoint reads a Histogram point.
func HistogramPoint(dp pmetric.HistogramDataPoint) Point {
	p := Point{
		Start: uint64(dp.StartTimestamp()), Time: uint64(dp.Timestamp()),
		Value: float64(dp.Count()), Sum: dp.Sum(), HasSum: dp.HasSum(), NoValue: noValue(dp.Flags()),
	}
	f := fingerprint(fp1 ^ uint64(dp.Flags()))
	f.add(dp.Count())
	f.optional(dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	bc, eb := dp.BucketCounts(), dp.ExplicitBounds()
	f.add(uint64(bc.Len())<<32 | uint64(eb.Len()))
	for i := 0; i < bc.Len(); i++ {
		f.add(bc.At(i))
	}
	layout := fingerprint(fp3 ^ uint64(bc.Len()))
	for i := 0; i < eb.Len(); i++ {
		f.float(eb.At(i))
		layout.float(eb.At(i))
	}
	p.Fingerprint = uint64(f)
	p.Buckets, p.Layout, p.HasBuckets = bc, uint64(layout), bc.Len() > 0
	p.Min, p.Max, p.HasMinMax = minMax(dp.Count(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	return p
}

// minMax returns a histogram's min and max when it has both, over at least
// one measurement, and neither is NaN.
func minMax(count uint64, hasMin bool, lo float64, hasMax bool, hi float64) (float64, float64, bool) {
	if count == 0 || !hasMin || !hasMax || math.IsNaN(lo) || math.IsNaN(hi) {
		return 0, 0, false
	}
	return lo, hi, true
}

// ExponentialHistogramPoint reads an ExponentialHistogram point.
func ExponentialHistogramPoint(dp pmetric.ExponentialHistogramDataPoint) Point {
	p := Point{
		Start: uint64(dp.StartTimestamp()), Time: uint64(dp.Timestamp()),
		Value: float64(dp.Count()), Sum: dp.Sum(), HasSum: dp.HasSum(), NoValue: noValue(dp.Flags()),
	}
	f := fingerprint(fp2 ^ uint64(dp.Flags()))
	f.add(dp.Count())
	f.optional(dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	f.add(uint64(uint32(dp.Scale())))
	f.add(dp.ZeroCount())
	f.float(dp.ZeroThreshold())
	for _, b := range [2]pmetric.ExponentialHistogramDataPointBuckets{dp.Positive(), dp.Negative()} {
		bc := b.BucketCounts()
		f.add(uint64(uint32(b.Offset()))<<32 | uint64(bc.Len()))
		for i := 0; i < bc.Len(); i++ {
			f.add(bc.At(i))
		}
	}
	p.Fingerprint = uint64(f)
	p.Min, p.Max, p.HasMinMax = minMax(dp.Count(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	return p
}

// SummaryPoint reads a Summary point.
func SummaryPoint(dp pmetric.SummaryDataPoint) Point {
	p := Point{
		Start: uint64(dp.StartTimestamp()), Time: uint64(dp.Timestamp()),
		Value: float64(dp.Count()), Sum: dp.Sum(), HasSum: true, NoValue: noValue(dp.Flags()),
	}
	f := fingerprint(fp3 ^ uint64(dp.Flags()))
	f.add(dp.Count())
	f.float(dp.Sum())
	qs := dp.QuantileValues()
	f.add(uint64(qs.Len()))
	for i := 0; i < qs.Len(); i++ {
		q := qs.At(i)
		f.float(q.Quantile())
		f.float(q.Value())
	}
	p.Fingerprint = uint64(f)
	return p
}
