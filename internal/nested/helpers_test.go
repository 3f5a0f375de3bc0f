package nested

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// s describes one span for build. Times are milliseconds after base.
type s struct {
	svc, scope, ver string
	trace           byte // default 1
	id, parent      byte // 0: none
	name            string
	kind            ptrace.SpanKind
	start, end      float64
	attrs           map[string]any
}

var base = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

func ts(ms float64) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(base.Add(time.Duration(ms * float64(time.Millisecond))))
}

func tid(b byte) pcommon.TraceID { return pcommon.TraceID{15: b, 0: 0xab} }
func sid(b byte) pcommon.SpanID  { return pcommon.SpanID{7: b, 0: 0xcd} }

// build puts the spans into one batch, one ResourceSpans per service and
// one ScopeSpans per scope, in order of first appearance.
func build(spans ...s) ptrace.Traces {
	td := ptrace.NewTraces()
	rss := map[string]ptrace.ResourceSpans{}
	sss := map[[3]string]ptrace.ScopeSpans{}
	for _, x := range spans {
		rs, ok := rss[x.svc]
		if !ok {
			rs = td.ResourceSpans().AppendEmpty()
			if x.svc != "" {
				rs.Resource().Attributes().PutStr("service.name", x.svc)
			}
			rss[x.svc] = rs
		}
		k := [3]string{x.svc, x.scope, x.ver}
		ss, ok := sss[k]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(x.scope)
			ss.Scope().SetVersion(x.ver)
			sss[k] = ss
		}
		sp := ss.Spans().AppendEmpty()
		tr := x.trace
		if tr == 0 {
			tr = 1
		}
		sp.SetTraceID(tid(tr))
		if x.id != 0 {
			sp.SetSpanID(sid(x.id))
		}
		if x.parent != 0 {
			sp.SetParentSpanID(sid(x.parent))
		}
		sp.SetName(x.name)
		sp.SetKind(x.kind)
		sp.SetStartTimestamp(ts(x.start))
		sp.SetEndTimestamp(ts(x.end))
		if err := sp.Attributes().FromRaw(x.attrs); err != nil {
			panic(err)
		}
	}
	return td
}

const (
	server   = ptrace.SpanKindServer
	client   = ptrace.SpanKindClient
	internal = ptrace.SpanKindInternal
	consumer = ptrace.SpanKindConsumer
)

const otelhttpScope = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

// spansByID lists td's spans by span id byte (the last byte of the id).
func spansByID(td ptrace.Traces) map[pcommon.SpanID]ptrace.Span {
	out := map[pcommon.SpanID]ptrace.Span{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				out[sp.SpanID()] = sp
			}
		}
	}
	return out
}

// heldBytes is what Stats.Bytes counts for spans held, from their
// description: SpanOverhead each plus their strings.
func heldBytes(spans ...s) int {
	n := 0
	for _, x := range spans {
		route, _ := x.attrs["http.route"].(string)
		method, _ := x.attrs["http.request.method"].(string)
		n += SpanOverhead + len(x.svc) + len(x.scope) + len(x.ver) + len(x.name) + len(route) + len(method)
	}
	return n
}

// byKeyMap is the held spans of d's index as a map, for tests; it fails t
// when a live entry cannot be found from its key's hash, or when the held
// spans and the live held entries differ.
func (d *Detector) byKeyMap(t testing.TB) map[spanKey]int32 {
	t.Helper()
	m := map[spanKey]int32{}
	for i := range int32(len(d.idx.b) * 8) {
		if i&7 == bucketLen {
			continue
		}
		e := *d.idx.at(i)
		if e.tag == 0 || e.kind() != heldKind || !d.held(e.seq) {
			continue
		}
		slot := d.slotOf(e.seq)
		k := d.recs[slot].key
		if d.find(heldKind, &k, d.hash.of(&k)) != i {
			t.Fatalf("index: held entry %d not found from its key", i)
		}
		m[k] = slot
	}
	if len(m) != int(d.n) {
		t.Fatalf("index: %d live held entries, %d spans held", len(m), d.n)
	}
	return m
}

// listMap is the live lists of kind in d's index as a map from the parent
// key to the held slots listed, oldest first, for tests; it fails t when an
// entry cannot be found from its key's hash.
func (d *Detector) listMap(t testing.TB, kind ikind) map[spanKey][]int32 {
	t.Helper()
	m := map[spanKey][]int32{}
	for i := range int32(len(d.idx.b) * 8) {
		if i&7 == bucketLen {
			continue
		}
		e := *d.idx.at(i)
		if e.tag == 0 || e.kind() != kind || !d.held(e.seq) {
			continue
		}
		k := d.recs[d.slotOf(e.seq)].parentKey()
		if d.find(kind, &k, d.hash.of(&k)) != i {
			t.Fatalf("index: list entry %d not found from its key", i)
		}
		if _, ok := m[k]; ok {
			t.Fatalf("index: two live lists of kind %d for one key", kind)
		}
		links := waitingLinks
		if kind == sibsKind {
			links = sibLinks
		}
		m[k] = slices.Clone(d.list(e.seq, links))
	}
	return m
}

// check fails t when x's counts of entries in use, or of entries passing
// each bucket over, differ from its entries.
func (x *index) check(t testing.TB) {
	t.Helper()
	used := 0
	over := make([]uint32, len(x.b))
	for b := range uint32(len(x.b)) {
		for _, e := range x.b[b].e {
			if e.tag == 0 {
				continue
			}
			used++
			for h := x.home(e.tag); h != b; h = (h + 1) & x.mask {
				over[h]++
			}
		}
	}
	if used != x.used {
		t.Fatalf("index: %d entries used, counted %d", used, x.used)
	}
	for b := range x.b {
		if x.b[b].over != over[b] {
			t.Fatalf("index: bucket %d passed over by %d entries, counted %d", b, over[b], x.b[b].over)
		}
	}
}
