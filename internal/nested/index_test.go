package nested

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestIndexRunsStayShort drives a full detector with random ids (the
// processor's shape: one entry a span) and with spans each waiting for a
// parent of their own as a SERVER span (three entries a span, the most),
// and checks that the sweep keeps the index's probe runs short and the
// table at most 3/4 full: stale entries, left to gather ahead of the
// sweep, would join its runs into one.
func TestIndexRunsStayShort(t *testing.T) {
	for _, lists := range []bool{false, true} {
		r := rand.New(rand.NewPCG(1, 2))
		d := NewDetector(Options{MaxSpans: 20_000, MaxBytes: 1 << 30})
		for b := range 150 {
			td := ptrace.NewTraces()
			spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			for range 1000 {
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
			d.Add(td)
			if b%10 != 9 {
				continue
			}
			used, longest, run := 0, 0, 0
			for _, e := range d.idx.e {
				if e.tag == 0 {
					run = 0
					continue
				}
				used, run = used+1, run+1
				longest = max(longest, run)
			}
			if used != d.idx.used || 4*used > 3*len(d.idx.e) || longest > 256 {
				t.Fatalf("lists %v, batch %d: %d of %d entries used (counted %d), longest run %d", lists, b, used, len(d.idx.e), d.idx.used, longest)
			}
			if b == 149 {
				t.Logf("lists %v: %d of %d entries used, longest run %d", lists, used, len(d.idx.e), longest)
			}
		}
	}
}
