package nested

import (
	"bytes"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func marshal(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCollapseMergesIntoOuter(t *testing.T) {
	td := build(
		s{svc: "shop", scope: asgi, ver: "0.48b0", id: 1, name: "GET /items", kind: server, start: 0, end: 100,
			attrs: map[string]any{"a": 1, "http.route": "/items"}},
		s{svc: "shop", scope: fastapi, ver: "0.142.0", id: 2, parent: 1, name: "GET /items", kind: server, start: 1, end: 99,
			attrs: map[string]any{"a": 2, "b": "x"}},
		s{svc: "shop", scope: "sqlalchemy", id: 3, parent: 2, name: "SELECT items", kind: client, start: 2, end: 50},
		s{svc: "shop", scope: "sqlalchemy", id: 4, parent: 3, name: "connect", kind: internal, start: 2, end: 3},
	)
	spans := spansByID(td)
	in := spans[sid(2)]
	in.Status().SetCode(ptrace.StatusCodeError)
	in.Status().SetMessage("boom")
	ev := in.Events().AppendEmpty()
	ev.SetName("exception")
	ev.SetTimestamp(ts(50))
	l := in.Links().AppendEmpty()
	l.SetTraceID(tid(9))
	l.SetSpanID(sid(9))
	in.SetDroppedAttributesCount(3)

	res := Collapse(td, Options{}, nil)
	want := CollapseResult{
		Collapsed:  1,
		Reparented: 1,
		Groups: []CollapsedGroup{{
			Key: Key{Service: "shop", Kind: "SERVER", Name: "GET /items",
				OuterScope: Scope{asgi, "0.48b0"}, InnerScope: Scope{fastapi, "0.142.0"}},
			Spans: 1,
		}},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("result:\n got %+v\nwant %+v", res, want)
	}
	if td.SpanCount() != 3 {
		t.Fatalf("%d spans left", td.SpanCount())
	}
	// fastapi's ScopeSpans held only the removed span.
	if n := td.ResourceSpans().At(0).ScopeSpans().Len(); n != 2 {
		t.Fatalf("%d scope spans left", n)
	}
	spans = spansByID(td)
	if _, ok := spans[sid(2)]; ok {
		t.Fatal("inner span kept")
	}
	outer := spans[sid(1)]
	wantAttrs := map[string]any{
		"a":                       int64(1), // the outer span's own value wins
		"http.route":              "/items",
		"b":                       "x",
		AttrCollapsedScopeName:    fastapi,
		AttrCollapsedScopeVersion: "0.142.0",
		AttrCollapsedSpans:        int64(1),
	}
	if got := outer.Attributes().AsRaw(); !reflect.DeepEqual(got, wantAttrs) {
		t.Fatalf("outer attributes:\n got %v\nwant %v", got, wantAttrs)
	}
	if outer.Status().Code() != ptrace.StatusCodeError || outer.Status().Message() != "boom" {
		t.Fatalf("status %v %q", outer.Status().Code(), outer.Status().Message())
	}
	if outer.Events().Len() != 1 || outer.Links().Len() != 1 || outer.DroppedAttributesCount() != 3 {
		t.Fatalf("events %d links %d dropped %d", outer.Events().Len(), outer.Links().Len(), outer.DroppedAttributesCount())
	}
	if outer.Name() != "GET /items" || outer.StartTimestamp() != ts(0) || outer.EndTimestamp() != ts(100) {
		t.Fatal("outer span's own fields changed")
	}
	if p := spans[sid(3)].ParentSpanID(); p != sid(1) {
		t.Fatalf("child's parent %s", p)
	}
	if p := spans[sid(4)].ParentSpanID(); p != sid(3) {
		t.Fatalf("grandchild's parent %s", p)
	}
}

func TestCollapseKeepsOuterStatus(t *testing.T) {
	td := build(
		s{svc: "a", scope: "x", id: 1, name: "n", kind: server, start: 0, end: 10},
		s{svc: "a", scope: "y", id: 2, parent: 1, name: "n", kind: server, start: 0, end: 10},
	)
	sp := spansByID(td)
	sp[sid(1)].Status().SetCode(ptrace.StatusCodeOk)
	sp[sid(2)].Status().SetCode(ptrace.StatusCodeError)
	Collapse(td, Options{}, nil)
	if c := spansByID(td)[sid(1)].Status().Code(); c != ptrace.StatusCodeOk {
		t.Fatalf("status %v", c)
	}
}

func TestCollapseNearMissesUntouched(t *testing.T) {
	td := build(
		// client inside server of the same name
		s{svc: "a", scope: "x", id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "a", scope: "y", id: 2, parent: 1, name: "GET /x", kind: client, start: 1, end: 99},
		// retry loop
		s{svc: "a", scope: "x", trace: 2, id: 1, name: "fetch", kind: internal, start: 0, end: 100},
		s{svc: "a", scope: "y", trace: 2, id: 2, parent: 1, name: "GET", kind: client, start: 0, end: 30},
		s{svc: "a", scope: "y", trace: 2, id: 3, parent: 1, name: "GET", kind: client, start: 35, end: 65},
		s{svc: "a", scope: "y", trace: 2, id: 4, parent: 1, name: "GET", kind: client, start: 70, end: 100},
		// short child in a long parent
		s{svc: "a", scope: "x", trace: 3, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "a", scope: "y", trace: 3, id: 2, parent: 1, name: "GET /x", kind: server, start: 10, end: 20},
	)
	before := marshal(t, td)
	st := NewState(0, 0)
	res := Collapse(td, Options{}, st)
	if !reflect.DeepEqual(res, CollapseResult{}) {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(before, marshal(t, td)) {
		t.Fatal("batch changed")
	}
	if got := Detect(td, Options{}); len(got.Findings) != 0 {
		t.Fatalf("findings %+v", got.Findings)
	}
}

func TestCollapseSiblings(t *testing.T) {
	td := build(
		s{svc: "api", scope: otelhttpScope, ver: "0.71.0", id: 1, name: "POST", kind: client, start: 0, end: 20},
		s{svc: "api", scope: otelhttpScope, ver: "0.71.0", id: 3, parent: 1, name: "POST /r/{id}", kind: server, start: 1.01, end: 18.99},
		s{svc: "api", scope: otelhttpScope, ver: "0.71.0", id: 2, parent: 1, name: "POST /r/{id}", kind: server, start: 1, end: 19},
		s{svc: "api", scope: "app", id: 4, parent: 3, name: "load", kind: internal, start: 2, end: 18},
	)
	res := Collapse(td, Options{}, nil)
	if res.Collapsed != 1 || res.Reparented != 1 || td.SpanCount() != 3 {
		t.Fatalf("result %+v, %d spans", res, td.SpanCount())
	}
	spans := spansByID(td)
	if _, ok := spans[sid(3)]; ok {
		t.Fatal("the contained sibling was kept")
	}
	if spans[sid(4)].ParentSpanID() != sid(2) || spans[sid(2)].ParentSpanID() != sid(1) {
		t.Fatal("parents")
	}
	if v, _ := spans[sid(2)].Attributes().Get(AttrCollapsedScopeName); v.Str() != otelhttpScope {
		t.Fatalf("scope attribute %q", v.Str())
	}
}

func TestCollapseByMethodTakesTheRoute(t *testing.T) {
	td := build(
		s{svc: "api", scope: otelhttpScope, id: 1, name: "POST", kind: server, start: 0, end: 20,
			attrs: map[string]any{"http.request.method": "POST"}},
		s{svc: "api", scope: otelhttpScope, id: 2, parent: 1, name: "POST /r/{id}", kind: server, start: 1, end: 19,
			attrs: map[string]any{"http.request.method": "POST"}},
	)
	res := Collapse(td, Options{}, nil)
	if res.Collapsed != 1 || res.Groups[0].Name != "POST" {
		t.Fatalf("result %+v", res)
	}
	if n := spansByID(td)[sid(1)].Name(); n != "POST /r/{id}" {
		t.Fatalf("name %q", n)
	}
}

func TestCollapseLaterChildrenRemapped(t *testing.T) {
	st := NewState(10, 10)
	b1 := build(
		s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
	)
	if res := Collapse(b1, Options{}, st); res.Collapsed != 1 {
		t.Fatalf("batch 1: %+v", res)
	}
	b2 := build(
		s{svc: "api", scope: "app", id: 3, parent: 2, name: "notify", kind: internal, start: 50, end: 150},
		s{svc: "api", scope: "app", trace: 2, id: 3, parent: 2, name: "notify", kind: internal, start: 50, end: 150},
	)
	res := Collapse(b2, Options{}, st)
	if res.Remapped != 1 || res.Collapsed != 0 || b2.SpanCount() != 2 {
		t.Fatalf("batch 2: %+v", res)
	}
	for _, sp := range []ptrace.Span{
		b2.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0),
		b2.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1),
	} {
		want := sid(2) // another trace: untouched
		if sp.TraceID() == tid(1) {
			want = sid(1)
		}
		if sp.ParentSpanID() != want {
			t.Fatalf("trace %s: parent %s, want %s", sp.TraceID(), sp.ParentSpanID(), want)
		}
	}
	if to, ok := st.Resolve(tid(1), sid(2)); !ok || to != sid(1) {
		t.Fatalf("resolve: %s %v", to, ok)
	}
	if _, ok := st.Resolve(tid(2), sid(2)); ok {
		t.Fatal("resolved an id that was never removed")
	}
}

func TestCollapseKeepsInnerWithEarlierChildren(t *testing.T) {
	earlier := func() ptrace.Traces {
		return build(s{svc: "api", scope: "app", id: 3, parent: 2, name: "load", kind: internal, start: 2, end: 50})
	}
	later := func() ptrace.Traces {
		return build(
			s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
			s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
		)
	}
	st := NewState(10, 10)
	Collapse(earlier(), Options{}, st)
	td := later()
	before := marshal(t, td)
	res := Collapse(td, Options{}, st)
	if res.Collapsed != 0 || res.KeptEarlierChildren != 1 || !bytes.Equal(before, marshal(t, td)) {
		t.Fatalf("with state: %+v", res)
	}
	// Without a State nothing is known of the earlier batch: the inner
	// span goes, and the earlier child is left pointing at it.
	td = later()
	if res := Collapse(td, Options{}, nil); res.Collapsed != 1 {
		t.Fatalf("without state: %+v", res)
	}
	// Once the earlier batch is out of the window, the protection lapses.
	st = NewState(10, 1)
	Collapse(earlier(), Options{}, st)
	Collapse(build(s{svc: "api", scope: "app", trace: 5, id: 3, parent: 7, name: "x", kind: internal, start: 0, end: 1}), Options{}, st)
	if res := Collapse(later(), Options{}, st); res.Collapsed != 1 {
		t.Fatalf("past the window: %+v", res)
	}
	if got := st.Stats(); got.ReferencedEvicted < 1 {
		t.Fatalf("stats %+v", got)
	}
}

func TestCollapseDuplicateIDsLeftAlone(t *testing.T) {
	td := build(
		s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
		s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
	)
	if res := Collapse(td, Options{}, nil); res.Collapsed != 0 || td.SpanCount() != 3 {
		t.Fatalf("result %+v", res)
	}
	td = build(
		s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "api", scope: fastapi, id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
	)
	if res := Collapse(td, Options{}, nil); res.Collapsed != 0 || td.SpanCount() != 3 {
		t.Fatalf("outer duplicated: %+v", res)
	}
}

func TestCollapseCycleLeftAlone(t *testing.T) {
	td := build(
		s{svc: "api", scope: "x", id: 1, parent: 2, name: "GET /x", kind: server, start: 0, end: 10},
		s{svc: "api", scope: "y", id: 2, parent: 1, name: "GET /x", kind: server, start: 0, end: 10},
		s{svc: "api", scope: "z", id: 3, parent: 2, name: "GET /x", kind: server, start: 0, end: 10},
	)
	if res := Collapse(td, Options{}, nil); res.Collapsed != 0 || td.SpanCount() != 3 {
		t.Fatalf("result %+v", res)
	}
}

func TestStateRemapEviction(t *testing.T) {
	st := NewState(1, 10)
	for tr := byte(1); tr <= 2; tr++ {
		Collapse(build(
			s{svc: "api", scope: asgi, trace: tr, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
			s{svc: "api", scope: fastapi, trace: tr, id: 2, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
		), Options{}, st)
	}
	if got := st.Stats(); got.Remap != 1 || got.RemapEvicted != 1 {
		t.Fatalf("stats %+v", got)
	}
	if _, ok := st.Resolve(tid(1), sid(2)); ok {
		t.Fatal("the evicted entry still resolves")
	}
	if to, ok := st.Resolve(tid(2), sid(2)); !ok || to != sid(1) {
		t.Fatal("the newest entry does not resolve")
	}
}

func TestCollapseInvalidIDsUntouched(t *testing.T) {
	td := build(
		s{svc: "api", scope: asgi, id: 1, name: "GET /x", kind: server, start: 0, end: 100},
		s{svc: "api", scope: fastapi, id: 0, parent: 1, name: "GET /x", kind: server, start: 1, end: 99},
	)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	sp.SetTraceID(pcommon.TraceID{})
	if res := Collapse(td, Options{}, nil); res.Collapsed != 0 || td.SpanCount() != 2 {
		t.Fatalf("result %+v", res)
	}
}
