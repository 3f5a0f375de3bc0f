package dedupotlpexporter

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	tracesSizer  ptrace.ProtoMarshaler
	logsSizer    plog.ProtoMarshaler
	metricsSizer pmetric.ProtoMarshaler
)

// errTooLarge is the refusal of a request holding an item that no
// upstream request can carry: permanent, InvalidArgument (HTTP 400).
func errTooLarge(what string, size, limit int) error {
	return consumererror.NewPermanent(status.Error(codes.InvalidArgument, fmt.Sprintf(
		"%s is %d bytes encoded, more than the upstream takes in one request (max_request_bytes %d); the request was not accepted",
		what, size, limit)))
}

// envelope is the bytes a resource or scope adds around what it holds,
// counted generously (tag, length, its own fields).
const envelope = 16

// serviceOf names an item's service for an error message: quoted, escaped
// and bounded, since it comes from the data.
func serviceOf(res pcommon.Resource) string {
	v, ok := res.Attributes().Get("service.name")
	if !ok {
		return `service ""`
	}
	s := v.AsString()
	if len(s) > 64 {
		s = s[:64]
		s = strings.ToValidUTF8(s, "") + "..."
	}
	return fmt.Sprintf("service %q", s)
}

func (up *upstream) checkTraces(td ptrace.Traces) (int, error) {
	limit := up.cfg.MaxRequestBytes
	total := tracesSizer.TracesSize(td)
	if total <= limit-envelope {
		return total, nil
	}
	if !up.splits {
		return total, errTooLarge(fmt.Sprintf("a request of %d spans", td.SpanCount()), total, limit)
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		if tracesSizer.ResourceSpansSize(rs) <= limit-envelope {
			continue
		}
		res := resourceSize(rs.Resource(), rs.SchemaUrl())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope := scopeSize(ss.Scope(), ss.SchemaUrl())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				s := spans.At(k)
				if n := res + scope + tracesSizer.SpanSize(s) + 3*envelope; n > limit {
					return total, errTooLarge(fmt.Sprintf("span %s/%s of %s", s.TraceID(), s.SpanID(), serviceOf(rs.Resource())), n, limit)
				}
			}
		}
	}
	return total, nil
}

// resourceSize and scopeSize are the encoded sizes of a resource's or a
// scope's own fields, without what they hold.
func resourceSize(r pcommon.Resource, schema string) int {
	rs := ptrace.NewResourceSpans()
	r.CopyTo(rs.Resource())
	rs.SetSchemaUrl(schema)
	return tracesSizer.ResourceSpansSize(rs)
}

func scopeSize(s pcommon.InstrumentationScope, schema string) int {
	ss := ptrace.NewScopeSpans()
	s.CopyTo(ss.Scope())
	ss.SetSchemaUrl(schema)
	return tracesSizer.ScopeSpansSize(ss)
}

func (up *upstream) checkLogs(ld plog.Logs) (int, error) {
	limit := up.cfg.MaxRequestBytes
	total := logsSizer.LogsSize(ld)
	if total <= limit-envelope {
		return total, nil
	}
	if !up.splits {
		return total, errTooLarge(fmt.Sprintf("a request of %d log records", ld.LogRecordCount()), total, limit)
	}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		if logsSizer.ResourceLogsSize(rl) <= limit-envelope {
			continue
		}
		res := resourceSize(rl.Resource(), rl.SchemaUrl())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			scope := scopeSize(sl.Scope(), sl.SchemaUrl())
			recs := sl.LogRecords()
			for k := 0; k < recs.Len(); k++ {
				if n := res + scope + logsSizer.LogRecordSize(recs.At(k)) + 3*envelope; n > limit {
					return total, errTooLarge(fmt.Sprintf("log record %d of scope %d of %s", k, j, serviceOf(rl.Resource())), n, limit)
				}
			}
		}
	}
	return total, nil
}

// checkMetrics refuses, when the batcher splits, a request holding a data
// point that cannot fit alone (the batcher splits metrics by points).
func (up *upstream) checkMetrics(md pmetric.Metrics) (int, error) {
	limit := up.cfg.MaxRequestBytes
	total := metricsSizer.MetricsSize(md)
	if total <= limit-envelope {
		return total, nil
	}
	if !up.splits {
		return total, errTooLarge(fmt.Sprintf("a request of %d metric points", md.DataPointCount()), total, limit)
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := resourceSize(rm.Resource(), rm.SchemaUrl())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			scope := scopeSize(sm.Scope(), sm.SchemaUrl())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if res+scope+metricsSizer.MetricSize(m)+3*envelope <= limit {
					continue
				}
				head := metricHeaderSize(m)
				if n := res + scope + head + largestPoint(m) + 4*envelope; n > limit {
					return total, errTooLarge(fmt.Sprintf("a point of metric %q of %s", boundName(m.Name()), serviceOf(rm.Resource())), n, limit)
				}
			}
		}
	}
	return total, nil
}

// metricHeaderSize is the encoded size of a metric without its points.
func metricHeaderSize(m pmetric.Metric) int {
	h := pmetric.NewMetric()
	h.SetName(m.Name())
	h.SetDescription(m.Description())
	h.SetUnit(m.Unit())
	m.Metadata().CopyTo(h.Metadata())
	return metricsSizer.MetricSize(h)
}

// largestPoint is the encoded size of m's largest data point.
func largestPoint(m pmetric.Metric) int {
	largest := 0
	at := func(n int) {
		if n > largest {
			largest = n
		}
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for _, p := range m.Gauge().DataPoints().All() {
			at(metricsSizer.NumberDataPointSize(p))
		}
	case pmetric.MetricTypeSum:
		for _, p := range m.Sum().DataPoints().All() {
			at(metricsSizer.NumberDataPointSize(p))
		}
	case pmetric.MetricTypeHistogram:
		for _, p := range m.Histogram().DataPoints().All() {
			at(metricsSizer.HistogramDataPointSize(p))
		}
	case pmetric.MetricTypeExponentialHistogram:
		for _, p := range m.ExponentialHistogram().DataPoints().All() {
			at(metricsSizer.ExponentialHistogramDataPointSize(p))
		}
	case pmetric.MetricTypeSummary:
		for _, p := range m.Summary().DataPoints().All() {
			at(metricsSizer.SummaryDataPointSize(p))
		}
	}
	return largest
}

func boundName(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "..."
	}
	return s
}
