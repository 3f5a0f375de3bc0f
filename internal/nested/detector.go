package nested

import (
	"cmp"
	"slices"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/keyhash"
)

// Key identifies a finding: one pattern of nesting in one service.
type Key struct {
	Service    string `json:"service"`
	Kind       string `json:"kind"` // the outer span's kind: SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL
	Name       string `json:"name"` // the outer span's name
	OuterScope Scope  `json:"outer_scope"`
	InnerScope Scope  `json:"inner_scope"`
}

// compare orders keys by service, name, kind, then outer and inner scope.
func (k Key) compare(o Key) int {
	return cmp.Or(
		cmp.Compare(k.Service, o.Service),
		cmp.Compare(k.Name, o.Name),
		cmp.Compare(k.Kind, o.Kind),
		cmp.Compare(k.OuterScope.Name, o.OuterScope.Name),
		cmp.Compare(k.OuterScope.Version, o.OuterScope.Version),
		cmp.Compare(k.InnerScope.Name, o.InnerScope.Name),
		cmp.Compare(k.InnerScope.Version, o.InnerScope.Version),
	)
}

// Pair is one nested duplicate: Inner records Outer's operation a second
// time, as its child or as a SERVER sibling whose time Outer contains.
type Pair struct {
	Key
	InnerName string // the inner span's name
	MatchedBy string // ByName, ByRoute or ByMethod
	// Sibling: both spans are SERVER children of one parent (each
	// instrumentation extracted the incoming context), Outer the one
	// whose time contains the other's; otherwise Outer is Inner's parent.
	Sibling bool
	TraceID pcommon.TraceID
	Outer   pcommon.SpanID
	Inner   pcommon.SpanID
}

// Example names one occurrence by its ids, in hex.
type Example struct {
	TraceID     string `json:"trace_id"`
	OuterSpanID string `json:"outer_span_id"`
	InnerSpanID string `json:"inner_span_id"`
}

// Finding aggregates the pairs of one Key.
type Finding struct {
	Key
	InnerName   string `json:"inner_name,omitempty"` // the inner spans' name, when it differs from Name
	MatchedBy   string `json:"matched_by"`           // how the first pair matched: name, route or method
	Traces      int    `json:"traces"`               // distinct traces with at least one pair
	Occurrences int    `json:"occurrences"`          // pairs
	Siblings    int    `json:"siblings"`             // pairs of SERVER siblings under one parent, rather than parent and child
	// AffectedSpans counts the spans of Kind on either side of a pair,
	// each once; KindSpans all spans of Kind in Service (distinct ids).
	// For SERVER findings Share is the share of the service's server
	// spans that are part of a doubled request.
	AffectedSpans int       `json:"affected_spans"`
	KindSpans     int       `json:"kind_spans"`
	Share         float64   `json:"share"`
	Diagnosis     string    `json:"diagnosis"`
	Examples      []Example `json:"examples"`
}

// Stats says what a Detector saw and what it had to forget.
type Stats struct {
	Spans      int `json:"spans"`       // spans added
	Duplicates int `json:"duplicates"`  // spans whose ids were already held: ignored
	InvalidIDs int `json:"invalid_ids"` // spans with an all-zero trace or span id: counted in KindSpans, never paired
	Pairs      int `json:"pairs"`       // nested duplicates found
	Held       int `json:"held"`        // spans held now
	MaxSpans   int `json:"max_spans"`
	// Evicted spans were forgotten to stay within MaxSpans: a parent or
	// child of theirs arriving later is not compared with them.
	// EvictedWaiting of them had not seen their parent yet.
	Evicted        int `json:"evicted"`
	EvictedWaiting int `json:"evicted_waiting"`
	// Bytes is what the held spans take (SpanOverhead each plus their
	// clipped strings); EvictedBytes spans were forgotten, before
	// MaxSpans was reached, to stay within MaxBytes.
	Bytes        int `json:"bytes"`
	MaxBytes     int `json:"max_bytes"`
	EvictedBytes int `json:"evicted_bytes"`
	// TraceMarksEvicted: (finding, trace) marks forgotten (as many are
	// held as MaxSpans); a trace seen again after that counts twice in
	// Finding.Traces.
	TraceMarksEvicted int `json:"trace_marks_evicted"`
	// SiblingOverflow: SERVER spans not compared with their siblings
	// because their parent already had MaxSiblings SERVER children held.
	SiblingOverflow int `json:"sibling_overflow"`
	// UnlistedPairs: pairs of a key first seen when MaxFindings were
	// already listed. UncountedKinds: spans of a (service, kind) first
	// seen when MaxServiceKinds were already counted.
	UnlistedPairs  int `json:"unlisted_pairs,omitempty"`
	UncountedKinds int `json:"uncounted_kinds,omitempty"`
}

// MaxFindings bounds the findings a Detector lists: the pairs of further
// keys are still returned by Add, and counted in Stats.UnlistedPairs.
// MaxServiceKinds bounds the (service, kind) span counts behind
// Finding.KindSpans: spans of further ones are counted in
// Stats.UncountedKinds only. With MaxStringBytes, they keep a Detector's
// memory beyond MaxBytes (and its ring of MaxSpans records with their index) under about 5 MB whatever it is sent.
const (
	MaxFindings     = 1024
	MaxServiceKinds = 4096
)

// MaxSiblings bounds the SERVER children of one parent that are compared
// with each other (one request has one or two; more is fan-in, not
// double instrumentation).
const MaxSiblings = 16

// Report is a Detector's findings and stats.
type Report struct {
	Findings []Finding `json:"findings"`
	Stats    Stats     `json:"stats"`
}

// Detect runs a fresh Detector over td.
func Detect(td ptrace.Traces, opts Options) Report {
	d := NewDetector(opts)
	d.Add(td)
	return d.Report()
}

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

// unlisted is rec.innerF of the inner span of a pair whose key was not
// listed (MaxFindings).
const unlisted = -2

type findingAcc struct {
	key         Key
	innerName   string
	by          string
	traces, occ int
	siblings    int
	affected    int
	examples    []Example
}

type traceMark struct {
	trace   pcommon.TraceID
	finding int32
}

type svcKind struct {
	service string
	kind    ptrace.SpanKind
}

// Detector finds nested duplicates over a stream of batches, holding at
// most Options.MaxSpans spans. Parent and child may arrive in either
// order and in different batches. It is safe for concurrent use.
type Detector struct {
	mu      sync.Mutex
	o       Options
	recs    []rec // a ring of MaxSpans slots: n held from head on
	head, n int32
	// seq0 is the arrival number of the span at head: the spans held are
	// numbered seq0 to seq0+n-1, in arrival order (modulo 2^32: the index's
	// sweep clears a stale entry long before its number comes round again).
	seq0  uint32
	bytes int // what the held spans take, as spanInfo.bytes counts it
	// The indexes over the ring, allocated with it: no Go map on the
	// per-span path.
	idx     index // key -> the span held under it; parent key -> its lists of children
	hash    keyHash
	scratch []int32 // one list's slots, oldest first: reused
	srcs    [srcCacheLen]*source
	keys    [prefetchSpans]spanKey // the keys of the spans Add is judging
	hs      [prefetchSpans]uint64  // and their hashes
	sink    uint32                 // what prefetch loaded, so that its loads are kept
	finds   []*findingAcc
	findIdx map[Key]int32
	marks   *fifo[traceMark, struct{}]
	kinds   map[svcKind]*int // looked up once per resource and kind
	st      Stats
	in      interner
	last    [3]lastStr // name, route, method
}

// NewDetector returns an empty Detector; zero Options fields take their
// defaults.
func NewDetector(opts Options) *Detector { return NewDetectorSeeded(opts, keyhash.NewSeed()) }

// NewDetectorSeeded is NewDetector hashing span keys with seed's Hash24,
// as a caller of AddHashed hashes them.
func NewDetectorSeeded(opts Options, seed keyhash.Seed) *Detector {
	o := opts.withDefaults()
	return &Detector{
		o:       o,
		hash:    keyHash{seed},
		findIdx: make(map[Key]int32),
		marks:   newFIFO[traceMark, struct{}](o.MaxSpans),
		kinds:   make(map[svcKind]*int),
		st:      Stats{MaxSpans: o.MaxSpans, MaxBytes: o.MaxBytes},
		in:      interner{max: 4096},
	}
}

// Add reads one batch and returns the pairs it completed (nil if none):
// a pair is complete when both spans have arrived, in this batch or
// earlier ones.
func (d *Detector) Add(td ptrace.Traces) []Pair {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.add(td, nil, nil)
}

// AddHashed is Add for a caller that has already read the spans' keys: keys
// holds every span's trace id and span id (in any form when either is all
// zero), in the order Add walks td (resources, scopes, spans), and hashes
// their hashes under the Detector's seed (NewDetectorSeeded). When their
// lengths are not td's span count it reads the keys itself, as Add does.
func (d *Detector) AddHashed(td ptrace.Traces, keys [][24]byte, hashes []uint64) []Pair {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(keys) != len(hashes) || len(keys) != td.SpanCount() {
		keys, hashes = nil, nil
	}
	return d.add(td, keys, hashes)
}

func (d *Detector) add(td ptrace.Traces, keys [][24]byte, hashes []uint64) []Pair {
	var out []Pair
	base := 0
	for _, rs := range td.ResourceSpans().All() {
		kc := kindCache{svc: d.in.str(serviceName(rs.Resource()))}
		for _, ss := range rs.ScopeSpans().All() {
			scope := Scope{Name: d.in.str(ss.Scope().Name()), Version: d.in.str(ss.Scope().Version())}
			var src *source // made on the first span held
			spans := ss.Spans()
			for j0 := 0; j0 < spans.Len(); j0 += len(d.hs) {
				j1 := min(j0+len(d.hs), spans.Len())
				var ks []spanKey
				var hs []uint64
				if keys != nil {
					ks = unsafe.Slice((*spanKey)(&keys[base+j0]), j1-j0)
					hs = hashes[base+j0 : base+j1]
				} else {
					d.readKeys(spans, j0, j1)
					ks, hs = d.keys[:j1-j0], d.hs[:j1-j0]
				}
				d.prefetch(ks, hs)
				for j := range ks {
					out = d.addSpan(spans.At(j0+j), &ks[j], hs[j], &kc, scope, &src, out)
				}
				if n := d.idx.debt / sweepEvery; n > 0 {
					d.idx.sweepOn(n, d.seq0, uint32(d.n))
					d.idx.debt -= n * sweepEvery
				}
			}
			base += spans.Len()
		}
	}
	d.st.Held = int(d.n)
	d.st.Bytes = d.bytes
	return out
}

// prefetchSpans is how many spans of a scope Add hashes, and whose index
// homes it loads, before it judges them: the loads do not depend on each
// other, so their cache misses overlap.
const prefetchSpans = 256

// readKeys reads the keys of spans[j0:j1] into d.keys and hashes them
// into d.hs.
func (d *Detector) readKeys(spans ptrace.SpanSlice, j0, j1 int) {
	for j := range j1 - j0 {
		sp := spans.At(j0 + j)
		d.keys[j] = keyOf(sp.TraceID(), sp.SpanID())
		d.hs[j] = d.hash.of(&d.keys[j])
	}
}

// invalid: the trace id or the span id is all zero.
func (k *spanKey) invalid() bool {
	return [16]byte(k[:16]) == [16]byte{} || [8]byte(k[16:]) == [8]byte{}
}

// prefetch loads the index home of each of the keys ks, hashed as hs, and
// the ring slots they will take, changing nothing: a loop of loads alone,
// so that as many of their misses as the CPU can follow are in flight at
// once.
func (d *Detector) prefetch(ks []spanKey, hs []uint64) {
	n := len(ks)
	if d.recs == nil {
		valid := false
		for j := range ks {
			valid = valid || !ks[j].invalid()
		}
		if !valid {
			return
		}
		d.alloc()
	}
	var sink uint32
	for _, h := range hs {
		sink += d.idx.b[d.idx.home(tagOf(h, heldKind))].over
	}
	slot := d.head + d.n
	for range n {
		if slot >= int32(len(d.recs)) {
			slot -= int32(len(d.recs))
		}
		r := &d.recs[slot] // its first, middle and last bytes: every line it spans
		sink += uint32(r.key[0]) + uint32(len(r.name)) + uint32(r.outerF)
		slot++
	}
	d.sink += sink
}

// addSpan judges sp, whose key is *k (invalid when either id is all
// zero), hashed as hk, and holds it.
func (d *Detector) addSpan(sp ptrace.Span, k *spanKey, hk uint64, kc *kindCache, scope Scope, src **source, out []Pair) []Pair {
	d.st.Spans++
	if k.invalid() {
		d.st.InvalidIDs++
		d.countKind(kc, kindOf(sp.Kind()))
		return out
	}
	// One walk of the key's run finds both its held entry and its list of
	// children waiting for it (entries of one key share a home).
	hi, wi := d.findBoth(k, hk)
	if hi >= 0 {
		d.st.Duplicates++
		return out
	}
	kind := kindOf(sp.Kind())
	if c := kc.counter(kind); c != nil {
		*c++
	} else {
		d.countKind(kc, kind)
	}
	if *src == nil {
		*src = d.sourceOf(kc.svc, scope)
	}
	// Read and intern the strings first, for the span's cost; then evict
	// and fill its slot in place, rather than build the record aside and
	// copy it in.
	route, method := routeAndMethod(sp.Attributes())
	name := d.last[0].str(&d.in, sp.Name())
	route = d.last[1].str(&d.in, route)
	method = d.last[2].str(&d.in, method)
	s := *src
	cost := s.size + len(name) + len(route) + len(method)
	slot, seq := d.insert(cost, hk)
	r := &d.recs[slot]
	r.set(k, s, name, route, method, kind, uint64(sp.StartTimestamp()), uint64(sp.EndTimestamp()))
	if psid := sp.ParentSpanID(); !psid.IsEmpty() && psid != k.spanID() {
		r.psid, r.hasParent = psid, true
	}
	if r.hasParent {
		parent := r.parentKey()
		hp := d.hash.of(&parent)
		if pi := d.find(heldKind, &parent, hp); pi >= 0 {
			out = d.eval(d.slotOf(d.idx.at(pi).seq), slot, out)
		} else {
			d.push(waitingKind, &parent, hp, slot, seq)
			d.recs[slot].waiting = true
		}
		if r.kind == ptrace.SpanKindServer {
			var sibs []int32
			if si := d.find(sibsKind, &parent, hp); si >= 0 {
				sibs = d.list(d.idx.at(si).seq, sibLinks)
			}
			for _, ss := range sibs {
				out = d.evalSibling(ss, slot, out)
			}
			if len(sibs) < MaxSiblings {
				d.push(sibsKind, &parent, hp, slot, seq)
			} else {
				d.st.SiblingOverflow++
			}
		}
	}
	// The list found before holding the span is still it (entries do not
	// move) unless its newest span was evicted since (then all of it was,
	// and its entry may have been taken): check it. No list under k can
	// have appeared: a span is not its own parent.
	if wi >= 0 && !d.isList(wi, waitingKind, k, hk) {
		wi = -1
	}
	if wi >= 0 {
		kids := d.list(d.idx.at(wi).seq, waitingLinks)
		d.idx.clear(wi)
		for _, cs := range kids {
			d.recs[cs].waiting = false
			out = d.eval(slot, cs, out)
		}
	}
	return out
}

// lastStr is the last string an interner returned for one field of the
// spans of a batch, and what it was given: spans in a row mostly carry the
// same name, route and method, and comparing with the last one (at once
// when they share their bytes) is cheaper than placing it in the table.
type lastStr struct{ raw, val string }

func (l *lastStr) str(in *interner, s string) string {
	if s == l.raw {
		return l.val
	}
	return l.miss(in, s)
}

// miss is str when s is not the last one: apart, so that str is inlined.
//
//go:noinline
func (l *lastStr) miss(in *interner, s string) string {
	v := in.str(s)
	if len(s) <= MaxStringBytes { // never keep a long one
		l.raw, l.val = s, v
	}
	return v
}

// kindCache is one resource's (service, kind) counters, so that the map of
// them is read once per resource and kind rather than once per span.
type kindCache struct {
	svc    string
	ctr    [ptrace.SpanKindConsumer + 1]*int
	looked [ptrace.SpanKindConsumer + 1]bool
}

// counter is the counter of k when it is at hand, else nil: the common
// case of countKind, inlined.
func (kc *kindCache) counter(k ptrace.SpanKind) *int {
	if uint(k) < uint(len(kc.ctr)) {
		return kc.ctr[k]
	}
	return nil
}

// countKind counts a span of k (as kindOf reads it) in kc's service.
func (d *Detector) countKind(kc *kindCache, k ptrace.SpanKind) {
	var c *int
	if k >= 0 && int(k) < len(kc.ctr) {
		if !kc.looked[k] {
			kc.ctr[k], kc.looked[k] = d.kindCounter(svcKind{kc.svc, k}), true
		}
		c = kc.ctr[k]
	} else {
		c = d.kindCounter(svcKind{kc.svc, k})
	}
	if c == nil {
		d.st.UncountedKinds++
		return
	}
	*c++
}

// kindCounter returns the counter of sk, made if there is room, else nil.
func (d *Detector) kindCounter(sk svcKind) *int {
	c, ok := d.kinds[sk]
	if !ok && len(d.kinds) < MaxServiceKinds {
		c = new(int)
		d.kinds[sk] = c
	}
	return c
}

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

// find returns the position in the index of the live entry of kind for k,
// whose hash is h, or -1.
func (d *Detector) find(kind ikind, k *spanKey, h uint64) int32 {
	x := &d.idx
	tag := tagOf(h, kind)
	b := x.home(tag)
	for range x.b {
		bk := &x.b[b]
		if bk.mayHold(tag) {
			for j := range bk.e {
				e := bk.e[j]
				if e.tag != tag || !d.held(e.seq) {
					continue
				}
				r := &d.recs[d.slotOf(e.seq)]
				if kind == heldKind && r.key == *k ||
					kind != heldKind && [16]byte(r.key[:16]) == [16]byte(k[:16]) && r.psid == [8]byte(k[16:]) {
					return pos(b, j)
				}
			}
		}
		if bk.over == 0 {
			break
		}
		b = (b + 1) & x.mask
		x.tidy(b, d.seq0, uint32(d.n))
	}
	return -1
}

// findBoth is find(heldKind, k, h) and find(waitingKind, k, h) in one
// search.
func (d *Detector) findBoth(k *spanKey, h uint64) (held, waiting int32) {
	x := &d.idx
	th, tw := tagOf(h, heldKind), tagOf(h, waitingKind)
	held, waiting = -1, -1
	b := x.home(th)
	for range x.b {
		bk := &x.b[b]
		if bk.mayHold(th) {
			for j := range bk.e {
				e := bk.e[j]
				if e.tag != th && e.tag != tw || !d.held(e.seq) {
					continue
				}
				r := &d.recs[d.slotOf(e.seq)]
				if e.tag == th {
					if held < 0 && r.key == *k {
						held = pos(b, j)
					}
				} else if waiting < 0 && [16]byte(r.key[:16]) == [16]byte(k[:16]) && r.psid == [8]byte(k[16:]) {
					waiting = pos(b, j)
				}
			}
		}
		if bk.over == 0 {
			break
		}
		b = (b + 1) & x.mask
		x.tidy(b, d.seq0, uint32(d.n))
	}
	return held, waiting
}

// isList reports whether the entry at position p is the live list of kind
// under parent key k, whose hash is h.
func (d *Detector) isList(p int32, kind ikind, k *spanKey, h uint64) bool {
	e := *d.idx.at(p)
	if e.tag != tagOf(h, kind) || !d.held(e.seq) {
		return false
	}
	r := &d.recs[d.slotOf(e.seq)]
	return [16]byte(r.key[:16]) == [16]byte(k[:16]) && r.psid == [8]byte(k[16:])
}

// links says which list a record's prev field is for.
type links bool

const (
	waitingLinks links = false
	sibLinks     links = true
)

// push appends the span numbered seq, in slot, to the list of kind under
// its parent key pk, whose hash is hp.
func (d *Detector) push(kind ikind, pk *spanKey, hp uint64, slot int32, seq uint32) {
	r := &d.recs[slot]
	i := d.find(kind, pk, hp)
	var e *ientry
	if i < 0 {
		e = d.idx.at(d.idx.add(tagOf(hp, kind), d.seq0, uint32(d.n)))
	} else {
		e = d.idx.at(i)
	}
	if kind == sibsKind {
		r.prevSib, r.firstSib = e.seq, i < 0
	} else {
		r.prevWaiting, r.firstWaiting = e.seq, i < 0
	}
	e.seq = seq
}

// list returns the slots of the held spans of the list whose newest span
// is numbered last, oldest first, in d.scratch.
func (d *Detector) list(last uint32, l links) []int32 {
	out := d.scratch[:0]
	for seq := last; d.held(seq); {
		slot := d.slotOf(seq)
		out = append(out, slot)
		r := &d.recs[slot]
		if l == sibLinks {
			if r.firstSib {
				break
			}
			seq = r.prevSib
		} else {
			if r.firstWaiting {
				break
			}
			seq = r.prevWaiting
		}
	}
	slices.Reverse(out)
	d.scratch = out
	return out
}

func (d *Detector) eval(ps, cs int32, out []Pair) []Pair {
	p, c := &d.recs[ps], &d.recs[cs]
	if c.innerF != -1 {
		return out
	}
	pi, ci := p.info(), c.info()
	by, ok := d.o.match(&pi, &ci)
	if !ok {
		return out
	}
	return d.record(p, c, by, false, out)
}

// evalSibling compares a held SERVER span with a new sibling.
func (d *Detector) evalSibling(held, added int32, out []Pair) []Pair {
	a, b := &d.recs[held], &d.recs[added]
	ai, bi := a.info(), b.info()
	outerIsA, by, ok := d.o.matchSibling(&ai, &bi)
	if !ok {
		return out
	}
	if !outerIsA {
		a, b = b, a
	}
	if b.innerF != -1 {
		return out
	}
	return d.record(a, b, by, true, out)
}

func (d *Detector) record(p, c *rec, by string, sibling bool, out []Pair) []Pair {
	d.st.Pairs++
	key := Key{
		Service:    p.src.service,
		Kind:       kindName(p.kind),
		Name:       pairName(p.name, p.route, c.name, by), // pathname.go
		OuterScope: p.src.scope,
		InnerScope: c.src.scope,
	}
	tid := c.key.traceID()
	pair := Pair{Key: key, InnerName: c.name, MatchedBy: by, Sibling: sibling, TraceID: tid, Outer: p.key.spanID(), Inner: c.key.spanID()}
	fi, ok := d.findIdx[key]
	if !ok && len(d.finds) >= MaxFindings {
		d.st.UnlistedPairs++
		c.innerF = unlisted
		return append(out, pair)
	}
	if !ok {
		fi = int32(len(d.finds))
		d.findIdx[key] = fi
		f := &findingAcc{key: key, by: by}
		if c.name != p.name {
			f.innerName = c.name
		}
		d.finds = append(d.finds, f)
	}
	f := d.finds[fi]
	f.occ++
	if sibling {
		f.siblings++
	}
	if d.marks.put(traceMark{tid, fi}, struct{}{}) {
		f.traces++
	}
	if c.kind == p.kind {
		f.affected++
	}
	c.innerF = fi
	if p.innerF != fi && p.outerF != fi {
		f.affected++
	}
	p.outerF = fi
	if len(f.examples) < d.o.MaxExamples {
		f.examples = append(f.examples, Example{
			TraceID:     tid.String(),
			OuterSpanID: pair.Outer.String(),
			InnerSpanID: pair.Inner.String(),
		})
	}
	return append(out, pair)
}

// Findings are the aggregated findings so far, the most frequent first.
func (d *Detector) Findings() []Finding {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.findings()
}

// Stats are the counters so far.
func (d *Detector) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats()
}

// Report is Findings and Stats taken together.
func (d *Detector) Report() Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Report{Findings: d.findings(), Stats: d.stats()}
}

func (d *Detector) stats() Stats {
	s := d.st
	s.Held = int(d.n)
	s.Bytes = d.bytes
	s.TraceMarksEvicted = int(d.marks.evicted)
	return s
}

func (d *Detector) findings() []Finding {
	out := make([]Finding, 0, len(d.finds))
	for _, a := range d.finds {
		f := Finding{
			Key:           a.key,
			InnerName:     a.innerName,
			MatchedBy:     a.by,
			Traces:        a.traces,
			Occurrences:   a.occ,
			Siblings:      a.siblings,
			AffectedSpans: a.affected,
			Examples:      slices.Clone(a.examples),
		}
		for k, n := range d.kinds {
			if k.service == a.key.Service && kindName(k.kind) == a.key.Kind {
				f.KindSpans += *n
			}
		}
		if f.KindSpans > 0 {
			f.Share = float64(f.AffectedSpans) / float64(f.KindSpans)
		}
		f.Diagnosis = Diagnosis(f)
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(b.Occurrences, a.Occurrences), a.compare(b.Key))
	})
	return out
}
