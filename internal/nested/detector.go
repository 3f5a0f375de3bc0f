package nested

import (
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/keyhash"
)

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

// Detect runs a fresh Detector over td.
func Detect(td ptrace.Traces, opts Options) Report {
	d := NewDetector(opts)
	d.Add(td)
	return d.Report()
}
