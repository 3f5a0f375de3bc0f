package streams

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Visit is one data point met by Walk.
type Visit struct {
	ID       ID
	Shape    Shape
	Resource pcommon.Resource
	Scope    pcommon.InstrumentationScope
	Metric   pmetric.Metric
	Attrs    pcommon.Map // the point's attributes
	Point    Point
	// Origin is the Hasher's Origin for the point's resource and scope:
	// pass it to Tracker.ObserveFrom.
	Origin uint64
	// NewScope marks the first point of a ScopeMetrics: call
	// Tracker.NewScope(Identity) before observing it.
	NewScope bool
	// Identity is the Hasher's Identity for the point's resource.
	Identity uint64
}

// Walk calls fn for every data point of md that a Tracker can judge, in
// order, with its stream ID (from h) and what the Tracker needs of it. It is
// for tools that read whole requests (verify, audit); the processor walks
// pdata itself so that it can remove points as it goes.
func Walk(md pmetric.Metrics, h *Hasher, fn func(v *Visit)) {
	var v Visit
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		v.Resource = rm.Resource()
		h.Resource(v.Resource)
		v.Identity = h.Identity()
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			v.Scope = sm.Scope()
			h.Scope(v.Scope)
			v.Origin = h.Origin()
			v.NewScope = true
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				shape, ok := h.Metric(m)
				if !ok {
					continue
				}
				v.Metric, v.Shape = m, shape
				visit := func(attrs pcommon.Map, p Point) {
					v.Attrs, v.Point = attrs, p
					v.ID = h.Point(attrs)
					fn(&v)
					v.NewScope = false
				}
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps := m.Gauge().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						visit(dps.At(n).Attributes(), NumberPoint(dps.At(n)))
					}
				case pmetric.MetricTypeSum:
					dps := m.Sum().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						visit(dps.At(n).Attributes(), NumberPoint(dps.At(n)))
					}
				case pmetric.MetricTypeHistogram:
					dps := m.Histogram().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						visit(dps.At(n).Attributes(), HistogramPoint(dps.At(n)))
					}
				case pmetric.MetricTypeExponentialHistogram:
					dps := m.ExponentialHistogram().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						visit(dps.At(n).Attributes(), ExponentialHistogramPoint(dps.At(n)))
					}
				case pmetric.MetricTypeSummary:
					dps := m.Summary().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						visit(dps.At(n).Attributes(), SummaryPoint(dps.At(n)))
					}
				}
			}
		}
	}
}
