package nested

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// randomSpans is n spans with random ids; with lists, each a SERVER span
// waiting for a parent of its own (three index entries a span, the most).
func randomSpans(r *rand.Rand, n int, lists bool) ptrace.Traces {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for range n {
		sp := spans.AppendEmpty()
		var tr pcommon.TraceID
		var s, p pcommon.SpanID
		binary.LittleEndian.PutUint64(tr[:], r.Uint64())
		binary.LittleEndian.PutUint64(tr[8:], r.Uint64())
		binary.LittleEndian.PutUint64(s[:], r.Uint64())
		sp.SetTraceID(tr)
		sp.SetSpanID(s)
		if lists {
			binary.LittleEndian.PutUint64(p[:], r.Uint64())
			sp.SetParentSpanID(p)
			sp.SetKind(ptrace.SpanKindServer)
		}
	}
	return td
}

// searchLen is the mean number of buckets a search for a key not in the
// index reads, over all homes, and the longest.
func (x *index) searchLen() (mean float64, longest int) {
	total := 0
	for h := range uint32(len(x.b)) {
		n := 1
		for b := h; x.b[b].over != 0 && n <= len(x.b); b = (b + 1) & x.mask {
			n++
		}
		total += n
		longest = max(longest, n)
	}
	return float64(total) / float64(len(x.b)), longest
}

// TestIndexSearchesStayShort drives a full detector with random ids (the
// processor's shape: one entry a span) and with spans each waiting for a
// parent of their own as a SERVER span (three entries a span, the most:
// live entries fill 4/7 of the table), and checks the index's counts and
// that a search for a key not held reads few buckets: entries held past
// their home, live or stale, send searches on.
func TestIndexSearchesStayShort(t *testing.T) {
	for _, c := range []struct {
		lists   bool
		mean    float64
		longest int
	}{{false, 1.01, 6}, {true, 1.9, 40}} {
		r := rand.New(rand.NewPCG(1, 2))
		d := NewDetector(Options{MaxSpans: 20_000, MaxBytes: 1 << 30})
		for b := range 150 {
			d.Add(randomSpans(r, 1000, c.lists))
			if b%10 != 9 {
				continue
			}
			d.idx.check(t)
			mean, longest := d.idx.searchLen()
			if mean > c.mean || longest > c.longest {
				t.Fatalf("lists %v, batch %d: a search reads %.3f buckets on average, %d at most; want ≤ %.2f, ≤ %d",
					c.lists, b, mean, longest, c.mean, c.longest)
			}
			if b == 149 {
				t.Logf("lists %v: %d of %d entries used, a search reads %.3f buckets on average, %d at most",
					c.lists, d.idx.used, len(d.idx.b)*bucketLen, mean, longest)
			}
		}
	}
}

// TestStaleEntriesSwept: no stale entry is left in the index for longer
// than a pass of the sweep, so none is there when its arrival number
// comes round again.
func TestStaleEntriesSwept(t *testing.T) {
	for _, lists := range []bool{false, true} {
		r := rand.New(rand.NewPCG(3, 4))
		d := NewDetector(Options{MaxSpans: 64})
		pass := uint32(len(d.idxLenForTest())*sweepEvery + prefetchSpans + 64)
		for range 200 {
			d.Add(randomSpans(r, 100, lists))
			newest := d.seq0 + uint32(d.n) - 1
			for b := range d.idx.b {
				for _, e := range d.idx.b[b].e {
					if e.tag != 0 && newest-e.seq > pass {
						t.Fatalf("lists %v: an entry %d spans old, a pass of the sweep is %d", lists, newest-e.seq, pass)
					}
				}
			}
			d.idx.check(t)
		}
	}
}

// idxLenForTest is the index's buckets (allocated on the first span).
func (d *Detector) idxLenForTest() []bucket { return newIndex(d.o.MaxSpans).b }
