package serieslimit

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// pointAttrs is what every kind of data point has.
type pointAttrs interface{ Attributes() pcommon.Map }

// removePoints removes m's points for which drop holds and reports whether
// m is left without points.
func removePoints(m pmetric.Metric, drop func(pointAttrs) bool) bool {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		m.Gauge().DataPoints().RemoveIf(func(p pmetric.NumberDataPoint) bool { return drop(p) })
		return m.Gauge().DataPoints().Len() == 0
	case pmetric.MetricTypeSum:
		m.Sum().DataPoints().RemoveIf(func(p pmetric.NumberDataPoint) bool { return drop(p) })
		return m.Sum().DataPoints().Len() == 0
	case pmetric.MetricTypeHistogram:
		m.Histogram().DataPoints().RemoveIf(func(p pmetric.HistogramDataPoint) bool { return drop(p) })
		return m.Histogram().DataPoints().Len() == 0
	case pmetric.MetricTypeExponentialHistogram:
		m.ExponentialHistogram().DataPoints().RemoveIf(func(p pmetric.ExponentialHistogramDataPoint) bool { return drop(p) })
		return m.ExponentialHistogram().DataPoints().Len() == 0
	case pmetric.MetricTypeSummary:
		m.Summary().DataPoints().RemoveIf(func(p pmetric.SummaryDataPoint) bool { return drop(p) })
		return m.Summary().DataPoints().Len() == 0
	}
	return false
}
