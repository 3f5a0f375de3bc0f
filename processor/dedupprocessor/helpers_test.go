package dedupprocessor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// fakeClock is a settable clock in Unix nanoseconds.
type fakeClock struct{ t int64 }

func (c *fakeClock) now() int64 { return c.t }

// harness is one dedup component with a sink behind each signal and a
// telemetry reader.
type harness struct {
	t      *testing.T
	tel    *componenttest.Telemetry
	traces processor.Traces
	logs   processor.Logs
	tsink  *consumertest.TracesSink
	lsink  *consumertest.LogsSink
	clock  *fakeClock
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig()
	if mutate != nil {
		mutate(cfg)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	h := &harness{t: t, tel: componenttest.NewTelemetry(), tsink: new(consumertest.TracesSink), lsink: new(consumertest.LogsSink), clock: &fakeClock{t: 1e18}}
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	f := NewFactory()
	var err error
	h.traces, err = f.CreateTraces(context.Background(), set, cfg, h.tsink)
	if err != nil {
		t.Fatal(err)
	}
	h.logs, err = f.CreateLogs(context.Background(), set, cfg, h.lsink)
	if err != nil {
		t.Fatal(err)
	}
	st := h.traces.(*tracesProcessor).st
	st.traces.now, st.logs.now = h.clock.now, h.clock.now
	for _, c := range []component.Component{h.traces, h.logs} {
		if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, c := range []component.Component{h.traces, h.logs} {
			if err := c.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
		_ = h.tel.Shutdown(context.Background())
	})
	return h
}

func (h *harness) sendTraces(td ptrace.Traces) error {
	return h.traces.ConsumeTraces(context.Background(), td)
}

// delivered returns the span names the sink received, in order, and
// resets the sink.
func (h *harness) delivered() []string {
	var out []string
	for _, td := range h.tsink.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					out = append(out, spans.At(k).Name())
				}
			}
		}
	}
	h.tsink.Reset()
	return out
}

// counter sums a counter's data points whose attributes include want.
func (h *harness) counter(name string, want ...attribute.KeyValue) int64 {
	h.t.Helper()
	m, err := h.tel.GetMetric(name)
	if err != nil {
		return 0 // never recorded
	}
	var sum int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if hasAll(dp.Attributes, want) {
			sum += dp.Value
		}
	}
	return sum
}

func (h *harness) gauge(name string, want ...attribute.KeyValue) float64 {
	h.t.Helper()
	m, err := h.tel.GetMetric(name)
	if err != nil {
		h.t.Fatalf("metric %s: %v", name, err)
	}
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			if hasAll(dp.Attributes, want) {
				return float64(dp.Value)
			}
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			if hasAll(dp.Attributes, want) {
				return dp.Value
			}
		}
	}
	h.t.Fatalf("metric %s has no point with %v", name, want)
	return 0
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// spanSpec describes a span for traces().
type spanSpec struct {
	service string
	trace   byte // trace id: 16 bytes of this value (0: all zero)
	span    byte // span id: 8 bytes of this value (0: all zero)
	name    string
	end     uint64 // end time offset; start is fixed
}

// traces builds one request; consecutive specs of one service share a
// resource.
func traces(specs ...spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	var ss ptrace.SpanSlice
	last := "\x00"
	for _, sp := range specs {
		if sp.service != last {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", sp.service)
			ss = rs.ScopeSpans().AppendEmpty().Spans()
			last = sp.service
		}
		s := ss.AppendEmpty()
		var tid pcommon.TraceID
		var sid pcommon.SpanID
		for i := range tid {
			tid[i] = sp.trace
		}
		for i := range sid {
			sid[i] = sp.span
		}
		s.SetTraceID(tid)
		s.SetSpanID(sid)
		s.SetName(sp.name)
		s.SetStartTimestamp(1_000)
		s.SetEndTimestamp(pcommon.Timestamp(2_000 + sp.end))
		s.Attributes().PutStr("http.route", "/"+sp.name)
	}
	return td
}

// logSpec describes a log record for logs().
type logSpec struct {
	service string
	body    string
	ts      uint64
	attr    string
}

func logs(specs ...logSpec) plog.Logs {
	ld := plog.NewLogs()
	for _, sp := range specs {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", sp.service)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("scope")
		r := sl.LogRecords().AppendEmpty()
		r.Body().SetStr(sp.body)
		r.SetTimestamp(pcommon.Timestamp(sp.ts))
		r.SetSeverityNumber(plog.SeverityNumberInfo)
		if sp.attr != "" {
			r.Attributes().PutStr("k", sp.attr)
		}
	}
	return ld
}

// failingTraces refuses every request with err.
type failingTraces struct {
	consumertest.TracesSink
	err error
}

func (f *failingTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if f.err != nil {
		return f.err
	}
	return f.TracesSink.ConsumeTraces(ctx, td)
}

func (f *failingTraces) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

var errDownstream = errors.New("downstream unavailable")

type consumerCapabilities = consumer.Capabilities

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
