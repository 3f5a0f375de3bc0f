package nested

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/reportjson"
)

const (
	asgi    = "opentelemetry.instrumentation.asgi"
	fastapi = "fastapi"
)

func TestDetectFastAPIInsideASGI(t *testing.T) {
	route := map[string]any{"http.route": "/rollout", "http.request.method": "POST"}
	spans := []s{
		{svc: "gym", scope: asgi, ver: "0.48b0", id: 1, name: "POST /rollout", kind: server, start: 0, end: 100, attrs: route},
		{svc: "gym", scope: fastapi, ver: "0.142.0", id: 2, parent: 1, name: "POST /rollout", kind: server, start: 0.2, end: 99.5, attrs: route},
		{svc: "gym", scope: "app", id: 3, parent: 2, name: "rollout", kind: internal, start: 1, end: 98},
	}
	rep := Detect(build(spans...), Options{})
	want := []Finding{{
		Key: Key{
			Service:    "gym",
			Kind:       "SERVER",
			Name:       "POST /rollout",
			OuterScope: Scope{asgi, "0.48b0"},
			InnerScope: Scope{fastapi, "0.142.0"},
		},
		MatchedBy:     ByName,
		Traces:        1,
		Occurrences:   1,
		AffectedSpans: 2,
		KindSpans:     2,
		Share:         1,
		Diagnosis:     `fastapi 0.142.0 inside opentelemetry.instrumentation.asgi 0.48b0: one request recorded twice ("POST /rollout", 100% of server spans): two instrumentations are active; keep one`,
		Examples: []Example{{
			TraceID:     tid(1).String(),
			OuterSpanID: sid(1).String(),
			InnerSpanID: sid(2).String(),
		}},
	}}
	if !reflect.DeepEqual(rep.Findings, want) {
		t.Fatalf("findings:\n got %+v\nwant %+v", rep.Findings, want)
	}
	wantStats := Stats{Spans: 3, Pairs: 1, Held: 3, MaxSpans: DefaultMaxSpans, Bytes: heldBytes(spans...), MaxBytes: DefaultMaxBytes}
	if rep.Stats != wantStats {
		t.Fatalf("stats: got %+v want %+v", rep.Stats, wantStats)
	}
}

func TestDetectOtelhttpTwiceSiblings(t *testing.T) {
	// Two otelhttp wrappers that both extract the incoming context: two
	// SERVER siblings under the client's span.
	td := build(
		s{svc: "api", scope: otelhttpScope, ver: "0.71.0", id: 1, name: "POST", kind: client, start: 0, end: 20},
		s{svc: "api", scope: otelhttpScope, ver: "0.71.0", id: 2, parent: 1, name: "POST /rollouts/{id}", kind: server, start: 1, end: 19},
		s{svc: "api", scope: otelhttpScope, ver: "0.71.0", id: 3, parent: 1, name: "POST /rollouts/{id}", kind: server, start: 1.01, end: 18.99},
		s{svc: "api", scope: "app", id: 4, parent: 3, name: "load rollout", kind: internal, start: 2, end: 18},
	)
	d := NewDetector(Options{})
	pairs := d.Add(td)
	if len(pairs) != 1 || !pairs[0].Sibling || pairs[0].Outer != sid(2) || pairs[0].Inner != sid(3) || pairs[0].MatchedBy != ByName {
		t.Fatalf("pairs: %+v", pairs)
	}
	fs := d.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings: %+v", fs)
	}
	f := fs[0]
	if f.Siblings != 1 || f.Occurrences != 1 || f.AffectedSpans != 2 || f.KindSpans != 2 || f.Share != 1 {
		t.Fatalf("finding: %+v", f)
	}
	want := otelhttpScope + ` 0.71.0 inside ` + otelhttpScope + ` 0.71.0: one request recorded twice ("POST /rollouts/{id}", 100% of server spans): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one`
	if f.Diagnosis != want {
		t.Fatalf("diagnosis:\n got %s\nwant %s", f.Diagnosis, want)
	}
}

// TestMatchRules runs one parent and one child (or two siblings) per case.
func TestMatchRules(t *testing.T) {
	post := func(route string) map[string]any {
		m := map[string]any{"http.request.method": "POST"}
		if route != "" {
			m["http.route"] = route
		}
		return m
	}
	type tc struct {
		name  string
		opts  Options
		spans []s
		by    string // "" = no finding
	}
	outer := func(kind ptrace.SpanKind, name string, start, end float64, attrs map[string]any) s {
		return s{svc: "svc", scope: "a", ver: "1", id: 1, name: name, kind: kind, start: start, end: end, attrs: attrs}
	}
	inner := func(kind ptrace.SpanKind, name string, start, end float64, attrs map[string]any) s {
		return s{svc: "svc", scope: "b", ver: "2", id: 2, parent: 1, name: name, kind: kind, start: start, end: end, attrs: attrs}
	}
	sameScope := func(x s) s { x.scope, x.ver = "a", "1"; return x }
	cases := []tc{
		{name: "server in server, same name", by: ByName, spans: []s{
			outer(server, "GET /x", 0, 100, nil), inner(server, "GET /x", 1, 99, nil)}},
		{name: "server in server, same scope twice", by: ByName, spans: []s{
			outer(server, "GET /x", 0, 100, nil), sameScope(inner(server, "GET /x", 1, 99, nil))}},
		// Near misses.
		{name: "client inside server of the same name", spans: []s{
			outer(server, "GET /x", 0, 100, nil), inner(client, "GET /x", 1, 99, nil)}},
		{name: "short child inside a long parent", spans: []s{
			outer(server, "GET /x", 0, 100, nil), inner(server, "GET /x", 10, 20, nil)}},
		{name: "retry loop: sibling client attempts", spans: []s{
			{svc: "svc", scope: "a", id: 1, name: "fetch", kind: internal, start: 0, end: 100},
			{svc: "svc", scope: "h", id: 2, parent: 1, name: "GET", kind: client, start: 0, end: 30},
			{svc: "svc", scope: "h", id: 3, parent: 1, name: "GET", kind: client, start: 35, end: 65},
			{svc: "svc", scope: "h", id: 4, parent: 1, name: "GET", kind: client, start: 70, end: 100}}},
		{name: "retry loop: one traceparent re-sent, sibling server spans", spans: []s{
			{svc: "svc", scope: "h", id: 2, parent: 9, name: "GET /x", kind: server, start: 0, end: 30},
			{svc: "svc", scope: "h", id: 3, parent: 9, name: "GET /x", kind: server, start: 35, end: 65}}},
		{name: "retry loop: one logical call, attempts as children", spans: []s{
			outer(client, "GET /x", 0, 100, nil),
			inner(client, "GET /x", 0, 48, nil),
			{svc: "svc", scope: "b", ver: "2", id: 3, parent: 1, name: "GET /x", kind: client, start: 50, end: 100}}},
		{name: "internal recursion, same scope", spans: []s{
			outer(internal, "walk", 0, 100, nil), sameScope(inner(internal, "walk", 1, 99, nil))}},
		{name: "internal in internal, other scope", by: ByName, spans: []s{
			outer(internal, "walk", 0, 100, nil), inner(internal, "walk", 1, 99, nil)}},
		{name: "unspecified reads as internal", by: ByName, spans: []s{
			outer(internal, "walk", 0, 100, nil), inner(ptrace.SpanKindUnspecified, "walk", 1, 99, nil)}},
		{name: "consumer in consumer, same scope", by: ByName, spans: []s{
			outer(consumer, "orders process", 0, 100, nil), sameScope(inner(consumer, "orders process", 1, 99, nil))}},
		{name: "other service", spans: []s{
			outer(server, "GET /x", 0, 100, nil),
			{svc: "other", scope: "b", id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99}}},
		{name: "other name, no route", spans: []s{
			outer(server, "GET /x", 0, 100, nil), inner(server, "GET /y", 1, 99, nil)}},
		{name: "same route and method, other names", by: ByRoute, spans: []s{
			outer(server, "POST /rollouts/{id}", 0, 100, post("/rollouts/{id}")),
			inner(server, "rollout_create", 1, 99, post("/rollouts/{id}"))}},
		{name: "url.template and legacy http.method", by: ByRoute, spans: []s{
			outer(client, "POST", 0, 100, map[string]any{"url.template": "/r/{id}", "http.method": "POST"}),
			inner(client, "post_r", 1, 99, map[string]any{"url.template": "/r/{id}", "http.method": "POST"})}},
		{name: "same route, other method", spans: []s{
			outer(server, "a", 0, 100, post("/r")),
			inner(server, "b", 1, 99, map[string]any{"http.route": "/r", "http.request.method": "PUT"})}},
		{name: "outer named by its method alone", by: ByMethod, spans: []s{
			outer(server, "POST", 0, 100, post("")),
			inner(server, "POST /rollouts/{id}", 1, 99, post("/rollouts/{id}"))}},
		{name: "method-only name but client kind", spans: []s{
			outer(client, "POST", 0, 100, post("")),
			inner(client, "POST /rollouts/{id}", 1, 99, post("/rollouts/{id}"))}},
		{name: "coverage exactly 0.9 (plus skew)", by: ByName, spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", 5, 95, nil)}},
		{name: "coverage 0.88", spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", 5, 93, nil)}},
		{name: "coverage 0.6 with min_coverage 0.5", by: ByName, opts: Options{MinCoverage: 0.5}, spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", 20, 80, nil)}},
		{name: "starts 0.5ms early: within skew", by: ByName, spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", -0.5, 99, nil)}},
		{name: "ends 0.5ms late: within skew", by: ByName, spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", 1, 100.5, nil)}},
		{name: "starts 2ms early: beyond skew", spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", -2, 99, nil)}},
		{name: "starts 2ms early, skew 5ms", by: ByName, opts: Options{Skew: 5 * time.Millisecond}, spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", -2, 99, nil)}},
		{name: "end before start", spans: []s{
			outer(server, "x", 0, 100, nil), inner(server, "x", 99, 1, nil)}},
		{name: "internal in server: off by default", spans: []s{
			outer(server, "GET /x", 0, 100, nil), inner(internal, "GET /x", 1, 99, nil)}},
		{name: "internal in server: on", by: ByName, opts: Options{InternalInServer: true}, spans: []s{
			outer(server, "GET /x", 0, 100, nil), inner(internal, "GET /x", 1, 99, nil)}},
		{name: "internal in server: on, same scope", opts: Options{InternalInServer: true}, spans: []s{
			outer(server, "GET /x", 0, 100, nil), sameScope(inner(internal, "GET /x", 1, 99, nil))}},
		{name: "tiny spans: coverage slack is the skew", by: ByName, spans: []s{
			outer(server, "x", 0, 0.05, nil), inner(server, "x", 0.01, 0.03, nil)}},
		{name: "server siblings, contained", by: ByName, spans: []s{
			{svc: "svc", scope: "h", id: 2, parent: 9, name: "GET /x", kind: server, start: 0, end: 30},
			{svc: "svc", scope: "h", id: 3, parent: 9, name: "GET /x", kind: server, start: 0.1, end: 29.9}}},
		{name: "client siblings, contained (parallel calls)", spans: []s{
			{svc: "svc", scope: "h", id: 2, parent: 9, name: "GET /x", kind: client, start: 0, end: 30},
			{svc: "svc", scope: "h", id: 3, parent: 9, name: "GET /x", kind: client, start: 0.1, end: 29.9}}},
		{name: "server siblings, roots (no parent)", spans: []s{
			{svc: "svc", scope: "h", id: 2, name: "GET /x", kind: server, start: 0, end: 30},
			{svc: "svc", scope: "h", id: 3, name: "GET /x", kind: server, start: 0.1, end: 29.9}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Detect(build(c.spans...), c.opts)
			switch {
			case c.by == "" && len(rep.Findings) != 0:
				t.Fatalf("flagged: %+v", rep.Findings)
			case c.by != "" && len(rep.Findings) != 1:
				t.Fatalf("want one finding, got %+v", rep.Findings)
			case c.by != "" && (rep.Findings[0].MatchedBy != c.by || rep.Findings[0].Occurrences != 1):
				t.Fatalf("want matched by %s once, got %+v", c.by, rep.Findings[0])
			}
			// Collapse agrees with the detector, and leaves near misses alone.
			td := build(c.spans...)
			n := td.SpanCount()
			res := Collapse(td, c.opts, nil)
			want := 0
			if c.by != "" {
				want = 1
			}
			if res.Collapsed != want || td.SpanCount() != n-want {
				t.Fatalf("collapse: %+v, %d spans of %d", res, td.SpanCount(), n)
			}
		})
	}
}

func TestShareAndTraces(t *testing.T) {
	var spans []s
	for tr := byte(1); tr <= 4; tr++ {
		spans = append(spans, s{svc: "api", scope: asgi, trace: tr, id: 1, name: "GET /x", kind: server, start: 0, end: 10})
		if tr <= 2 {
			spans = append(spans, s{svc: "api", scope: fastapi, trace: tr, id: 2, parent: 1, name: "GET /x", kind: server, start: 0, end: 10})
		}
		spans = append(spans, s{svc: "api", scope: "client", trace: tr, id: 3, parent: 1, name: "GET /x", kind: client, start: 1, end: 9})
	}
	spans = append(spans, s{svc: "other", scope: asgi, id: 7, name: "GET /x", kind: server, start: 0, end: 10})
	rep := Detect(build(spans...), Options{})
	if len(rep.Findings) != 1 {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	f := rep.Findings[0]
	if f.Traces != 2 || f.Occurrences != 2 || f.AffectedSpans != 4 || f.KindSpans != 6 {
		t.Fatalf("finding: %+v", f)
	}
	if f.Share != 4.0/6 {
		t.Fatalf("share %v", f.Share)
	}
	if !strings.Contains(f.Diagnosis, `("GET /x", 66.7% of server spans)`) {
		t.Fatalf("diagnosis: %s", f.Diagnosis)
	}
}

func TestTripleInstrumentationChain(t *testing.T) {
	td := build(
		s{svc: "api", scope: "x", id: 1, name: "GET /x", kind: server, start: 0, end: 10},
		s{svc: "api", scope: "x", id: 2, parent: 1, name: "GET /x", kind: server, start: 0, end: 10},
		s{svc: "api", scope: "x", id: 3, parent: 2, name: "GET /x", kind: server, start: 0, end: 10},
		s{svc: "api", scope: "app", id: 4, parent: 3, name: "work", kind: internal, start: 1, end: 9},
	)
	rep := Detect(td, Options{})
	if len(rep.Findings) != 1 {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	f := rep.Findings[0]
	if f.Traces != 1 || f.Occurrences != 2 || f.AffectedSpans != 3 || f.KindSpans != 3 || f.Share != 1 {
		t.Fatalf("finding: %+v", f)
	}
	res := Collapse(td, Options{}, nil)
	if res.Collapsed != 2 || res.Reparented != 1 || td.SpanCount() != 2 {
		t.Fatalf("collapse: %+v, %d spans", res, td.SpanCount())
	}
	got := spansByID(td)
	a := got[sid(1)].Attributes()
	if v, _ := a.Get(AttrCollapsedScopeName); v.Str() != "x,x" {
		t.Fatalf("scope names %q", v.Str())
	}
	if v, _ := a.Get(AttrCollapsedSpans); v.Int() != 2 {
		t.Fatalf("collapsed spans %d", v.Int())
	}
	if got[sid(4)].ParentSpanID() != sid(1) {
		t.Fatalf("child parent %s", got[sid(4)].ParentSpanID())
	}
}

func TestDetectorAcrossBatches(t *testing.T) {
	d := NewDetector(Options{})
	// The inner span ends first and is exported first.
	if p := d.Add(build(s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 0, end: 10})); p != nil {
		t.Fatalf("pairs before the parent: %+v", p)
	}
	p := d.Add(build(s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 10}))
	if len(p) != 1 || p[0].Outer != sid(1) || p[0].Inner != sid(2) || p[0].Sibling || p[0].OuterScope.Name != asgi {
		t.Fatalf("pairs: %+v", p)
	}
	st := d.Stats()
	if st.Spans != 2 || st.Held != 2 || st.Pairs != 1 || st.Evicted != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestDetectorEviction(t *testing.T) {
	d := NewDetector(Options{MaxSpans: 2})
	d.Add(build(s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 0, end: 10}))
	later := []s{
		{svc: "api", scope: "o", trace: 2, id: 5, name: "a", kind: internal, start: 0, end: 1},
		{svc: "api", scope: "o", trace: 2, id: 6, name: "b", kind: internal, start: 0, end: 1},
		{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 10},
	}
	d.Add(build(later[:2]...))
	if p := d.Add(build(later[2])); p != nil {
		t.Fatalf("paired with an evicted span: %+v", p)
	}
	want := Stats{Spans: 4, Held: 2, MaxSpans: 2, Evicted: 2, EvictedWaiting: 1, Bytes: heldBytes(later[1:]...), MaxBytes: DefaultMaxBytes}
	if got := d.Stats(); got != want {
		t.Fatalf("stats: got %+v want %+v", got, want)
	}
	if len(d.Findings()) != 0 {
		t.Fatal("findings after eviction")
	}
	if w, h := len(d.listMap(t, waitingKind)), len(d.byKeyMap(t)); w != 0 || h != 2 {
		t.Fatalf("index: %d waiting, %d held", w, h)
	}
}

func TestDetectorDuplicatesAndInvalidIDs(t *testing.T) {
	batch := func() ptrace.Traces {
		return build(
			s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 10},
			s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 0, end: 10},
			s{svc: "api", scope: asgi, id: 0, name: "GET /x", kind: server, start: 0, end: 10},
		)
	}
	d := NewDetector(Options{})
	d.Add(batch())
	d.Add(batch()) // exported twice
	st := d.Stats()
	if st.Spans != 6 || st.Duplicates != 2 || st.InvalidIDs != 2 || st.Pairs != 1 {
		t.Fatalf("stats: %+v", st)
	}
	f := d.Findings()
	if len(f) != 1 || f[0].Occurrences != 1 || f[0].AffectedSpans != 2 || f[0].KindSpans != 4 {
		t.Fatalf("findings: %+v", f)
	}
}

func TestFindingJSON(t *testing.T) {
	f := Finding{
		Key:         Key{Service: "s", Kind: "SERVER", Name: "n", OuterScope: Scope{"o", "1"}, InnerScope: Scope{Name: "i"}},
		MatchedBy:   ByName,
		Traces:      1,
		Occurrences: 1,
		Share:       0.5,
		Diagnosis:   "d",
	}
	// As the reports write it: with no examples, an empty list.
	var indented, b bytes.Buffer
	if err := reportjson.Write(&indented, f); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&b, indented.Bytes()); err != nil {
		t.Fatal(err)
	}
	want := `{"service":"s","kind":"SERVER","name":"n","outer_scope":{"name":"o","version":"1"},"inner_scope":{"name":"i"},"matched_by":"name","traces":1,"occurrences":1,"siblings":0,"affected_spans":0,"kind_spans":0,"share":0.5,"diagnosis":"d","examples":[]}`
	if b.String() != want {
		t.Fatalf("json:\n got %s\nwant %s", b.String(), want)
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		n, total int
		want     string
	}{
		{1, 1, "100%"}, {0, 5, "0%"}, {1, 2, "50%"}, {2, 3, "66.7%"}, {1, 3, "33.3%"},
		{9999, 10000, ">99.9%"}, {1, 10000, "<0.1%"}, {1, 0, "?%"},
	} {
		if got := percent(c.n, c.total); got != c.want {
			t.Errorf("percent(%d, %d) = %s, want %s", c.n, c.total, got, c.want)
		}
	}
}

func TestDiagnosisKinds(t *testing.T) {
	f := Finding{
		Key:           Key{Kind: "CLIENT", Name: "GET", OuterScope: Scope{Name: "a"}, InnerScope: Scope{Name: "b", Version: "2"}},
		InnerName:     "GET /x",
		AffectedSpans: 1, KindSpans: 4,
	}
	want := `b 2 inside a: one outgoing call recorded twice ("GET" and "GET /x", 25% of client spans): two instrumentations are active; keep one`
	if got := Diagnosis(f); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Check(); err != nil {
		t.Fatal(err)
	}
	err := Options{MinCoverage: 1.5, Skew: -1, MaxSpans: -1}.Check()
	if err == nil || !strings.Contains(err.Error(), "min_coverage") || !strings.Contains(err.Error(), "skew") || !strings.Contains(err.Error(), "max_spans") {
		t.Fatalf("err: %v", err)
	}
}

// checkLists verifies that the waiting and sibling lists run through the
// records as the records' flags say: every listed slot is held, a child of
// the list's key, listed once, in arrival order; every waiting record is in
// its parent's waiting list; sibling lists hold SERVER spans, at most
// MaxSiblings; and the index has room (see sweepStep).
func checkLists(t *testing.T, d *Detector) {
	t.Helper()
	for _, c := range []struct {
		name string
		m    map[spanKey][]int32
		flag func(*rec) bool
	}{
		{"waiting", d.listMap(t, waitingKind), func(r *rec) bool { return r.waiting }},
		{"sibs", d.listMap(t, sibsKind), func(r *rec) bool { return r.kind == ptrace.SpanKindServer }},
	} {
		listed := map[int32]bool{}
		for k, lst := range c.m {
			if len(lst) == 0 || c.name == "sibs" && len(lst) > MaxSiblings {
				t.Fatalf("%s: a live list of %d spans", c.name, len(lst))
			}
			prev := -1
			for _, cur := range lst {
				r := &d.recs[cur]
				age := int((cur - d.head + int32(len(d.recs))) % int32(len(d.recs)))
				if !c.flag(r) || !r.hasParent || r.parentKey() != k || listed[cur] || age >= int(d.n) || age <= prev {
					t.Fatalf("%s: slot %d listed under the wrong parent, unflagged, not held, out of order or twice", c.name, cur)
				}
				listed[cur] = true
				prev = age
			}
		}
		if c.name != "waiting" {
			continue
		}
		for i := range d.n {
			slot := (d.head + i) % int32(len(d.recs))
			if d.recs[slot].waiting && !listed[slot] {
				t.Fatalf("%s: slot %d flagged but in no list", c.name, slot)
			}
		}
	}
	d.idx.check(t)
}

// TestListsStayConsistent drives a small detector with random parent and
// child orders, SERVER siblings and evictions, checking its lists after
// every batch.
func TestListsStayConsistent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, max := range []int{2, 5, 17} {
		d := NewDetector(Options{MaxSpans: max})
		for range 300 {
			var spans []s
			for range 1 + r.IntN(8) {
				kind := ptrace.SpanKindInternal
				if r.IntN(2) == 0 {
					kind = ptrace.SpanKindServer
				}
				spans = append(spans, s{svc: "api", scope: "a", trace: byte(1 + r.IntN(3)), id: byte(1 + r.IntN(20)),
					parent: byte(r.IntN(6)), name: "GET /x", kind: kind, start: 0, end: 10})
			}
			d.Add(build(spans...))
			checkLists(t, d)
		}
	}
}

// TestRouteAndMethodAsStrAttr checks the one-pass attribute read against
// strAttr's lookups in priority order, with values of other types, empty
// strings and names absent.
func TestRouteAndMethodAsStrAttr(t *testing.T) {
	names := []string{"http.route", "url.template", "http.request.method", "http.method", "other"}
	vals := []string{"", "/a/{id}", "GET"}
	r := rand.New(rand.NewPCG(7, 8))
	for range 5000 {
		m := pcommon.NewMap()
		for range r.IntN(7) {
			k := names[r.IntN(len(names))]
			switch r.IntN(3) {
			case 0:
				m.PutInt(k, 1)
			default:
				m.PutStr(k, vals[r.IntN(len(vals))])
			}
		}
		route, method := routeAndMethod(m)
		wantRoute, wantMethod := strAttr(m, "http.route", "url.template"), strAttr(m, "http.request.method", "http.method")
		if route != wantRoute || method != wantMethod {
			t.Fatalf("%v: got (%q, %q), want (%q, %q)", m.AsRaw(), route, method, wantRoute, wantMethod)
		}
	}
}

// TestArrivalNumbersWrap: a detector whose arrival numbers pass 2^32
// finds the same pairs, batch by batch, as one whose numbers do not.
func TestArrivalNumbersWrap(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, max := range []int{3, 17, 64} {
		a, b := NewDetector(Options{MaxSpans: max}), NewDetector(Options{MaxSpans: max})
		b.seq0 = math.MaxUint32 - 40
		for range 200 {
			var spans []s
			for range 1 + r.IntN(8) {
				kind := ptrace.SpanKindInternal
				if r.IntN(2) == 0 {
					kind = ptrace.SpanKindServer
				}
				spans = append(spans, s{svc: "api", scope: []string{"a", "b"}[r.IntN(2)], trace: byte(1 + r.IntN(3)), id: byte(1 + r.IntN(20)),
					parent: byte(r.IntN(6)), name: "GET /x", kind: kind, start: 0, end: 10})
			}
			td := build(spans...)
			pa, pb := a.Add(td), b.Add(td)
			if !reflect.DeepEqual(pa, pb) {
				t.Fatalf("max %d: pairs %+v, with wrapped numbers %+v", max, pa, pb)
			}
			checkLists(t, b)
		}
		if b.seq0 > math.MaxUint32-40 {
			t.Fatalf("max %d: numbers did not wrap (seq0 %d)", max, b.seq0)
		}
		if ra, rb := a.Report(), b.Report(); !reflect.DeepEqual(ra, rb) {
			t.Fatalf("max %d: report %+v, with wrapped numbers %+v", max, ra, rb)
		}
	}
}

// TestRecordSizes: a held span costs its record (two cache lines at most) and its index entries (8 bytes each), which SpanOverhead
// covers with room.
func TestRecordSizes(t *testing.T) {
	if recSize > 128 || ientrySize != 8 || recSize+3*ientrySize*2 > SpanOverhead {
		t.Fatalf("record %d bytes, index entry %d bytes, SpanOverhead %d", recSize, ientrySize, SpanOverhead)
	}
}

// TestRecSetIsLiteral: rec.set over a record with every field set gives
// what the composite literal of a new span's record does, so that no
// field of a slot's previous span is left.
func TestRecSetIsLiteral(t *testing.T) {
	src := &source{service: "s"}
	k := spanKey{1, 2, 3}
	want := rec{key: k, src: src, innerF: -1, outerF: -1, name: "n", route: "r", method: "m", kind: ptrace.SpanKindClient, start: 5, end: 6}
	var r rec
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := reflect.NewAt(v.Field(i).Type(), unsafe.Pointer(v.Field(i).UnsafeAddr())).Elem() // settable
		switch f.Kind() {
		case reflect.Array:
			for j := range f.Len() {
				f.Index(j).SetUint(0xee)
			}
		case reflect.String:
			f.SetString("old")
		case reflect.Pointer:
			f.Set(reflect.ValueOf(&source{service: "old"}))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int32, reflect.Int64, reflect.Int:
			f.SetInt(77)
		case reflect.Uint32, reflect.Uint64:
			f.SetUint(77)
		default:
			t.Fatalf("field %s of kind %s: add it here", v.Type().Field(i).Name, f.Kind())
		}
	}
	r.set(&k, src, "n", "r", "m", ptrace.SpanKindClient, 5, 6)
	if r != want {
		t.Fatalf("set gives %+v, want %+v", r, want)
	}
}
