package streams

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// movedSharers are two processes sharing the start 100 s, exporting every
// second: A at whole seconds from 110 s counting 2 a second from 10, B
// 400 ms later counting 10 a second from 100, for rounds rounds; at round
// moved B's timer is late: its export is stamped 950 ms after the round's
// start (on A's phase, one interval after A's previous export, above its
// value; 1.55 intervals after B's own) and arrives before A's. conn gives
// each writer's connection (A's conn(0), B's conn(1); 0: none known).
func movedSharers(rounds, moved int, conn func(w int) uint64) []Point {
	var out []Point
	for k := range rounds {
		a := pt{start: 100, time: 110 + float64(k), value: 10 + 2*float64(k)}.point()
		a.Conn = conn(0)
		b := pt{start: 100, time: 110.4 + float64(k), value: 100 + 10*float64(k)}
		if k == moved {
			b.time = 110.95 + float64(k)
		}
		bp := b.point()
		bp.Conn = conn(1)
		if k == moved {
			out = append(out, bp, a) // B's late export comes first
			continue
		}
		out = append(out, a, bp)
	}
	return out
}

// sharedOutcome feeds pts into a fresh Tracker and returns the sum of the
// output series' newest values, the decisions in order, and the evidence.
func sharedOutcome(t *testing.T, pts []Point) (float64, []string, SharedEvidence) {
	t.Helper()
	tr := autoTracker(t, nil)
	newest := map[uint8]Point{}
	var ds []string
	for _, p := range pts {
		d := tr.Observe(ID{1}, monoSum, p, 1)
		ds = append(ds, fmt.Sprintf("%v/%d", d, d.Sharer))
		if d.Verdict != Drop {
			if q, ok := newest[d.Sharer]; !ok || p.Time > q.Time {
				newest[d.Sharer] = p
			}
		}
	}
	sum := 0.0
	for _, p := range newest {
		sum += p.Value
	}
	e, _ := tr.Shared(ID{1})
	return sum, ds, e
}

// TestSharedStartByConnection: two processes sharing a start, each
// exporting on its own connection, one of whose exports a busy timer moved
// onto the other's phase above its value (what TestDefaultSharedStart met
// end to end: a point placed on another writer's series, which kept it as
// its newest). By phase alone the moved point goes to A's series (too
// much delivered, the run reported); split by the connections, each point
// is its writer's: the truth. With one connection for both (an agent
// collector in between) or connections handed out to either writer (a
// pool), the connections never place a point: the decisions are the
// phase's alone, point for point.
func TestSharedStartByConnection(t *testing.T) {
	const rounds, moved = 14, 10
	truth := float64(10+2*(rounds-1)) + float64(100+10*(rounds-1))
	own := func(w int) uint64 { return uint64(w) + 1 }
	none := func(int) uint64 { return 0 }

	got, _, e := sharedOutcome(t, movedSharers(rounds, moved, own))
	t.Logf("by connection: %g delivered, truth %g; %s", got, truth, e)
	if got != truth {
		t.Errorf("split by connection: %g delivered, want the truth %g", got, truth)
	}
	if !e.Conn || e.Writers != 2 || e.ByConn == 0 || e.Unsplit != 0 ||
		!strings.Contains(e.String(), "split by the connection each writer's points came on") ||
		!strings.Contains(e.String(), "placed by the connection they came on") {
		t.Errorf("evidence %+v: %s", e, e)
	}

	phaseGot, phaseDs, pe := sharedOutcome(t, movedSharers(rounds, moved, none))
	t.Logf("by phase: %g delivered; %s", phaseGot, pe)
	if phaseGot == truth {
		t.Errorf("by phase alone the moved export should be misplaced: %g delivered, the truth", phaseGot)
	}
	if pe.Conn || pe.ByConn != 0 {
		t.Errorf("no connections known, evidence %+v", pe)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for name, conn := range map[string]func(int) uint64{
		"one connection": func(int) uint64 { return 7 },
		"a pool":         func(int) uint64 { return 7 + uint64(rng.IntN(2)) },
	} {
		g, ds, ce := sharedOutcome(t, movedSharers(rounds, moved, conn))
		if g != phaseGot || strings.Join(ds, " ") != strings.Join(phaseDs, " ") || ce.ByConn != 0 || ce.Conn {
			t.Errorf("%s: %g delivered (phase alone %g), evidence %s\n got %v\nwant %v", name, g, phaseGot, ce, ds, phaseDs)
		}
	}
}

// TestSharedStartConnPools: the simulations' processes (simulateSharedWith,
// with a flush at shutdown) with connections that are not each one
// writer's. One connection for all (an agent collector in between): every
// run delivers what it delivers without connections, and no point is
// placed by its connection. A pool of two that every export takes at
// random (a proxy): the connections place next to nothing (chance can
// make a pool look like one connection per writer for a few exports, not
// for long), and as many runs are exact (the truth, or the regular
// exports' when a flush is counted unplaced) as without connections (the
// learning waits for the connections to show what they are: a run may
// split at another moment).
func TestSharedStartConnPools(t *testing.T) {
	points, byConn, truthNone, truthPool := 0, uint64(0), 0, 0
	for _, n := range []int{2, 4} {
		for run := range 100 {
			sim := func(conn func(int) uint64) sharedRun {
				return simulateSharedWith(t, rand.New(rand.NewPCG(uint64(n), uint64(run))), n, uint64(time.Second), 30*sec, true, true, conn)
			}
			base := sim(nil)
			if r := sim(func(int) uint64 { return 7 }); r.delivered != base.delivered || r.byConn != 0 {
				t.Errorf("%d processes, run %d, one connection: %g delivered (%d by connection), %g without connections", n, run, r.delivered, r.byConn, base.delivered)
			}
			pool := rand.New(rand.NewPCG(9, uint64(run)))
			r := sim(func(int) uint64 { return 7 + uint64(pool.IntN(2)) })
			points += n * 32
			byConn += r.byConn
			if base.delivered == base.truth || base.delivered == base.regular {
				truthNone++
			}
			if r.delivered == r.truth || r.delivered == r.regular {
				truthPool++
			}
		}
	}
	t.Logf("a pool of two: %d of about %d points placed by connection; exact in %d runs, %d without connections", byConn, points, truthPool, truthNone)
	if byConn*1000 > uint64(points) {
		t.Errorf("a pool of two connections placed %d of %d points", byConn, points)
	}
	if truthPool < truthNone {
		t.Errorf("a pool of two: exact in %d runs, %d without connections", truthPool, truthNone)
	}
}

// TestSharedStartConnsWithACopy: two processes sharing a start, each on
// its own connection, and a second reader of the first (its own exporter,
// its own connection, reading the same aggregation on its own timer). The
// copy's values never fall against its original's, so the connections are
// never told apart and never split the start (its connection never a
// peer's series); the export phase still does, once learning by the
// connections has waited for a full ring (then at every second point).
func TestSharedStartConnsWithACopy(t *testing.T) {
	split := 0
	for run := range 50 {
		rng := rand.New(rand.NewPCG(7, uint64(run)))
		type export struct {
			at uint64
			p  Point
		}
		var all []export
		const start = 1000 * sec
		iv := uint64(time.Second)
		rates := [2]float64{1 + float64(rng.IntN(10)), 20 + float64(rng.IntN(10))}
		phases := [3]uint64{uint64(rng.Int64N(int64(iv))), uint64(rng.Int64N(int64(iv))), uint64(rng.Int64N(int64(iv)))}
		value := func(w int, tm uint64) float64 { return math.Floor(rates[w] * float64(tm-start) / 1e9) }
		for w, conn := range []uint64{1, 2, 3} {
			src := min(w, 1)
			if w == 2 {
				src = 0 // the copy reads the first process's aggregation
			}
			for tm := start + phases[w]; tm <= start+40*sec; tm += iv {
				v := value(src, tm)
				all = append(all, export{at: tm + uint64(rng.Int64N(int64(100*time.Millisecond))),
					p: Point{Start: start, Time: tm, Value: v, Fingerprint: math.Float64bits(v) ^ tm, Conn: conn}})
			}
		}
		slices.SortStableFunc(all, func(a, b export) int { return cmp.Compare(a.at, b.at) })
		tr := autoTracker(t, nil)
		for _, e := range all {
			tr.ObserveFrom(ID{1}, 9, monoSum, e.p, 0)
		}
		if e, ok := tr.Shared(ID{1}); ok && e.Writers >= 2 {
			split++
			if e.Conn {
				t.Errorf("run %d: split by connections with a copy among them: %s", run, e)
			}
		}
	}
	t.Logf("split in %d of 50 runs", split)
	if split < 45 {
		t.Errorf("split in %d of 50 runs", split)
	}
}
