package nested

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func fuzzSeeds(t testing.TB) [][]byte {
	route := map[string]any{"http.route": "/r", "http.request.method": "POST"}
	batches := []ptrace.Traces{
		build(
			s{svc: "gym", scope: asgi, ver: "0.48b0", id: 1, name: "POST /r", kind: server, start: 0, end: 100, attrs: route},
			s{svc: "gym", scope: fastapi, ver: "0.142.0", id: 2, parent: 1, name: "POST /r", kind: server, start: 0.2, end: 99.5, attrs: route},
			s{svc: "gym", scope: "app", id: 3, parent: 2, name: "rollout", kind: internal, start: 1, end: 98},
		),
		build(
			s{svc: "api", scope: otelhttpScope, id: 1, name: "POST", kind: client, start: 0, end: 20},
			s{svc: "api", scope: otelhttpScope, id: 2, parent: 1, name: "POST /r", kind: server, start: 1, end: 19, attrs: route},
			s{svc: "api", scope: otelhttpScope, id: 3, parent: 1, name: "POST /r", kind: server, start: 1, end: 19, attrs: route},
			s{svc: "api", scope: "app", id: 4, parent: 3, name: "load", kind: internal, start: 2, end: 18},
			s{svc: "api", scope: "app", id: 4, parent: 2, name: "load", kind: internal, start: 2, end: 18},
		),
		build(
			s{svc: "api", scope: "x", id: 1, parent: 2, name: "GET", kind: server, start: 0, end: 10, attrs: map[string]any{"http.method": "GET"}},
			s{svc: "api", scope: "x", id: 2, parent: 1, name: "GET /a", kind: server, start: 0, end: 10, attrs: map[string]any{"http.method": "GET"}},
			s{svc: "api", scope: "x", id: 3, parent: 2, name: "GET /a", kind: server, start: 0, end: 10},
			s{svc: "api", scope: "x", id: 4, parent: 3, name: "GET /a", kind: server, start: 0, end: 10},
			s{svc: "api", scope: "y", id: 5, parent: 4, name: "w", kind: internal, start: 0, end: 10},
			s{svc: "api", scope: "z", id: 6, parent: 5, name: "w", kind: internal, start: 0, end: 10},
		),
	}
	var out [][]byte
	for _, td := range batches {
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzCollapse feeds OTLP protobuf export requests to the Detector and to
// Collapse. Neither may panic; Collapse removes exactly Collapsed spans,
// each a span with a unique id whose parent or SERVER sibling in the
// batch makes it a nested duplicate, and leaves no span of the batch
// pointing at a removed one.
func FuzzCollapse(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(data); err != nil {
			return
		}
		orig := req.Traces()
		d := NewDetector(Options{MaxSpans: 4})
		d.Add(orig)
		d.Add(orig)
		for _, f := range d.Findings() {
			if f.Diagnosis == "" || f.Occurrences < 1 {
				t.Fatalf("finding %+v", f)
			}
		}
		st := NewState(4, 4)
		for round := 0; round < 2; round++ {
			td := ptrace.NewTraces()
			orig.CopyTo(td)
			res := Collapse(td, Options{}, st)
			checkCollapse(t, orig, td, res)
		}
		td := ptrace.NewTraces()
		orig.CopyTo(td)
		checkCollapse(t, orig, td, Collapse(td, Options{}, nil))
	})
}

type fspan struct {
	info   spanInfo
	key    spanKey
	parent pcommon.SpanID
	trace  pcommon.TraceID
	id     pcommon.SpanID
}

func flatten(td ptrace.Traces) []fspan {
	var out []fspan
	for _, rs := range td.ResourceSpans().All() {
		svc := serviceName(rs.Resource())
		for _, ss := range rs.ScopeSpans().All() {
			sc := Scope{ss.Scope().Name(), ss.Scope().Version()}
			for _, sp := range ss.Spans().All() {
				out = append(out, fspan{
					info:   readSpan(svc, sc, sp, nil),
					key:    keyOf(sp.TraceID(), sp.SpanID()),
					parent: sp.ParentSpanID(),
					trace:  sp.TraceID(),
					id:     sp.SpanID(),
				})
			}
		}
	}
	return out
}

func checkCollapse(t *testing.T, orig, after ptrace.Traces, res CollapseResult) {
	t.Helper()
	if got, want := after.SpanCount(), orig.SpanCount()-res.Collapsed; got != want {
		t.Fatalf("%d spans after collapsing %d of %d", got, res.Collapsed, orig.SpanCount())
	}
	before := flatten(orig)
	count := map[spanKey]int{}
	for _, x := range before {
		count[x.key]++
	}
	left := map[spanKey]int{}
	for _, x := range flatten(after) {
		left[x.key]++
	}
	o := Options{}.withDefaults()
	removed := map[spanKey]bool{}
	n := 0
	for _, x := range before {
		if left[x.key] == count[x.key] {
			continue
		}
		if removed[x.key] {
			continue
		}
		removed[x.key] = true
		n += count[x.key] - left[x.key]
		if count[x.key] != 1 || left[x.key] != 0 || x.trace.IsEmpty() || x.id.IsEmpty() {
			t.Fatalf("removed span %x: %d copies before, %d after", x.key, count[x.key], left[x.key])
		}
		justified := false
		for i := range before {
			y := &before[i]
			if y.trace != x.trace || y.id.IsEmpty() || count[y.key] != 1 || y.key == x.key {
				continue
			}
			if y.id == x.parent && x.parent != x.id {
				if _, ok := o.match(&y.info, &x.info); ok {
					justified = true
				}
			}
			if !x.parent.IsEmpty() && y.parent == x.parent && x.parent != x.id && y.parent != y.id {
				if outerIsY, _, ok := o.matchSibling(&y.info, &x.info); ok && outerIsY {
					justified = true
				}
			}
		}
		if !justified {
			t.Fatalf("removed span %x is not a nested duplicate", x.key)
		}
	}
	if n != res.Collapsed {
		t.Fatalf("%d spans removed, %d reported", n, res.Collapsed)
	}
	for _, x := range flatten(after) {
		if removed[keyOf(x.trace, x.parent)] {
			t.Fatalf("span %x still points at removed span %s", x.key, x.parent)
		}
	}
}

// FuzzCollapseStructured builds batches from the input, 7 bytes a span,
// from a small space of ids, names, kinds, scopes and times, so that
// chains, siblings, cycles and duplicate ids come up often; the spans go
// into two batches through one State. The checks are FuzzCollapse's.
func FuzzCollapseStructured(f *testing.F) {
	f.Add([]byte{
		0, 1, 0, 0, 1, 0, 100, // server a, 0..100
		0, 2, 1, 0, 1, 1, 99, // server b, child of 1
		0, 3, 2, 1, 0, 2, 50, // internal, child of 2
		0x80, 4, 2, 2, 3, 60, 40, // next batch: client child of 2
	})
	f.Add([]byte{
		0, 1, 0, 3, 2, 0, 100, // client
		0, 2, 1, 0, 1, 1, 98, // server sibling
		0, 3, 1, 0, 1, 0, 100, // server sibling
		0, 4, 3, 1, 0, 2, 50, // child of 3
		0, 5, 4, 0, 1, 2, 50, // server under internal
		0, 6, 6, 0, 1, 2, 50, // its own parent
	})
	names := []string{"GET /x", "POST", "work", "GET"}
	kinds := []ptrace.SpanKind{ptrace.SpanKindUnspecified, ptrace.SpanKindServer, ptrace.SpanKindClient, ptrace.SpanKindInternal, ptrace.SpanKindConsumer}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b1, b2 []s
		for len(data) >= 7 {
			c := data[:7]
			data = data[7:]
			x := s{
				svc:    []string{"a", "b"}[c[0]>>6&1],
				scope:  []string{"x", "y", "z"}[int(c[3]>>4)%3],
				trace:  1 + c[0]&1,
				id:     c[1] % 9,
				parent: c[2] % 9,
				name:   names[int(c[3]&3)],
				kind:   kinds[int(c[4])%len(kinds)],
				start:  float64(c[5]),
				end:    float64(c[5]) + float64(c[6]),
			}
			if c[4]&0x80 != 0 {
				x.end = float64(c[5]) - float64(c[6]) // end before start
			}
			if c[3]&8 != 0 {
				x.attrs = map[string]any{"http.request.method": "POST", "http.route": "/x"}
			}
			if c[0]&0x80 != 0 {
				b2 = append(b2, x)
			} else {
				b1 = append(b1, x)
			}
		}
		st := NewState(4, 4)
		for _, spans := range [][]s{b1, b2} {
			orig := build(spans...)
			td := ptrace.NewTraces()
			orig.CopyTo(td)
			checkCollapse(t, orig, td, Collapse(td, Options{}, st))
			d := NewDetector(Options{MaxSpans: 3})
			d.Add(orig)
			_ = d.Report()
		}
		// Within State's windows, collapsing never orphans a span: every
		// parent that was there before is there (or replaced) after.
		big := NewState(1000, 1000)
		var before, after []fspan
		for _, spans := range [][]s{b1, b2} {
			orig := build(spans...)
			before = append(before, flatten(orig)...)
			Collapse(orig, Options{}, big)
			after = append(after, flatten(orig)...)
		}
		count := map[spanKey]int{}
		for _, x := range before {
			count[x.key]++
		}
		for _, n := range count {
			if n > 1 {
				return // ids repeated across batches: parents are ambiguous
			}
		}
		present := map[spanKey]bool{}
		for _, x := range after {
			present[x.key] = true
		}
		for _, x := range after {
			if x.parent.IsEmpty() || x.parent == x.id {
				continue
			}
			pk := keyOf(x.trace, x.parent)
			if !present[pk] && count[pk] == 1 {
				t.Fatalf("span %x orphaned: its parent %s is gone", x.key, x.parent)
			}
			if !present[pk] {
				// Never there: the parent must be the original one.
				found := false
				for _, y := range before {
					if y.key == x.key && y.parent == x.parent {
						found = true
					}
				}
				if !found {
					t.Fatalf("span %x re-parented to %s, which is not in the data", x.key, x.parent)
				}
			}
		}
	})
}
