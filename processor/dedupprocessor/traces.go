package dedupprocessor

import (
	"context"
	"encoding/binary"
	"math/bits"
	"sync"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// spanUnit is the span signal: a window of span ids with a fingerprint of
// their content (keyed.go), its services, and with storage its journal.
type spanUnit struct {
	keyedUnit[[24]byte, uint64]
	scratch sync.Pool // *spanScratch
}

// spanScratch is one request's working memory, pooled so that the steady
// state allocates nothing. It is the request's pending change of the unit.
type spanScratch struct {
	keyedChange[[24]byte, uint64]
	keys   [][24]byte // every span's key, in the order ConsumeTraces walks them
	hashes []uint64   // their index hashes
	kept   int        // after judge, keys[:kept] and hashes[:kept] are those of the spans left

	seq  uint64 // judgeSpan: the write that stored a duplicate's original
	wait parkedItems[ptrace.Traces, ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span, spanLayout]
}

// spanRecord is one stored span: trace id + span id, fingerprint.
const spanRecord = 24 + 8

// spanFormat journals a span as its trace and span ids and its
// fingerprint; span ids are stored as they are, unseeded.
var spanFormat = keyFormat[[24]byte, uint64]{
	signal: "traces", name: "span", restored: "span_ids", keySize: 24, record: spanRecord,
	putKey:   func(b []byte, k *[24]byte) []byte { return append(b, k[:]...) },
	putValue: binary.LittleEndian.AppendUint64,
	key:      func(b []byte) [24]byte { return [24]byte(b[:24]) },
	value:    func(b []byte) uint64 { return binary.LittleEndian.Uint64(b[24:]) },
}

func newSpanUnit(cfg *Config, seed window.Seed, svcs *services) (*spanUnit, error) {
	set, err := window.New[[24]byte, uint64](cfg.Traces.MaxSpans, int64(cfg.Traces.Window), seed.Hash24)
	if err != nil {
		return nil, err
	}
	u := &spanUnit{}
	u.init(&spanFormat, set, cfg.Traces.MaxSpans, cfg.Traces.Window, cfg, svcs)
	u.scratch.New = func() any { sc := &spanScratch{}; sc.u = &u.keyedUnit; return sc }
	return u, nil
}

// verdict is what happens to one span.
type verdict uint8

const (
	verdictNew verdict = iota
	verdictDuplicate
	verdictConflict
	verdictInvalid
)

// prefetchSpans is how many spans' index lines are loaded ahead at a time:
// enough for the misses to overlap, few enough (two or three 64-byte lines
// a span) that the lines are still in the cache when the spans are judged.
const prefetchSpans = 1024

// hashSpans is the first pass over a request: it reads every span's key
// and hashes it in place, outside the window's lock.
func (u *spanUnit) hashSpans(rss ptrace.ResourceSpansSlice, sc *spanScratch) {
	for _, rs := range rss.All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				sc.keys = append(sc.keys, [24]byte{})
				k := &sc.keys[len(sc.keys)-1]
				tid, sid := s.TraceID(), s.SpanID()
				copy(k[:16], tid[:])
				copy(k[16:], sid[:])
				sc.hashes = append(sc.hashes, u.set.Hash(k))
			}
		}
	}
}

// judgeSpan decides the fate of span s, the j-th of its request, under the
// window's lock, loading the index lines of the next spans ahead.
func (u *spanUnit) judgeSpan(s ptrace.Span, j int, now int64, sc *spanScratch) verdict {
	if j%prefetchSpans == 0 {
		u.set.Prefetch(sc.hashes[j:min(j+prefetchSpans, len(sc.hashes))])
	}
	k := &sc.keys[j]
	if [16]byte(k[:16]) == [16]byte{} || [8]byte(k[16:]) == [8]byte{} {
		return verdictInvalid
	}
	fp := spanFingerprint(s)
	prev, seen, seq := u.set.ObserveSeq(k, sc.hashes[j], fp, now)
	sc.seq = seq
	switch {
	case !seen:
		sc.insert(*k, fp)
		return verdictNew
	case prev == fp:
		return verdictDuplicate
	default:
		return verdictConflict
	}
}

// begin takes a request's scratch; end gives it back.
func (u *spanUnit) begin() *spanScratch {
	sc := u.scratch.Get().(*spanScratch)
	sc.keys, sc.hashes, sc.kept = sc.keys[:0], sc.hashes[:0], 0
	sc.reset(u.now())
	return sc
}

// spanLayout is how parked spans are laid out (parkedItems).
type spanLayout struct{}

func (spanLayout) new() ptrace.Traces { return ptrace.NewTraces() }
func (spanLayout) resource(td ptrace.Traces) ptrace.ResourceSpans {
	return td.ResourceSpans().AppendEmpty()
}
func (spanLayout) scope(rs ptrace.ResourceSpans) ptrace.ScopeSpans {
	return rs.ScopeSpans().AppendEmpty()
}
func (spanLayout) move(s ptrace.Span, ss ptrace.ScopeSpans) { s.MoveTo(ss.Spans().AppendEmpty()) }

var _ layout[ptrace.Traces, ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span] = spanLayout{}

// parkedCopies hands over the copies parked while judging and the
// flights they wait for, and clears them from sc.
func (sc *spanScratch) parkedCopies() (ptrace.Traces, []uint64) {
	return sc.wait.take(), sc.parkedStarts()
}

func (u *spanUnit) end(sc *spanScratch) { u.scratch.Put(sc) }

// judge judges every span of td into the window, counts them and, with
// drop, removes the duplicates (and the conflicts with keepFirst). It says
// whether anything is left to forward.
func (u *spanUnit) judge(ctx context.Context, td ptrace.Traces, sc *spanScratch, tel *telemetry, drop, keepFirst bool) bool {
	now := sc.now
	var total, kept int64
	rss := td.ResourceSpans()
	// Two passes: hash every key, then judge the spans in the same order,
	// loading the index ahead so that its cache misses overlap.
	u.hashSpans(rss, sc)
	j := 0
	u.mu.Lock()
	u.set.Expire(now)
	start := u.set.Written()
	sc.parked.reset(start)
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sc.counts = append(sc.counts, counts{svc: u.svcs.get(rs.Resource())})
		c := &sc.counts[len(sc.counts)-1]
		var ss ptrace.ScopeSpans
		si := -1
		var cs copyScope
		judged := func(s ptrace.Span) bool {
			c.received++
			j++
			switch u.judgeSpan(s, j-1, now, sc) {
			case verdictDuplicate:
				c.duplicates++
				c.copyIn(&cs, u.svcs.releases, si, ss.Scope())
				if drop && sc.parked.waitsFor(&u.flights, sc.seq) {
					sc.wait.park(rs, i, ss, si, s)
					return false
				}
				return !drop
			case verdictConflict:
				c.conflicts++
				if drop && keepFirst && sc.parked.waitsFor(&u.flights, sc.seq) {
					sc.wait.park(rs, i, ss, si, s)
					return false
				}
				return !drop || !keepFirst
			case verdictInvalid:
				c.invalid++
			}
			return true
		}
		// The nested detector takes the keys of the spans left.
		keep := func(s ptrace.Span) bool {
			if !judged(s) {
				return false
			}
			sc.keys[sc.kept], sc.hashes[sc.kept] = sc.keys[j-1], sc.hashes[j-1]
			sc.kept++
			return true
		}
		if drop {
			rs.ScopeSpans().RemoveIf(func(scope ptrace.ScopeSpans) bool {
				ss = scope
				si++
				ss.Spans().RemoveIf(func(s ptrace.Span) bool { return !keep(s) })
				return ss.Spans().Len() == 0
			})
		} else {
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				ss, si = sss.At(j), j
				spans := ss.Spans()
				for k := 0; k < spans.Len(); k++ {
					keep(spans.At(k))
				}
			}
		}
		total += c.received
		kept += c.received - c.duplicates - c.conflicts
	}
	if drop {
		rss.RemoveIf(func(rs ptrace.ResourceSpans) bool { return rs.ScopeSpans().Len() == 0 })
	}
	if end := u.set.Written(); end > start {
		// Registered before the lock is let go: no copy finds these
		// spans without finding them unsettled.
		u.flights.register(&sc.flight, start, end)
	}
	capEv, shrunk := u.evictionsLocked()
	u.mu.Unlock()

	u.reportEvictions(ctx, tel, capEv, shrunk)
	whole := total > 0 && kept == 0
	if !sc.again {
		u.svcs.record(sc.counts, drop, whole, "spans")
	}
	// Nothing new left: the sender already delivered all of it.
	return !drop || rss.Len() > 0
}

// takeBack forgets the spans of td that the window holds and returns
// their keys; the requests not settled yet will not journal any span of
// td. Call with u.unsettled.order held alone.
func (u *spanUnit) takeBack(td ptrace.Traces) [][24]byte {
	return u.keyedUnit.takeBack(func(yield func([24]byte)) {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					s := spans.At(k)
					tid, sid := s.TraceID(), s.SpanID()
					if tid.IsEmpty() || sid.IsEmpty() {
						continue
					}
					var key [24]byte
					copy(key[:16], tid[:])
					copy(key[16:], sid[:])
					yield(key)
				}
			}
		}
	})
}

func (u *spanUnit) reseed(window.Seed) {} // span ids are stored as they are

// Fingerprint constants: odd 64-bit numbers with well mixed bits.
const (
	fp1 = 0xa0761d6478bd642f
	fp2 = 0xe7037ed1a0b428db
	fp3 = 0x8ebc6af09c88c6e3
	fp4 = 0x589965cc75374cc3
)

func fpmix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// spanFingerprint summarises what tells two versions of one span apart: its
// name, kind, parent, timing, status, flags, and the sizes of its
// attributes, events and links (not their values: a re-send with the same
// timing and status but other attribute values counts as a duplicate). It is
// unseeded so that it survives a restart of the process.
func spanFingerprint(s ptrace.Span) uint64 {
	h := xxh3.HashString(s.Name())
	h = fpmix(h^uint64(s.StartTimestamp()), fp1)
	h = fpmix(h^uint64(s.EndTimestamp()), fp2)
	pid := s.ParentSpanID()
	st := s.Status()
	h = fpmix(h^binary.LittleEndian.Uint64(pid[:]), fp3^uint64(s.Kind())<<8^uint64(st.Code())<<16^uint64(s.Flags())<<24)
	if msg := st.Message(); msg != "" {
		h ^= xxh3.HashString(msg)
	}
	sizes := uint64(s.Attributes().Len()) | uint64(s.Events().Len())<<16 | uint64(s.Links().Len())<<32 |
		uint64(s.DroppedAttributesCount()+s.DroppedEventsCount()+s.DroppedLinksCount())<<48
	return fpmix(h^sizes, fp4)
}
