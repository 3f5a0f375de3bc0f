package nested

import (
	"strings"
	"testing"
)

func TestFitsRoute(t *testing.T) {
	for _, c := range []struct {
		path, route string
		want        bool
	}{
		{"/items/2", "/items/{item_id}", true},
		{"/items/abc", "/items/{item_id}", true},
		{"/items/2", "/items/<int:item_id>", true},
		{"/items/2", "/items/:id", true},
		{"/a/1/b/2", "/a/{x}/b/{y}", true},
		{"/files/a/b/c.txt", "/files/{p:path}", true},
		{"/files/a/b", "/files/*", true},
		{"/files/a/b", "/files/*rest", true},
		{"/items/", "/items/", true},
		{"/items", "/items", true},
		{"/", "/", true},
		// Misses.
		{"/items/2", "/items", false},
		{"/items", "/items/{item_id}", false},
		{"/items/", "/items/{item_id}", false},
		{"/items/2/x", "/items/{item_id}", false},
		{"/users/2", "/items/{item_id}", false},
		{"/items/2?x=1", "/items/{item_id}/x", false},
		{"/files/", "/files/{p:path}", false},
		{"/item-2", "/item-{id}", false},
		{"items/2", "/items/{id}", false},
		{"/items/2", "items/{id}", false},
		{"", "/", false},
		{"/", "", false},
		{"/items/2", "/items/{}", false},
		{"/items/2", "/items/{a{b}", false},
		{"/items/2", "/items/*/x", false},
	} {
		if got := fitsRoute(c.path, c.route); got != c.want {
			t.Errorf("fitsRoute(%q, %q) = %v, want %v", c.path, c.route, got, c.want)
		}
	}
}

// TestDetectFastAPIWrappedByASGI: the spans FastAPI 0.143.5 and
// opentelemetry-instrumentation-asgi 0.66b2 record for one request when
// the app is wrapped from outside in OpenTelemetryMiddleware and the
// client propagates its trace context (test/e2e,
// TestFastAPIDoubleInstrumentation): each extracts the context, so the
// two server spans are siblings under the client's span; contrib's is
// named by the method and path, without a route, FastAPI's by its route.
// The pair is found by the path; the same pair with another path, another
// method, or FastAPI's span outside contrib's time is not.
func TestDetectFastAPIWrappedByASGI(t *testing.T) {
	contrib := func(name, method string, start, end float64) s {
		return s{svc: "seed", scope: asgi, ver: "0.66b2", id: 2, parent: 9, name: name, kind: server, start: start, end: end,
			attrs: map[string]any{"http.method": method, "http.target": "/items/2", "net.peer.port": "55112"}}
	}
	own := s{svc: "seed", scope: fastapi, ver: "0.143.5", id: 3, parent: 9, name: "GET /items/{item_id}", kind: server, start: 0.4, end: 13.2,
		attrs: map[string]any{"http.request.method": "GET", "http.route": "/items/{item_id}", "url.path": "/items/2"}}
	endpoint := s{svc: "seed", scope: fastapi, ver: "0.143.5", id: 4, parent: 3, name: "fastapi.endpoint", kind: internal, start: 1, end: 1.3}
	send := s{svc: "seed", scope: asgi, ver: "0.66b2", id: 5, parent: 3, name: "GET /items/2 http send", kind: internal, start: 1.4, end: 1.5}

	rep := Detect(build(contrib("GET /items/2", "GET", 0, 13.23), own, endpoint, send), Options{})
	if len(rep.Findings) != 1 {
		t.Fatalf("findings %+v, want one", rep.Findings)
	}
	f := rep.Findings[0]
	const diag = `fastapi 0.143.5 inside opentelemetry.instrumentation.asgi 0.66b2: one request recorded twice ("GET /items/{item_id}", 100% of server spans): two instrumentations are active; keep one`
	if f.MatchedBy != ByPath || f.Siblings != 1 || f.OuterScope != (Scope{asgi, "0.66b2"}) || f.InnerScope != (Scope{fastapi, "0.143.5"}) || f.Diagnosis != diag {
		t.Errorf("finding %+v\nwant matched by path, contrib's span outside FastAPI's: %s", f, diag)
	}
	// FastAPI's span a fraction of a millisecond longer than contrib's,
	// each within the other's time give or take Skew (a fast request,
	// CI run of 2026-12-04): contrib's, without a route, is still the
	// outer one.
	longer := own
	longer.start, longer.end = 0.1, 0.95
	rep = Detect(build(contrib("GET /items/2", "GET", 0.2, 0.9), longer, endpoint, send), Options{})
	if len(rep.Findings) != 1 || rep.Findings[0].OuterScope != (Scope{asgi, "0.66b2"}) || rep.Findings[0].Diagnosis != diag {
		t.Errorf("FastAPI's span the longer: findings %+v\nwant contrib's span outside FastAPI's: %s", rep.Findings, diag)
	}
	for name, spans := range map[string][]s{
		"another path":             {contrib("GET /users/2", "GET", 0, 13.23), own},
		"another method":           {contrib("POST /items/2", "POST", 0, 13.23), own},
		"no trace context (roots)": {func() s { x := contrib("GET /items/2", "GET", 0, 13.23); x.parent = 0; return x }(), func() s { x := own; x.parent, x.trace = 0, 2; return x }()},
		"not contained":            {contrib("GET /items/2", "GET", 0, 5), own},
	} {
		if rep := Detect(build(spans...), Options{}); len(rep.Findings) != 0 {
			t.Errorf("%s: flagged %+v", name, rep.Findings)
		}
	}
}

// TestPathPairsOneFindingPerRoute: requests of one route with other paths
// make one finding, named by the route; collapsing keeps contrib's span,
// renamed by the route and given it, and removes FastAPI's.
func TestPathPairsOneFindingPerRoute(t *testing.T) {
	var spans []s
	for i, path := range []string{"/items/1", "/items/2", "/items/3"} {
		tr := byte(i + 1)
		spans = append(spans,
			s{svc: "seed", scope: asgi, trace: tr, id: 2, parent: 9, name: "GET " + path, kind: server, start: 0, end: 10,
				attrs: map[string]any{"http.method": "GET"}},
			s{svc: "seed", scope: fastapi, trace: tr, id: 3, parent: 9, name: "GET /items/{item_id}", kind: server, start: 0.2, end: 9.9,
				attrs: map[string]any{"http.request.method": "GET", "http.route": "/items/{item_id}"}})
	}
	rep := Detect(build(spans...), Options{})
	if len(rep.Findings) != 1 || rep.Findings[0].Name != "GET /items/{item_id}" || rep.Findings[0].Occurrences != 3 || rep.Findings[0].Traces != 3 {
		t.Fatalf("findings %+v, want one of 3 pairs named by the route", rep.Findings)
	}
	td := build(spans...)
	res := Collapse(td, Options{}, nil)
	if res.Collapsed != 3 || td.SpanCount() != 3 {
		t.Fatalf("collapse: %+v, %d spans left", res, td.SpanCount())
	}
	for _, sp := range spansByID(td) {
		route, _ := sp.Attributes().Get("http.route")
		if sp.SpanID() != sid(2) || sp.Name() != "GET /items/{item_id}" || route.Str() != "/items/{item_id}" {
			t.Errorf("span %s %q route %q left; want contrib's, renamed by the route", sp.SpanID(), sp.Name(), route.Str())
		}
	}
}

// FuzzFitsRoute: any path and route: no panic, and a path always fits
// itself as a route when it has no placeholder-like segment.
func FuzzFitsRoute(f *testing.F) {
	for _, c := range [][2]string{{"/items/2", "/items/{id}"}, {"/a/b", "/a/*"}, {"/", "/"}, {"/x/", "/x/{p:path}"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, path, route string) {
		fitsRoute(path, route)
		if len(path) > 0 && path[0] == '/' && !strings.ContainsAny(path, "{}<>:*") && !fitsRoute(path, path) {
			t.Fatalf("%q does not fit itself", path)
		}
	})
}
