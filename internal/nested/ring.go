package nested

import (
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

type rec struct {
	key spanKey
	// The parent's span id (its trace id is key's): with hasParent, the
	// parent key is parentKey(). So a record is 128 bytes, two cache lines.
	psid pcommon.SpanID
	// What the rule looks at (spanInfo), in 88 rather than 120 bytes:
	// the service and scope, shared by the spans of one resource and
	// scope, behind one pointer.
	start, end          uint64
	name, route, method string
	src                 *source
	kind                ptrace.SpanKind
	// The arrival number (Detector.seq) of the span before this one in
	// the same list of children waiting for their parent, or of SERVER
	// siblings, unless it is the list's first: the lists run from their
	// newest span back through the records, so that listing a span
	// allocates nothing and evicting one (always the oldest) needs no
	// unlisting: a list ends at its first span no longer held.
	prevWaiting, prevSib   uint32
	innerF                 int32 // the finding this span is the inner span of, -1, or unlisted; a span is the inner span of one pair at most
	outerF                 int32 // the last finding this span was the outer span of, or -1
	hasParent              bool
	waiting                bool // listed under parent among the children waiting for it
	firstWaiting, firstSib bool // first in its list: prevWaiting or prevSib names no span
}

// source is a service and scope that held spans share.
type source struct {
	service string
	scope   Scope
	size    int // SpanOverhead and the lengths of service and scope: what a span of it counts before its own strings
}

// set makes *r a new span's record, field by field: assigning a composite
// literal would build it aside and copy its 128 bytes in, twice.
// TestRecSetIsLiteral checks that it sets every field.
func (r *rec) set(k *spanKey, src *source, name, route, method string, kind ptrace.SpanKind, start, end uint64) {
	r.key, r.psid = *k, pcommon.SpanID{}
	r.start, r.end = start, end
	r.name, r.route, r.method = name, route, method
	r.src, r.kind = src, kind
	r.prevWaiting, r.prevSib = 0, 0
	r.innerF, r.outerF = -1, -1
	r.hasParent, r.waiting, r.firstWaiting, r.firstSib = false, false, false, false
}

// parentKey is the key of r's parent (with hasParent).
func (r *rec) parentKey() spanKey { return keyOf(r.key.traceID(), r.psid) }

// info is what the rule looks at in r.
func (r *rec) info() spanInfo {
	return spanInfo{service: r.src.service, scope: r.src.scope, name: r.name, kind: r.kind,
		route: r.route, method: r.method, start: r.start, end: r.end}
}

// bytes is what r counts against MaxBytes, as spanInfo.bytes counts it.
func (r *rec) bytes() int {
	return r.src.size + len(r.name) + len(r.route) + len(r.method)
}

// srcCacheLen is the number of sources a Detector keeps for reuse: one is
// made when a batch's resource and scope are not among them.
const srcCacheLen = 64

// sourceOf returns a source for service and scope (interned strings),
// made once while it stays in d.srcs, so that a batch allocates at most one
// per resource and scope and none per span.
func (d *Detector) sourceOf(service string, scope Scope) *source {
	i := (strHome(service) ^ strHome(scope.Name)*31 ^ strHome(scope.Version)*17) % srcCacheLen
	if c := d.srcs[i]; c != nil && c.service == service && c.scope == scope {
		return c
	}
	c := &source{service: service, scope: scope,
		size: SpanOverhead + len(service) + len(scope.Name) + len(scope.Version)}
	d.srcs[i] = c
	return c
}

// recSize is the size of a record: the ring holds MaxSpans of them.
const recSize = int(unsafe.Sizeof(rec{}))

// alloc makes the ring and its index at their bound, on the first span:
// growing them would copy them log2(MaxSpans) times on the way.
func (d *Detector) alloc() {
	d.recs = make([]rec, d.o.MaxSpans)
	d.idx = newIndex(d.o.MaxSpans)
}

// insert makes room for a span of cost bytes whose key's hash is hk,
// evicting the oldest spans as the bounds require, indexes it and returns
// its slot, which the caller fills, and its arrival number.
func (d *Detector) insert(cost int, hk uint64) (int32, uint32) {
	if d.n == int32(len(d.recs)) {
		// The new span takes the slot at once: no need to clear it.
		d.st.Evicted++
		d.evictOldest(false)
	}
	for d.n > 0 && d.bytes+cost > d.o.MaxBytes {
		d.st.EvictedBytes++
		d.evictOldest(true)
	}
	slot := d.head + d.n
	if slot >= int32(len(d.recs)) {
		slot -= int32(len(d.recs))
	}
	seq := d.seq0 + uint32(d.n)
	d.n++
	d.bytes += cost
	d.idx.at(d.idx.add(tagOf(hk, heldKind), d.seq0, uint32(d.n))).seq = seq
	d.idx.debt++
	return slot, seq
}

// evictOldest forgets the oldest held span and, with clear, clears its
// slot, so that its strings are not kept alive. Its index entries go stale
// (their numbers are no longer held): insertions overwrite them.
func (d *Detector) evictOldest(clear bool) {
	old := &d.recs[d.head]
	if old.waiting {
		d.st.EvictedWaiting++
	}
	d.bytes -= old.bytes()
	if clear {
		*old = rec{}
	}
	if d.head++; d.head == int32(len(d.recs)) {
		d.head = 0
	}
	d.seq0++
	d.n--
}

// held reports whether the span numbered seq is held.
func (d *Detector) held(seq uint32) bool { return seq-d.seq0 < uint32(d.n) }

// slotOf is the slot of the held span numbered seq.
func (d *Detector) slotOf(seq uint32) int32 {
	slot := d.head + int32(seq-d.seq0)
	if slot >= int32(len(d.recs)) {
		slot -= int32(len(d.recs))
	}
	return slot
}
