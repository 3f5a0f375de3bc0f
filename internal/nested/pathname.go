package nested

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ByPath: HTTP SERVER spans of one method, one of them without a route and
// named by the method and the request's path ("GET /items/2"), the other
// with a route that path fits ("/items/{item_id}").
//
// A middleware that wraps an application from outside (an ASGI or WSGI
// wrapper applied by the server or the platform) never learns the route:
// OpenTelemetry Python's ASGI middleware then names its server span by the
// method and the raw path. The framework inside records its own server
// span, named and attributed by the route: FastAPI 0.142 and later do so
// when the middleware is not on the app itself. When the client
// propagates its trace context, each extracts it and the two are SERVER
// siblings under the client's span (the sibling rule), and the path names
// their one operation.
const ByPath = "path"

// byPath reports whether p and c are HTTP SERVER spans of one method, one
// named "METHOD PATH" without a route and the other with a route that
// PATH fits (fitsRoute).
func byPath(p, c *spanInfo) bool {
	if p.kind != ptrace.SpanKindServer || c.kind != ptrace.SpanKindServer || p.method == "" || p.method != c.method {
		return false
	}
	return namedByPath(p, c) || namedByPath(c, p)
}

// namedByPath: a, without a route, is named by its method and a path that
// fits b's route.
func namedByPath(a, b *spanInfo) bool {
	if a.route != "" || b.route == "" {
		return false
	}
	path, ok := strings.CutPrefix(a.name, a.method+" ")
	return ok && fitsRoute(path, b.route)
}

// fitsRoute reports whether the request path fits the route template:
// segment by segment, a literal segment equal, a placeholder segment
// ("{id}", "<int:id>", ":id") any non-empty one; a last segment "{p:path}"
// or "*"/"*rest" fits the rest of the path. A query string or fragment
// never fits (the path is compared whole); nor does a placeholder inside
// a segment ("item-{id}").
func fitsRoute(path, route string) bool {
	if path == "" || route == "" || path[0] != '/' || route[0] != '/' {
		return false
	}
	path, route = path[1:], route[1:]
	for {
		rseg, rrest, rmore := strings.Cut(route, "/")
		pseg, prest, pmore := strings.Cut(path, "/")
		switch {
		case rest(rseg) && !rmore:
			return pseg != ""
		case placeholder(rseg):
			if pseg == "" {
				return false
			}
		case rseg != pseg:
			return false
		}
		if rmore != pmore {
			return false
		}
		if !rmore {
			return true
		}
		route, path = rrest, prest
	}
}

// placeholder: a whole segment that stands for one segment of a path.
func placeholder(seg string) bool {
	switch {
	case len(seg) >= 3 && seg[0] == '{' && seg[len(seg)-1] == '}':
		return !strings.ContainsAny(seg[1:len(seg)-1], "{}/")
	case len(seg) >= 3 && seg[0] == '<' && seg[len(seg)-1] == '>':
		return !strings.ContainsAny(seg[1:len(seg)-1], "<>/")
	case len(seg) >= 2 && seg[0] == ':':
		return true
	}
	return false
}

// rest: a last segment that stands for the rest of a path: Starlette's
// "{name:path}", and "*" or "*name".
func rest(seg string) bool {
	return seg == "*" || len(seg) >= 2 && seg[0] == '*' ||
		placeholder(seg) && seg[0] == '{' && strings.HasSuffix(seg, ":path}")
}

// pairName is the name a pair is counted under (Key.Name): the outer
// span's, but for a pair matched by path whose outer span is the one
// named by the path, the inner span's, named by the route: the requests
// of one route make one finding, not one per path.
func pairName(outerName, outerRoute, innerName, by string) string {
	if by == ByPath && outerRoute == "" {
		return innerName
	}
	return outerName
}

// renamedByPath: collapsing a pair matched by path whose outer span r is
// named by the path, r takes the name of the inner span e, named by the
// route (and mergeInto gives it e's route), as a pair matched by method
// does.
func renamedByPath(by string, r, e *spanInfo) bool {
	return by == ByPath && r.route == "" && e.route != ""
}
