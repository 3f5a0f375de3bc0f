package serieslimitprometheusexporter

import (
	"strings"
	"unicode/utf8"

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

// validUTF8 replaces each run of invalid UTF-8 in the strings that become
// Prometheus metric names, label names and label values with U+FFFD: the
// exporter would otherwise leave such a series out of every scrape and log
// an error for it each time.
func validUTF8(md pmetric.Metrics) {
	for _, rm := range md.ResourceMetrics().All() {
		validMap(rm.Resource().Attributes())
		for _, sm := range rm.ScopeMetrics().All() {
			sc := sm.Scope()
			if !utf8.ValidString(sc.Name()) {
				sc.SetName(strings.ToValidUTF8(sc.Name(), "\uFFFD"))
			}
			if !utf8.ValidString(sc.Version()) {
				sc.SetVersion(strings.ToValidUTF8(sc.Version(), "\uFFFD"))
			}
			validMap(sc.Attributes())
			for _, m := range sm.Metrics().All() {
				for _, f := range []struct {
					get func() string
					set func(string)
				}{{m.Name, m.SetName}, {m.Description, m.SetDescription}, {m.Unit, m.SetUnit}} {
					if s := f.get(); !utf8.ValidString(s) {
						f.set(strings.ToValidUTF8(s, "\uFFFD"))
					}
				}
				removePoints(m, func(p pointAttrs) bool { validMap(p.Attributes()); return false })
			}
		}
	}
}

// validMap makes m's keys and string values valid UTF-8.
func validMap(m pcommon.Map) {
	var bad []string
	for k, v := range m.All() {
		if !utf8.ValidString(k) {
			bad = append(bad, k)
			continue
		}
		if v.Type() == pcommon.ValueTypeStr && !utf8.ValidString(v.Str()) {
			v.SetStr(strings.ToValidUTF8(v.Str(), "\uFFFD"))
		}
	}
	for _, k := range bad {
		v, _ := m.Get(k)
		nv := pcommon.NewValueEmpty()
		v.CopyTo(nv)
		m.Remove(k)
		if nv.Type() == pcommon.ValueTypeStr {
			nv.SetStr(strings.ToValidUTF8(nv.Str(), "\uFFFD"))
		}
		nv.CopyTo(m.PutEmpty(strings.ToValidUTF8(k, "\uFFFD")))
	}
}
