package streams

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

const benchStreams = 10_000

func randomIDs(n int) []ID {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]ID, n)
	for i := range ids {
		for j := range ids[i] {
			ids[i][j] = byte(r.Uint32())
		}
	}
	return ids
}

// BenchmarkObserve is the Tracker alone in steady state: 10k cumulative
// streams, every stream gets one point per round from each writer. With 2
// writers (starts 100 s and 105 s), half the points lose the election.
//
// With /auto the classifier judges the second writer: a copy (its values
// the first's) or, with /auto/peers, a peer (twice them).
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		writers     int
		auto, peers bool
		rounds      int // of warm-up: 40 decide the copies
	}{{1, false, false, 2}, {2, false, false, 2}, {2, true, false, 2}, {2, true, false, 40}, {2, true, true, 2}} {
		writers := bc.writers
		name := fmt.Sprintf("streams=10k/writers=%d", writers)
		if bc.auto {
			name += "/auto"
		}
		if bc.peers {
			name += "/peers"
		}
		if bc.rounds > 2 {
			name += "/copies_decided"
		}
		b.Run(name, func(b *testing.B) {
			tr := newTracker(b, func(p *Policy) { p.Auto = bc.auto; p.MaxJudged = 2 * benchStreams })
			ids := randomIDs(benchStreams)
			point := func(i int) (ID, Point) {
				w := i % writers
				k := i / writers
				s, round := k%benchStreams, uint64(k/benchStreams)
				t := (110 + 10*round + uint64(w)) * sec
				v := float64(round)
				if bc.peers {
					v *= float64(w + 1)
				}
				return ids[s], Point{Start: (100 + 5*uint64(w)) * sec, Time: t, Value: v, Fingerprint: uint64(round)}
			}
			for i := range bc.rounds * writers * benchStreams { // create and warm every stream
				id, p := point(i)
				tr.ObserveFrom(id, 5, monoSum, p, 0)
			}
			if bc.rounds > 2 {
				if st := tr.JudgeStats(); st.ByClass[ClassCopy] == 0 {
					b.Fatalf("no copy decided: %+v", st)
				}
			}
			off := bc.rounds * writers * benchStreams
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				id, p := point(off + i)
				tr.ObserveFrom(id, 5, monoSum, p, 0)
			}
		})
	}
}

// BenchmarkHasher is a stream's identity per point: resource, scope and
// metric digests amortised over 100 points, each with 3 attributes, in
// insertion order (Python, JS) or sorted (Go, Java, Prometheus).
func BenchmarkHasher(b *testing.B) {
	b.Run("attrs=unsorted", func(b *testing.B) { benchHasher(b, false) })
	b.Run("attrs=sorted", func(b *testing.B) { benchHasher(b, true) })
}

func benchHasher(b *testing.B, sorted bool) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr("service.name", "checkout")
	ra.PutStr("service.instance.id", "6f1c0b7e-2f4a-4f7e-9a57-3c1d9e1b2a10")
	ra.PutStr("telemetry.sdk.language", "go")
	ra.PutStr("host.name", "ip-10-0-0-1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	sm.Scope().SetVersion("0.71.0")
	m := sm.Metrics().AppendEmpty()
	m.SetName("http.server.request.duration")
	m.SetUnit("s")
	sum := m.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sum.SetIsMonotonic(true)
	for i := range 100 {
		a := sum.DataPoints().AppendEmpty().Attributes()
		a.PutStr("http.request.method", "GET")
		if sorted {
			a.PutStr("http.response.route", "/api/v1/rollouts/{id}")
			a.PutInt("http.response.status_code", int64(200+i))
		} else {
			a.PutInt("http.response.status_code", int64(200+i))
			a.PutStr("http.route", "/api/v1/rollouts/{id}")
		}
	}
	h := NewHasher(7)
	dps := sum.DataPoints()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % 100
		if k == 0 {
			h.Resource(rm.Resource())
			h.Scope(sm.Scope())
			h.Metric(m)
		}
		dp := dps.At(k)
		_ = h.Point(dp.Attributes())
		_ = NumberPoint(dp)
	}
}

// heapBytes returns the live heap after a full collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkBytesPerStream measures what a tracked stream costs: the heap
// grown by a Tracker holding n streams (its pages, its index map, each
// stream with a runner-up writer), divided by n.
func BenchmarkBytesPerStream(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("streams=%dk", n/1000), func(b *testing.B) {
			ids := randomIDs(n)
			var per float64
			for range b.N {
				before := heapBytes()
				tr := newTracker(b, func(p *Policy) { p.MaxStreams = n })
				for i, id := range ids {
					tr.Observe(id, monoSum, Point{Start: 100 * sec, Time: 110 * sec, Value: float64(i)}, 0)
					tr.Observe(id, monoSum, Point{Start: 105 * sec, Time: 111 * sec, Value: float64(i)}, 0)
				}
				after := heapBytes()
				per = float64(after-before) / float64(n)
				runtime.KeepAlive(tr)
			}
			b.ReportMetric(per, "bytes/stream")
		})
	}
}

// BenchmarkPairAdd is one Pair of a cumulative histogram's two writers
// (its count and sum; no buckets), a copy read 10 ms after the earlier
// writer every second, 5 measurements apart (11 join counts fit the
// bracketing bounds): ns per point fed. /minmax carries min and max, so
// each point also runs the joint test of count and sum over its join
// counts (joint.go); without them it does not.
func BenchmarkPairAdd(b *testing.B) {
	for _, mm := range []bool{false, true} {
		name := "histogram"
		if mm {
			name += "/minmax"
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			const n = 4096
			pts := make([]Point, 0, 2*n)
			var ec, lc, es, ls float64
			for k := range n {
				for range 5 {
					v := 0.02 + r.Float64()/100
					ec, es = ec+1, es+v
					if k > 0 {
						lc, ls = lc+1, ls+v
					}
				}
				t := (110 + uint64(k)) * sec
				pts = append(pts,
					Point{Start: 100 * sec, Time: t, Value: ec, Sum: es, HasSum: true, Min: 0.02, Max: 0.03, HasMinMax: mm},
					Point{Start: 105 * sec, Time: t + 10*uint64(time.Millisecond), Value: lc, Sum: ls, HasSum: true, Min: 0.02, Max: 0.03, HasMinMax: mm})
			}
			var p Pair
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%len(pts) == 0 {
					p.Reset()
				}
				p.Add(histogram, pts[i%len(pts)])
			}
			b.StopTimer()
			if p.Class() == ClassPeer {
				b.Fatalf("a copy judged a peer: %v", p.Evidence())
			}
			if b.N%len(pts) > 100 && mm != p.joint.on {
				b.Fatalf("joint test on: %v, want %v", p.joint.on, mm)
			}
		})
	}
}

// BenchmarkSharedStart: the cost per point of a stream whose start is
// shared by 4 writers, split (shared.go): each point placed by its export
// phase (phase: no connections known), or with each writer on its own
// connection (conn: split by the connections, trusted).
func BenchmarkSharedStart(b *testing.B) {
	for _, conns := range []bool{false, true} {
		name := "phase"
		if conns {
			name = "conn" // each writer its own connection
		}
		b.Run(name, func(b *testing.B) {
			tr := autoTracker(b, nil)
			const n = 4
			var v [n]float64
			tm := func(k, w int) uint64 { return secs(110 + float64(k) + 0.23*float64(w)) }
			conn := func(w int) uint64 {
				if conns {
					return uint64(w) + 1
				}
				return 0
			}
			k := 0
			for ; k < 20; k++ {
				for w := range n {
					v[w] += float64(w + 1)
					tr.Observe(ID{1}, monoSum, Point{Start: secs(100), Time: tm(k, w), Value: v[w], Fingerprint: uint64(k*n + w), Conn: conn(w)}, 1)
				}
			}
			if e, ok := tr.Shared(ID{1}); !ok || e.Writers != n || e.Conn != conns {
				b.Fatalf("not split as meant: %+v", e)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := i % n
				if w == 0 {
					k++
				}
				v[w] += float64(w + 1)
				tr.Observe(ID{1}, monoSum, Point{Start: secs(100), Time: tm(k, w), Value: v[w], Fingerprint: uint64(k*n + w), Conn: conn(w)}, 1)
			}
		})
	}
}

// BenchmarkDeltaAuto: the cost per point of judging delta chains under
// Policy.Auto, the elected chain and a second writer's, exporting every
// second in their own phases: dense (a point every interval) and sparse
// (no point for an interval without measurements: every other interval
// skipped, each chain going on across the gap). /exports: the points'
// resource is known (Tracker.NewScope) and every export also carries its
// reader's up-down counter (recorded and linked, not judged), one export a
// point (the most the record costs: exports.go): each sparse point is
// found on its chain by the links, across one empty interval.
func BenchmarkDeltaAuto(b *testing.B) {
	for _, tc := range []struct {
		name    string
		skip    bool
		exports bool
	}{{"dense", false, false}, {"sparse", true, false}, {"dense/exports", false, true}, {"sparse/exports", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			p := DefaultPolicy()
			p.Auto, p.MaxHeldBytes = true, 0
			tr, err := NewTracker(p)
			if err != nil {
				b.Fatal(err)
			}
			if tc.exports {
				tr.NewScope(7)
			}
			const base = 1000 * sec
			gap := uint64(0)
			if tc.skip {
				gap = sec
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w, j := uint64(i%2), uint64(i/2)
				start := base + w*(sec/3) + j*(sec+gap)
				if j > 0 {
					start += gap // an interval without measurements before this one
				}
				pt := Point{Start: start, Time: start + sec, Value: float64(1 + j%3)}
				if tc.exports {
					// Each export's up-down counter (its reader's start),
					// the empty interval's export's too: recorded, linked.
					up := Point{Start: (w + 1) * sec, Value: 1}
					if tc.skip && j > 0 {
						up.Time = start
						tr.judge.exports.observe(7, upDown, up)
					}
					up.Time = pt.Time
					tr.judge.exports.observe(7, upDown, up)
					tr.NewScope(7)
				}
				tr.ObserveFrom(ID{1}, 9, deltaSum, pt, 0)
			}
		})
	}
}
