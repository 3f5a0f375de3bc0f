package dedupprocessor

import (
	"context"
	"encoding/binary"
	"math/bits"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// spanKey is a span's identity: its trace id and span id, all 24 bytes.
type spanKey [24]byte

// spanWindow remembers span ids with a fingerprint of their content.
type spanWindow struct {
	signalWindow
	spans  *window.Set[[24]byte, uint64]
	totals atomicTotals

	now func() int64 // the clock, in Unix nanoseconds; tests replace it

	scratch sync.Pool // *spanScratch
}

// spanScratch is one request's working memory, pooled so that the steady
// state allocates nothing.
type spanScratch struct {
	keys     [][24]byte // every span's key, in the order ConsumeTraces walks them
	hashes   []uint64   // their index hashes
	inserted [][24]byte // keys this request stored, to take back on failure
	fps      []uint64   // their fingerprints, to journal on success
	counts   []counts   // per resource
}

func newSpanWindow(cfg *Config, seed window.Seed) (*spanWindow, error) {
	set, err := window.New[[24]byte, uint64](cfg.Traces.MaxSpans, int64(cfg.Traces.Window), seed.Hash24)
	if err != nil {
		return nil, err
	}
	w := &spanWindow{signalWindow: *newSignalWindow("traces", set), spans: set}
	w.now = func() int64 { return time.Now().UnixNano() }
	w.scratch.New = func() any { return &spanScratch{} }
	return w, nil
}

type tracesProcessor struct {
	component.StartFunc
	component.ShutdownFunc
	st           *state
	next         consumer.Traces
	drop         bool // mode drop
	keepFirst    bool // on_conflict keep_first
	capabilities consumer.Capabilities
}

func (p *tracesProcessor) Capabilities() consumer.Capabilities { return p.capabilities }

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
func (w *spanWindow) hashSpans(rss ptrace.ResourceSpansSlice, sc *spanScratch) {
	for _, rs := range rss.All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				sc.keys = append(sc.keys, [24]byte{})
				k := &sc.keys[len(sc.keys)-1]
				tid, sid := s.TraceID(), s.SpanID()
				copy(k[:16], tid[:])
				copy(k[16:], sid[:])
				sc.hashes = append(sc.hashes, w.spans.Hash(k))
			}
		}
	}
}

// judge decides the fate of span s, the j-th of its request, under the
// window's lock, loading the index lines of the next spans ahead.
func (w *spanWindow) judge(s ptrace.Span, j int, now int64, sc *spanScratch) verdict {
	if j%prefetchSpans == 0 {
		w.spans.Prefetch(sc.hashes[j:min(j+prefetchSpans, len(sc.hashes))])
	}
	k := &sc.keys[j]
	if [16]byte(k[:16]) == [16]byte{} || [8]byte(k[16:]) == [8]byte{} {
		return verdictInvalid
	}
	fp := spanFingerprint(s)
	prev, seen := w.spans.ObserveHashed(k, sc.hashes[j], fp, now)
	switch {
	case !seen:
		sc.inserted = append(sc.inserted, *k)
		sc.fps = append(sc.fps, fp)
		return verdictNew
	case prev == fp:
		return verdictDuplicate
	default:
		return verdictConflict
	}
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	w := p.st.traces
	sc := w.scratch.Get().(*spanScratch)
	sc.keys, sc.hashes = sc.keys[:0], sc.hashes[:0]
	sc.inserted, sc.fps, sc.counts = sc.inserted[:0], sc.fps[:0], sc.counts[:0]
	defer w.scratch.Put(sc)

	now := w.now()
	var total, kept int64
	rss := td.ResourceSpans()
	// Two passes: hash every key, then judge the spans in the same order,
	// loading the index ahead so that its cache misses overlap.
	w.hashSpans(rss, sc)
	j := 0
	w.mu.Lock()
	w.spans.Expire(now)
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sc.counts = append(sc.counts, counts{svc: p.st.spanSvcs.get(rs.Resource())})
		c := &sc.counts[len(sc.counts)-1]
		keep := func(s ptrace.Span) bool {
			c.received++
			j++
			switch w.judge(s, j-1, now, sc) {
			case verdictDuplicate:
				c.duplicates++
				return !p.drop
			case verdictConflict:
				c.conflicts++
				return !p.drop || !p.keepFirst
			case verdictInvalid:
				c.invalid++
			}
			return true
		}
		if p.drop {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(s ptrace.Span) bool { return !keep(s) })
				return ss.Spans().Len() == 0
			})
		} else {
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					keep(spans.At(k))
				}
			}
		}
		total += c.received
		kept += c.received - c.duplicates - c.conflicts
	}
	if p.drop {
		rss.RemoveIf(func(rs ptrace.ResourceSpans) bool { return rs.ScopeSpans().Len() == 0 })
	}
	capEv, shrunk := w.evictionsLocked()
	w.mu.Unlock()

	w.reportEvictions(ctx, p.st.tel, capEv, shrunk)
	w.totals.add(sc.counts)
	whole := total > 0 && kept == 0
	p.st.spanSvcs.record(ctx, p.st.tel, sc.counts, p.drop, p.drop && p.keepFirst, whole, "spans")

	if p.drop && rss.Len() == 0 {
		return nil // nothing new: the sender already delivered all of it
	}
	if p.st.nested != nil {
		p.st.nested.process(ctx, td, p.st.tel)
	}
	err := p.next.ConsumeTraces(ctx, td)
	if err == nil && len(sc.inserted) > 0 && p.st.persist != nil {
		// Delivered: journal what it stored before the sender is answered.
		// A failure here costs a possible duplicate after a crash, not data.
		_ = p.st.persist.appendSpans(ctx, now, sc.inserted, sc.fps)
	}
	if err != nil && len(sc.inserted) > 0 {
		// Not delivered: take the keys back so that the sender's retry
		// passes instead of being dropped as a duplicate.
		w.mu.Lock()
		var n int64
		for _, k := range sc.inserted {
			if w.spans.Forget(k) {
				n++
			}
		}
		w.mu.Unlock()
		p.st.tel.rolledBack.Add(ctx, n, w.signalOpt)
	}
	return err
}

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
