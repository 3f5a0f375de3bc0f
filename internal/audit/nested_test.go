package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/nested"
	"github.com/doubletake/doubletake/internal/reportjson"
)

// wrappedTwice builds one trace of service as a handler wrapped twice with
// one instrumentation stores it: two SERVER spans of one request, the
// inner one inside the outer, and the handler's child under the inner one.
// With twice false, the handler is wrapped once.
func wrappedTwice(service string, traceNo byte, start time.Time, twice bool) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otelhttp")
	ss.Scope().SetVersion("0.1.0")
	app := rs.ScopeSpans().AppendEmpty()
	app.Scope().SetName("app")
	tid := pcommon.TraceID{traceNo, 0xaa}
	add := func(ss ptrace.ScopeSpans, id, parent byte, kind ptrace.SpanKind, name string, from, to time.Duration) {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{traceNo, id})
		if parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID{traceNo, parent})
		}
		sp.SetKind(kind)
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(from)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(to)))
	}
	add(ss, 1, 0, ptrace.SpanKindServer, "POST /rollouts/{id}", 0, 60*time.Millisecond)
	handler := byte(1)
	if twice {
		add(ss, 2, 1, ptrace.SpanKindServer, "POST /rollouts/{id}", 100*time.Microsecond, 59900*time.Microsecond)
		handler = 2
	}
	add(app, 3, handler, ptrace.SpanKindInternal, "load rollout", time.Millisecond, 51*time.Millisecond)
	return td
}

var otelhttpScope = nested.Scope{Name: "otelhttp", Version: "0.1.0"}

func TestAuditTracesNested(t *testing.T) {
	end := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeSource{}
	for i := range 6 {
		start := end.Add(-time.Duration(i+1) * 5 * time.Minute)
		f.traces = append(f.traces, struct {
			start time.Time
			td    ptrace.Traces
		}{start, wrappedTwice("svc", byte(i+1), start, i < 4)})
	}
	rep, err := AuditTraces(context.Background(), f, TraceOptions{Service: "svc", End: end, Lookback: time.Hour, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Traces != 6 || rep.Spans.Duplicated != 0 || rep.Nested.Pairs != 4 || rep.Findings() != 4 || len(rep.Nested.Findings) != 1 {
		t.Fatalf("traces %d, duplicated ids %d, nested %+v, findings %d", rep.Traces, rep.Spans.Duplicated, rep.Nested, rep.Findings())
	}
	fd := rep.Nested.Findings[0]
	if fd.Key != (nested.Key{Service: "svc", Kind: "SERVER", Name: "POST /rollouts/{id}", OuterScope: otelhttpScope, InnerScope: otelhttpScope}) ||
		fd.Traces != 4 || fd.Occurrences != 4 || fd.AffectedSpans != 8 || fd.KindSpans != 10 || fd.Share != 0.8 {
		t.Fatalf("finding %+v", fd)
	}
	diag := `otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice ("POST /rollouts/{id}", 80% of server spans): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one`
	if fd.Diagnosis != diag {
		t.Fatalf("diagnosis %q", fd.Diagnosis)
	}

	var text bytes.Buffer
	if err := WriteTraceText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nno duplicate span ids\n",
		"\nnested duplicates (one operation recorded as two spans, one inside the other): 4 nested duplicates in 16 spans, 1 finding\n  - " + diag + "\n",
		`    service svc, SERVER span "POST /rollouts/{id}": 4 pairs in 4 traces; 8 of 10 server spans of the service (80%) are part of one; matched by name`,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := reportjson.Write(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Nested struct {
			Findings []nested.Finding `json:"findings"`
			Pairs    int              `json:"pairs"`
		} `json:"nested_duplicates"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Nested.Pairs != 4 || len(back.Nested.Findings) != 1 || back.Nested.Findings[0].Diagnosis != diag {
		t.Fatalf("JSON (%v):\n%s", err, js.String())
	}
	var html bytes.Buffer
	if err := WriteTraceHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<caption>Nested duplicates: one operation recorded as two spans (double instrumentation)</caption>",
		"<td>otelhttp 0.1.0</td><td>otelhttp 0.1.0</td><td>4</td><td>4</td><td>8 of 10 (80.0%)</td>",
		"<li>nested duplicate: otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice (&#34;POST /rollouts/{id}&#34;, 80% of server spans)",
	} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML lacks %q:\n%s", want, html.String())
		}
	}

	// Wrapped once: nothing to find.
	f2 := &fakeSource{}
	f2.traces = append(f2.traces, struct {
		start time.Time
		td    ptrace.Traces
	}{end.Add(-time.Minute), wrappedTwice("svc", 1, end.Add(-time.Minute), false)})
	rep, err = AuditTraces(context.Background(), f2, TraceOptions{Service: "svc", End: end})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Findings() != 0 || rep.Nested.Pairs != 0 || len(rep.Nested.Findings) != 0 || rep.Nested.Stats.Spans != 2 {
		t.Fatalf("single wrap: findings %d, nested %+v", rep.Findings(), rep.Nested)
	}
}

func TestAuditOTLPFilesNested(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	var lines [][]byte
	// Children are exported before their parents: the inner span and the
	// handler's child in one request, the outer span in the next.
	for i := range 3 {
		td := wrappedTwice("shop", byte(i+1), start.Add(time.Duration(i)*time.Second), true)
		outer := ptrace.NewTraces()
		rs := outer.ResourceSpans().AppendEmpty()
		td.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
		ss := td.ResourceSpans().At(0).ScopeSpans().At(0)
		oss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().CopyTo(oss.Scope())
		ss.Spans().At(0).CopyTo(oss.Spans().AppendEmpty())
		ss.Spans().RemoveIf(func(sp ptrace.Span) bool { return sp.ParentSpanID().IsEmpty() })
		for _, x := range []ptrace.Traces{td, outer} {
			b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(x)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, b)
		}
	}
	p := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(p, joinLines(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := AuditOTLPFiles([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Analysis
	if a.Spans.Duplicated != 0 || a.Nested.Pairs != 3 || len(a.Nested.Findings) != 1 || rep.Findings() != 1 {
		t.Fatalf("spans %+v nested %+v findings %d", a.Spans, a.Nested, rep.Findings())
	}
	if fd := a.Nested.Findings[0]; fd.Service != "shop" || fd.OuterScope != otelhttpScope || fd.InnerScope != otelhttpScope || fd.Traces != 3 || fd.Share != 1 {
		t.Fatalf("finding %+v", fd)
	}
	var text bytes.Buffer
	if err := WriteOTLPText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"nested duplicates (one operation recorded as two spans, one inside the other): 3 nested duplicates in 9 spans, 1 finding",
		`  - spans of service "shop": double instrumentation, 3 nested duplicates in 3 traces: otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice ("POST /rollouts/{id}", 100% of server spans)`,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var html bytes.Buffer
	if err := WriteOTLPHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	if !strings.Contains(h, "<caption>Nested duplicates: one operation recorded as two spans (double instrumentation)</caption>") ||
		strings.Count(h, "one request recorded twice") != 1 {
		t.Errorf("HTML: want the table and the diagnosis once (among the findings):\n%s", h)
	}
}
