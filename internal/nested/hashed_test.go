package nested

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/keyhash"
)

// randomNested is batches of small traces over two resources and scopes:
// SERVER spans wrapped twice (a pair each), their children, spans sent
// twice, spans with an all-zero trace or span id, parents before and after
// their children.
func randomNested(r *rand.Rand, batches int) []ptrace.Traces {
	var out []ptrace.Traces
	for b := range batches {
		td := ptrace.NewTraces()
		for res := range 2 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", []string{"api", "db"}[res])
			for sc := range 2 {
				ss := rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName([]string{"otelhttp", "mux"}[sc])
				for range 40 {
					s := ss.Spans().AppendEmpty()
					t := pcommon.TraceID{1, byte(r.IntN(30)), byte(b % 3)}
					if r.IntN(20) == 0 {
						t = pcommon.TraceID{}
					}
					id := pcommon.SpanID{2, byte(r.IntN(6))}
					if r.IntN(20) == 0 {
						id = pcommon.SpanID{}
					}
					s.SetTraceID(t)
					s.SetSpanID(id)
					if id[1] > 0 {
						s.SetParentSpanID(pcommon.SpanID{2, id[1] - 1})
					}
					s.SetName([]string{"GET /a", "GET /b", "GET"}[r.IntN(3)])
					s.SetKind([]ptrace.SpanKind{ptrace.SpanKindServer, ptrace.SpanKindInternal}[r.IntN(2)])
					s.Attributes().PutStr("http.request.method", "GET")
					start := uint64(1_000_000 + 10_000*uint64(id[1]))
					s.SetStartTimestamp(pcommon.Timestamp(start))
					s.SetEndTimestamp(pcommon.Timestamp(2_000_000 - 10_000*uint64(id[1])))
				}
			}
		}
		out = append(out, td)
	}
	return out
}

// keysOf reads td's keys and hashes as the dedup processor's window does.
func keysOf(td ptrace.Traces, seed keyhash.Seed) ([][24]byte, []uint64) {
	var keys [][24]byte
	var hs []uint64
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				var k [24]byte
				t, id := s.TraceID(), s.SpanID()
				copy(k[:16], t[:])
				copy(k[16:], id[:])
				keys = append(keys, k)
				hs = append(hs, seed.Hash24(&k))
			}
		}
	}
	return keys, hs
}

// TestAddHashedIsAdd: given the window's keys and hashes, a Detector finds
// the same pairs, findings and stats as one reading them itself; given a
// count of keys that is not the batch's, it reads them itself.
func TestAddHashedIsAdd(t *testing.T) {
	seed := keyhash.NewSeed()
	opts := Options{MaxSpans: 50}
	a, h, m := NewDetectorSeeded(opts, seed), NewDetectorSeeded(opts, seed), NewDetectorSeeded(opts, seed)
	pairs := 0
	for i, td := range randomNested(rand.New(rand.NewPCG(3, 4)), 40) {
		keys, hs := keysOf(td, seed)
		pa, ph := a.Add(td), h.AddHashed(td, keys, hs)
		pm := m.AddHashed(td, keys[1:], hs[1:])
		if !reflect.DeepEqual(pa, ph) || !reflect.DeepEqual(pa, pm) {
			t.Fatalf("batch %d: pairs\nAdd       %v\nAddHashed %v\nshort     %v", i, pa, ph, pm)
		}
		pairs += len(pa)
	}
	if pairs == 0 || a.Stats().InvalidIDs == 0 || a.Stats().Duplicates == 0 || a.Stats().Evicted == 0 {
		t.Fatalf("the batches test too little: %d pairs, stats %+v", pairs, a.Stats())
	}
	if ra, rh := a.Report(), h.Report(); !reflect.DeepEqual(ra, rh) {
		t.Fatalf("reports differ\nAdd       %+v\nAddHashed %+v", ra, rh)
	}
}
