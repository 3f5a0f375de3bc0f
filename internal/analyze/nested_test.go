package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/nested"
)

// nspan is one span of a hand-built nested-duplicate request.
type nspan struct {
	scope, version string
	trace, id      byte
	parent         byte // 0: a root span
	kind           ptrace.SpanKind
	name           string
	start, end     time.Duration // from t0
}

// nestedTraces puts spans into one request of service "shop", one ScopeSpans per
// scope in the order met.
func nestedTraces(spans ...nspan) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "shop")
	scopes := map[string]ptrace.ScopeSpans{}
	for _, s := range spans {
		ss, ok := scopes[s.scope+" "+s.version]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(s.scope)
			ss.Scope().SetVersion(s.version)
			scopes[s.scope+" "+s.version] = ss
		}
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{s.trace, 7})
		sp.SetSpanID(pcommon.SpanID{s.id, 9})
		if s.parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID{s.parent, 9})
		}
		sp.SetKind(s.kind)
		sp.SetName(s.name)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(s.start)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(s.end)))
	}
	return td
}

const (
	asgi    = "opentelemetry.instrumentation.asgi"
	fastapi = "fastapi"
	httpx   = "opentelemetry.instrumentation.httpx"
)

// nestedRequests: trace 1 holds one nested duplicate (FastAPI's server
// span inside the ASGI middleware's, the inner one exported first, in an
// earlier request) and, under it, two near misses: a CLIENT span of the
// same name inside it, and a retry loop's two CLIENT attempts. Trace 2 is
// the third near miss: a short server span inside a long one.
func nestedRequests(a *Analyzer) {
	const srv, cli = ptrace.SpanKindServer, ptrace.SpanKindClient
	ms := time.Millisecond
	a.AddTraces(at(1, 0, "p1"), nestedTraces(
		nspan{fastapi, "0.142.0", 1, 2, 1, srv, "POST /rollout", 1 * ms, 99 * ms},
		nspan{httpx, "0.48b0", 1, 3, 2, cli, "POST /rollout", 2 * ms, 97 * ms},
		nspan{httpx, "0.48b0", 1, 4, 2, cli, "GET /stock", 3 * ms, 10 * ms},
		nspan{httpx, "0.48b0", 1, 5, 2, cli, "GET /stock", 11 * ms, 18 * ms},
	))
	a.AddTraces(at(2, 100*ms, "p1"), nestedTraces(
		nspan{asgi, "0.48b0", 1, 1, 0, srv, "POST /rollout", 0, 100 * ms},
		nspan{asgi, "0.48b0", 2, 1, 0, srv, "POST /rollout", 0, 100 * ms},
		nspan{fastapi, "0.142.0", 2, 2, 1, srv, "POST /rollout", 10 * ms, 50 * ms},
	))
}

func TestNestedFinding(t *testing.T) {
	a := New(Options{})
	nestedRequests(a)
	r := a.Report()

	diag := `fastapi 0.142.0 inside opentelemetry.instrumentation.asgi 0.48b0: one request recorded twice ("POST /rollout", 50% of server spans): two instrumentations are active; keep one`
	want := []nested.Finding{{
		Key: nested.Key{
			Service: "shop", Kind: "SERVER", Name: "POST /rollout",
			OuterScope: nested.Scope{Name: asgi, Version: "0.48b0"},
			InnerScope: nested.Scope{Name: fastapi, Version: "0.142.0"},
		},
		MatchedBy: nested.ByName, Traces: 1, Occurrences: 1,
		AffectedSpans: 2, KindSpans: 4, Share: 0.5,
		Diagnosis: diag,
		Examples: []nested.Example{{
			TraceID:     "01070000000000000000000000000000",
			OuterSpanID: "0109000000000000",
			InnerSpanID: "0209000000000000",
		}},
	}}
	if !reflect.DeepEqual(r.Nested.Findings, want) {
		t.Fatalf("nested findings:\n got %+v\nwant %+v", r.Nested.Findings, want)
	}
	// Held: 7 spans of service "shop", no routes or methods.
	strs := 0
	for _, x := range []string{fastapi, "0.142.0", "POST /rollout", httpx, "0.48b0", "POST /rollout", httpx, "0.48b0", "GET /stock", httpx, "0.48b0", "GET /stock",
		asgi, "0.48b0", "POST /rollout", asgi, "0.48b0", "POST /rollout", fastapi, "0.142.0", "POST /rollout"} {
		strs += len(x)
	}
	wantStats := nested.Stats{Spans: 7, Pairs: 1, Held: 7, MaxSpans: nested.DefaultMaxSpans,
		Bytes: 7*(nested.SpanOverhead+len("shop")) + strs, MaxBytes: nested.DefaultMaxBytes}
	if r.Nested.Stats != wantStats || r.Nested.Pairs != 1 || r.NestedDuplicates() != 1 {
		t.Fatalf("stats %+v pairs %d, want %+v and 1", r.Nested.Stats, r.Nested.Pairs, wantStats)
	}
	wantF := []Finding{{
		Signal: SignalSpans, Diagnosis: DiagNestedDuplicate, Subject: `service "shop"`, Items: 1,
		Line: `spans of service "shop": double instrumentation, 1 nested duplicate in 1 trace: ` + diag,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	// Nothing arrived twice by id: the duplicate ratio stays 0, and the
	// report is not clean.
	if r.DuplicateRatio() != 0 || r.Spans.ExtraCopies != 0 || r.Clean() {
		t.Fatalf("ratio %v, extra copies %d, clean %v", r.DuplicateRatio(), r.Spans.ExtraCopies, r.Clean())
	}
}

// TestNestedJSON pins the JSON shape of the section.
func TestNestedJSON(t *testing.T) {
	a := New(Options{})
	nestedRequests(a)
	b, err := json.MarshalIndent(a.Report().Nested, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "findings": [
    {
      "service": "shop",
      "kind": "SERVER",
      "name": "POST /rollout",
      "outer_scope": {
        "name": "opentelemetry.instrumentation.asgi",
        "version": "0.48b0"
      },
      "inner_scope": {
        "name": "fastapi",
        "version": "0.142.0"
      },
      "matched_by": "name",
      "traces": 1,
      "occurrences": 1,
      "siblings": 0,
      "affected_spans": 2,
      "kind_spans": 4,
      "share": 0.5,
      "diagnosis": "fastapi 0.142.0 inside opentelemetry.instrumentation.asgi 0.48b0: one request recorded twice (\"POST /rollout\", 50% of server spans): two instrumentations are active; keep one",
      "examples": [
        {
          "trace_id": "01070000000000000000000000000000",
          "outer_span_id": "0109000000000000",
          "inner_span_id": "0209000000000000"
        }
      ]
    }
  ],
  "pairs": 1,
  "min_coverage": 0.9,
  "skew_ms": 1.000,
  "stats": {
    "spans": 7,
    "duplicates": 0,
    "invalid_ids": 0,
    "pairs": 1,
    "held": 7,
    "max_spans": 100000,
    "evicted": 0,
    "evicted_waiting": 0,
    "bytes": 2724,
    "max_bytes": 67108864,
    "evicted_bytes": 0,
    "trace_marks_evicted": 0,
    "sibling_overflow": 0
  }
}`
	if string(b) != want {
		t.Fatalf("JSON:\n%s\nwant:\n%s", b, want)
	}
	// Without spans the section is there, empty.
	b, _ = json.Marshal(New(Options{}).Report())
	if !strings.Contains(string(b), `"nested_duplicates":{"findings":[],"pairs":0,`) {
		t.Fatalf("empty report: %s", b)
	}
}

func TestNestedNearMissesOnly(t *testing.T) {
	// The same requests without the pair's inner span (and so without the
	// span it parented): the near misses alone are not flagged.
	const srv, cli = ptrace.SpanKindServer, ptrace.SpanKindClient
	ms := time.Millisecond
	a := New(Options{})
	a.AddTraces(at(1, 0, "p1"), nestedTraces(
		nspan{asgi, "0.48b0", 1, 1, 0, srv, "POST /rollout", 0, 100 * ms},
		nspan{httpx, "0.48b0", 1, 3, 1, cli, "POST /rollout", 2 * ms, 97 * ms},
		nspan{httpx, "0.48b0", 1, 4, 1, cli, "GET /stock", 3 * ms, 10 * ms},
		nspan{httpx, "0.48b0", 1, 5, 1, cli, "GET /stock", 11 * ms, 18 * ms},
		nspan{asgi, "0.48b0", 2, 1, 0, srv, "POST /rollout", 0, 100 * ms},
		nspan{fastapi, "0.142.0", 2, 2, 1, srv, "POST /rollout", 10 * ms, 50 * ms},
	))
	r := a.Report()
	if len(r.Nested.Findings) != 0 || r.Nested.Pairs != 0 || len(r.Findings) != 0 || !r.Clean() {
		t.Fatalf("near misses flagged: %+v / %+v", r.Nested, r.Findings)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nnested duplicates (one operation recorded as two spans, one inside the other): none in 6 spans\n") {
		t.Fatalf("text:\n%s", b.String())
	}
}

func TestNestedDuplicateCopiesAreIDDuplicatesOnly(t *testing.T) {
	// A request exported twice (two exporters) repeats the pair's ids: one
	// nested finding, one pair, and the copies counted as id duplicates.
	a := New(Options{})
	nestedRequests(a)
	const srv = ptrace.SpanKindServer
	a.AddTraces(at(3, 101*time.Millisecond, "p2"), nestedTraces(
		nspan{asgi, "0.48b0", 1, 1, 0, srv, "POST /rollout", 0, 100 * time.Millisecond},
	))
	r := a.Report()
	if r.Nested.Pairs != 1 || r.Nested.Stats.Duplicates != 1 || r.Spans.ExtraCopies != 1 || len(r.Findings) != 2 {
		t.Fatalf("nested %+v, spans %+v, findings %+v", r.Nested, r.Spans, r.Findings)
	}
	if r.Findings[0].Diagnosis != DiagTwoExporters || r.Findings[1].Diagnosis != DiagNestedDuplicate {
		t.Fatalf("findings order: %+v", r.Findings)
	}
}

func TestNestedText(t *testing.T) {
	a := New(Options{})
	nestedRequests(a)
	var b bytes.Buffer
	if err := WriteText(&b, a.Report()); err != nil {
		t.Fatal(err)
	}
	want := `
nested duplicates (one operation recorded as two spans, one inside the other): 1 nested duplicate in 7 spans, 1 finding
  - fastapi 0.142.0 inside opentelemetry.instrumentation.asgi 0.48b0: one request recorded twice ("POST /rollout", 50% of server spans): two instrumentations are active; keep one
    service shop, SERVER span "POST /rollout": 1 pair in 1 trace; 2 of 4 server spans of the service (50%) are part of one; matched by name
    outer scope opentelemetry.instrumentation.asgi 0.48b0, inner scope fastapi 0.142.0
    e.g. trace 01070000000000000000000000000000: span 0209000000000000 inside span 0109000000000000

metrics:`
	if !strings.Contains(b.String(), want) {
		t.Fatalf("text report:\n%s\nwant it to contain:\n%s", b.String(), want)
	}
	if !strings.Contains(b.String(), "findings:\n  - spans of service \"shop\": double instrumentation, 1 nested duplicate in 1 trace: fastapi 0.142.0 inside") {
		t.Fatalf("findings list:\n%s", b.String())
	}
}

func TestNestedEvictionsReported(t *testing.T) {
	// A detector holding 2 spans: the inner span arrives first and is
	// forgotten before its parent comes; the miss is counted and said.
	a := New(Options{Nested: nested.Options{MaxSpans: 2}})
	const srv = ptrace.SpanKindServer
	ms := time.Millisecond
	a.AddTraces(at(1, 0, "p1"), nestedTraces(
		nspan{fastapi, "0.142.0", 1, 2, 1, srv, "POST /rollout", 1 * ms, 99 * ms},
		nspan{asgi, "0.48b0", 3, 1, 0, srv, "GET /", 0, ms},
		nspan{asgi, "0.48b0", 4, 1, 0, srv, "GET /", 0, ms},
	))
	a.AddTraces(at(2, 100*ms, "p1"), nestedTraces(
		nspan{asgi, "0.48b0", 1, 1, 0, srv, "POST /rollout", 0, 100 * ms},
	))
	r := a.Report()
	st := r.Nested.Stats
	if r.Nested.Pairs != 0 || st.Evicted != 2 || st.EvictedWaiting != 1 || st.MaxSpans != 2 {
		t.Fatalf("stats %+v", st)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "  warning: 2 spans were forgotten to stay within 2 held (1 before their parent arrived): a pair split across them was not compared\n") {
		t.Fatalf("text:\n%s", b.String())
	}
}

func TestNestedJUnit(t *testing.T) {
	a := New(Options{})
	nestedRequests(a)
	r := a.Report()
	cs := JUnitCases(r, 0, false)
	var got *JUnitCase
	for i := range cs {
		if cs[i].Class == "doubletake.verify.nested" {
			got = &cs[i]
		} else if cs[i].Failure != "" {
			t.Errorf("case %q failed: %s", cs[i].Name, cs[i].Failure)
		}
	}
	if got == nil || got.Failure != "1 nested duplicate (double instrumentation) in 1 finding" ||
		got.Detail != r.Findings[0].Line+"\n" {
		t.Fatalf("nested case: %+v", got)
	}
	for _, c := range JUnitCases(r, 0, true) {
		if c.Failure != "" {
			t.Errorf("allowed: case %q failed: %s", c.Name, c.Failure)
		}
	}
}

func TestNestedByteEvictionsReported(t *testing.T) {
	// A detector holding about one span's bytes: the inner span is
	// forgotten for max_bytes before its parent comes; said in the text.
	a := New(Options{Nested: nested.Options{MaxBytes: nested.SpanOverhead + 64}})
	const srv = ptrace.SpanKindServer
	ms := time.Millisecond
	a.AddTraces(at(1, 0, "p1"), nestedTraces(
		nspan{fastapi, "0.142.0", 1, 2, 1, srv, "POST /rollout", 1 * ms, 99 * ms},
		nspan{asgi, "0.48b0", 3, 1, 0, srv, "GET /", 0, ms},
	))
	a.AddTraces(at(2, 100*ms, "p1"), nestedTraces(
		nspan{asgi, "0.48b0", 1, 1, 0, srv, "POST /rollout", 0, 100 * ms},
	))
	r := a.Report()
	st := r.Nested.Stats
	if r.Nested.Pairs != 0 || st.EvictedBytes != 2 || st.Evicted != 0 {
		t.Fatalf("stats %+v", st)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("  warning: 2 spans were forgotten to stay within %d bytes held: a pair split across them was not compared\n", nested.SpanOverhead+64)
	if !strings.Contains(b.String(), want) {
		t.Fatalf("text:\n%s", b.String())
	}
}
