package otlpjsonencodingextension

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// strict is what a strict reader asks of one line: valid UTF-8 and valid
// JSON.
func strict(t *testing.T, b []byte) {
	t.Helper()
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("not valid JSON text (UTF-8 %v): %q", utf8.Valid(b), b)
	}
}

// hostile are strings pdata's JSON marshaler copies raw: invalid bytes
// alone, after a backslash and a quote, a truncated sequence at the end.
var hostile = []string{"bad\xffname", `back\` + "\xfe\"q", "cut\xe2\x82", "\xc0\xaf", "ok é"}

func TestTracesValidJSON(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc\xff")
	for _, h := range hostile {
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(h)
		sp.Attributes().PutStr("k\xfe", h)
	}
	raw, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if json.Valid(raw) && utf8.Valid(raw) {
		t.Fatal("pdata's own JSON is valid here: the test no longer shows the problem")
	}
	b, err := Encoding{}.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	strict(t, b)
	back, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	spans := back.ResourceSpans().At(0).ScopeSpans()
	for i, h := range hostile {
		got := spans.At(i).Spans().At(0).Name()
		if want := strings.ToValidUTF8(h, "\uFFFD"); got != want {
			t.Errorf("span %d name %q, want %q", i, got, want)
		}
	}
}

func TestValidDataUnchanged(t *testing.T) {
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("GET /ok é ☕ \\ \"")
	raw, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	b, _ := Encoding{}.MarshalTraces(td)
	if string(b) != string(raw) {
		t.Fatalf("valid data changed:\n%s\n%s", raw, b)
	}
}

func TestLogsAndMetricsValidJSON(t *testing.T) {
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetStr("body\xff")
	b, err := Encoding{}.MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	strict(t, b)
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("m\xff")
	m.SetEmptyGauge().DataPoints().AppendEmpty().Attributes().PutStr("k", "v\xfe")
	b, err = Encoding{}.MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	strict(t, b)
}

func TestFactory(t *testing.T) {
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(Type), f.CreateDefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ext.(ptrace.Marshaler); !ok {
		t.Fatal("the extension is not a traces marshaler")
	}
	if err := ext.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// FuzzMarshalTraces: whatever bytes a span name and an attribute hold, the
// line is valid JSON text that reads back.
func FuzzMarshalTraces(f *testing.F) {
	for _, h := range hostile {
		f.Add(h, []byte(h))
	}
	f.Fuzz(func(t *testing.T, name string, val []byte) {
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(name)
		sp.Attributes().PutStr(string(val), string(val))
		sp.Attributes().PutEmptyBytes("b").FromRaw(val)
		b, err := Encoding{}.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		strict(t, b)
		if _, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b); err != nil {
			t.Fatalf("does not read back: %v\n%q", err, b)
		}
	})
}
