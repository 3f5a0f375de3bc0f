package streams

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// deltaSim feeds delta exports to a Tracker with Auto as the processor
// does: it holds what it is asked to hold, adding each held delta to the
// writer's held point (the processor merges them), and counts what is
// delivered: passed, labelled, released.
type deltaSim struct {
	tr        *Tracker
	delivered float64
	held      map[uint64]float64
	labels    map[uint64]bool
	// passed is the newest time passed unlabelled; stepBack counts the
	// points passed unlabelled at or before it (the output's times
	// stepping back).
	passed, stepBack uint64
}

func newDeltaSim(t testing.TB) *deltaSim {
	p := DefaultPolicy()
	p.Auto, p.MaxHeldBytes = true, 1<<20
	tr, err := NewTracker(p)
	if err != nil {
		t.Fatal(err)
	}
	return &deltaSim{tr: tr, held: map[uint64]float64{}, labels: map[uint64]bool{}}
}

func (s *deltaSim) feed(shape Shape, p Point) Decision {
	d := s.tr.ObserveFrom(ID{1}, 9, shape, p, 0)
	switch d.Verdict {
	case Pass:
		s.delivered += p.Value
		if p.Time <= s.passed {
			s.stepBack++
		}
		s.passed = max(s.passed, p.Time)
	case Label:
		s.delivered += p.Value
		s.labels[d.Writer] = true
	}
	if d.Hold {
		s.held[d.Writer] += p.Value
		md := pmetric.NewMetrics()
		s.tr.Hold(ID{1}, d.Writer, md, 10)
	}
	s.tr.TakeReleased(func(_ ID, w uint64, _ pmetric.Metrics, _ int) {
		s.delivered += s.held[w]
		delete(s.held, w)
	})
	// A copy's held deltas are dropped by TakeReleased: forget them here.
	for w := range s.held {
		if j, ok := s.tr.Judgement(ID{1}, w); ok && j.Class == ClassCopy {
			delete(s.held, w)
		}
	}
	return d
}

// deltaChain is a delta chain from start: one interval of step seconds
// per value.
func deltaChain(start, step float64, values ...float64) []Point {
	pts := make([]Point, len(values))
	for k, v := range values {
		from := start + step*float64(k)
		pts[k] = pt{start: from, time: from + step, value: v}.point()
	}
	return pts
}

func (s *deltaSim) stillHeld() (n float64) {
	for _, v := range s.held {
		n += v
	}
	return n
}

// TestDeltaAuto: golden cases of delta chains under Auto.
func TestDeltaAuto(t *testing.T) {
	// labelled130: an elected chain's only point (111.5, 120], then a
	// second chain of run start 130, a second writer (it starts less than
	// its own interval after that point), undecided until the quiet rule
	// labels it: the elected chain sent nothing for the failover time after
	// it was due to send this chain's first counted measurements, and this
	// chain counted measurements no fewer than QuietSparsePoints of the
	// elected chain's intervals would have held (every other point of this
	// chain, whose 31.75 s intervals, the stream's, straddle them); then
	// extra.
	labelled130 := func(extra ...pt) []pt {
		steps := []pt{{start: 111.5, time: 120, value: 48, want: "pass"}, {start: 130, time: 153.25, value: 48, want: "drop overlap", writer: 130}}
		for start := 153.25; start < 439; start += 31.75 {
			steps = append(steps, pt{start: start, time: start + 31.75, value: 48, want: "drop overlap", writer: 130})
		}
		steps = append(steps, pt{start: 439, time: 470.75, value: 48, want: "label overlap", writer: 130})
		return append(steps, extra...)
	}
	for _, tc := range []struct {
		name   string
		policy func(*Policy)
		steps  []pt
	}{
		{name: "a second chain is held undecided, labelled once a peer", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 113, time: 118, value: 5, want: "drop overlap", writer: 113},
			{start: 120, time: 130, value: 10, want: "pass"}, // the pair's running totals of the first chain start here
			{start: 118, time: 128, value: 30, want: "drop overlap", writer: 113},
			{start: 130, time: 140, value: 10, want: "pass"},
			{start: 128, time: 138, value: 1, want: "drop overlap", writer: 113}, // c ≤ 36 − 10, c ≥ 35 − 10
			{start: 140, time: 150, value: 10, want: "pass"},
			// 66 at 148: c ≥ 66 − 30 at 150 > 26: it counted 30 over
			// (138, 148], the first writer 20 over (130, 150].
			{start: 138, time: 148, value: 30, want: "label overlap", writer: 113},
			{start: 138, time: 148, value: 30, want: "drop duplicate", writer: 113},
			{start: 150, time: 160, value: 10, want: "pass"},
		}},
		{name: "a chain starting after the elected one's newest point, before its next is due, is a second writer", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 123, time: 126, value: 3, want: "drop overlap", writer: 123},
			{start: 120, time: 130, value: 10, want: "pass"},
		}},
		{name: "a restart (the elected chain's interval unknown: one of its own later) is elected; the old chain going on takes the stream back", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 114, time: 118, value: 3, want: "pass elect:restart"},
			{start: 110, time: 120, value: 10, want: "pass elect:earlier_start", writer: 100},
			{start: 118, time: 125, value: 9, want: "drop overlap", writer: 114},
		}},
		{name: "a chain starting less than its own interval after the elected chain's only point is a second writer", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 111, time: 115, value: 3, want: "drop overlap", writer: 111},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 115, time: 125, value: 9, want: "drop overlap", writer: 111},
		}},
		{name: "an interval ending by the run start of the stream's only point is a second writer's", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 95, time: 99, value: 3, want: "drop overlap", writer: 95},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 99, time: 109, value: 9, want: "drop overlap", writer: 95},
		}},
		{name: "a second chain ending with the elected one and counting alike sends the same point: its own, not a repeat", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 103, time: 110, value: 5, want: "drop overlap", writer: 103},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "drop overlap", writer: 103},
			{start: 110, time: 120, value: 10, want: "drop duplicate", writer: 100}, // a repeat of both
			{start: 120, time: 130, value: 10, want: "pass"},
			{start: 120, time: 131, value: 9, want: "drop overlap", writer: 103},
		}},
		{name: "two second chains ending together and counting alike send the same point: the second is the other chain's, not a repeat", steps: []pt{
			{start: 100, time: 112, value: 10, want: "pass"},
			{start: 103, time: 110, value: 5, want: "drop overlap", writer: 103},
			{start: 104, time: 110, value: 6, want: "drop overlap", writer: 104},
			{start: 112, time: 124, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "drop overlap", writer: 104},
			{start: 110, time: 120, value: 10, want: "drop overlap", writer: 103},   // before, a repeat of 104's: 103 broken, its counts lost
			{start: 110, time: 120, value: 10, want: "drop duplicate", writer: 104}, // a repeat of both
			{start: 120, time: 130, value: 9, want: "drop overlap", writer: 104},
			{start: 120, time: 131, value: 9, want: "drop overlap", writer: 103},
		}},
		{name: "the same point on the connection of the chain it repeats, not of the one it would continue, is a retry", steps: []pt{
			{start: 100, time: 112, value: 10, want: "pass", conn: 1},
			{start: 103, time: 110, value: 5, want: "drop overlap", writer: 103, conn: 3},
			{start: 104, time: 110, value: 6, want: "drop overlap", writer: 104, conn: 4},
			{start: 112, time: 124, value: 10, want: "pass", conn: 1},
			{start: 110, time: 120, value: 10, want: "drop overlap", writer: 104, conn: 4},
			{start: 110, time: 120, value: 10, want: "drop duplicate", writer: 104, conn: 4}, // 104's retry: 103's point would be counted beside it
			{start: 110, time: 120, value: 7, want: "drop overlap", writer: 103, conn: 3},
			{start: 110, time: 120, value: 7, want: "drop duplicate", writer: 103, conn: 5}, // unknown to either: a repeat of both
			{start: 120, time: 130, value: 9, want: "drop overlap", writer: 104, conn: 4},
			{start: 120, time: 130, value: 9, want: "drop overlap", writer: 103, conn: 6}, // 104's point on a connection neither chain's: 103's
		}},
		{name: "an interval starting before the stream's first run, late, is a second writer's", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 98, time: 109, value: 3, want: "drop overlap", writer: 98},
			{start: 109, time: 119, value: 9, want: "drop overlap", writer: 98},
			{start: 100, time: 105, value: 9, want: "drop out_of_order", writer: 100}, // within that chain
		}},
		{name: "a later writer's first interval, late, within the elected run: a chain, pooled once it goes on", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 120, time: 130, value: 10, want: "pass"},
			{start: 105, time: 113, value: 3, want: "drop overlap", writer: 105},
			{start: 113, time: 123, value: 9, want: "drop overlap", writer: 105},
			{start: 110, time: 120, value: 10, want: "drop out_of_order", writer: 100}, // at the newest interval's bound
		}},
		{name: "the elected chain's old points resent: a chain of their own, dropped, held", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 120, time: 130, value: 10, want: "pass"},
			{start: 130, time: 140, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "drop overlap", writer: 110},
			{start: 120, time: 130, value: 10, want: "drop overlap", writer: 110},
			{start: 140, time: 150, value: 10, want: "pass"},
		}},
		{name: "after a restart, an interval before the run start may be the earlier run's: out of order", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 153, time: 163, value: 10, want: "pass elect:restart"},
			{start: 140, time: 145, value: 3, want: "drop out_of_order"},
		}},
		{name: "two second chains that share a run start are two chains", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 103, time: 112, value: 3, want: "drop overlap", writer: 103},
			{start: 103, time: 111, value: 4, want: "drop overlap", writer: 103.000000001},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 112, time: 122, value: 9, want: "drop overlap", writer: 103},
			{start: 111, time: 121, value: 9, want: "drop overlap", writer: 103.000000001},
			{start: 103, time: 111, value: 4, want: "drop out_of_order", writer: 103}, // its first point again
		}},
		{name: "a second chain whose run start is the elected chain's is named one nanosecond later", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 100, time: 112, value: 3, want: "drop overlap", writer: 100.000000001},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 112, time: 122, value: 9, want: "drop overlap", writer: 100.000000001},
		}},
		{name: "a point with a labelled chain's run start is that chain's or another of that run start, never a restart under its name", policy: func(p *Policy) { p.FailoverAfter = 20 * time.Second }, steps: labelled130(
			// Starts after the elected chain's only point, sooner than its
			// own interval: not elected as a restart named 130, the
			// labelled writer's name, but an old point of chain 130's
			// first interval (which has sent more than one point: with
			// one, it would be a second chain of run start 130, below).
			pt{start: 130, time: 130.25, value: 48, want: "drop out_of_order", writer: 130},
			pt{start: 470.75, time: 475.75, value: 48, want: "label overlap", writer: 130},
		)},
		{name: "a point with the run start of a chain that has sent one point is another chain of that run start", policy: func(p *Policy) { p.FailoverAfter = 20 * time.Second }, steps: []pt{
			{start: 111.5, time: 120, value: 48, want: "pass"},
			{start: 130, time: 153.25, value: 48, want: "drop overlap", writer: 130},
			{start: 130, time: 130.25, value: 48, want: "drop overlap", writer: 130.000000001},
		}},
		{name: "with no room for another chain, a point with a labelled chain's run start is dropped as that chain's, not elected under its name", policy: func(p *Policy) { p.FailoverAfter, p.MaxJudged = 20*time.Second, 1 }, steps: labelled130(
			pt{start: 130, time: 130.25, value: 48, want: "drop out_of_order", writer: 130},
		)},
		{name: "a gap off the chain's timer is a restart, as without auto", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 153, time: 163, value: 10, want: "pass elect:restart"},
			{start: 163, time: 173, value: 10, want: "pass"},
		}},
		{name: "a gap of whole intervals on the chain's timer: the chain goes on (intervals without measurements)", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 150.02, time: 160.02, value: 10, want: "pass"},
			{start: 160.02, time: 170.02, value: 10, want: "pass"},
		}},
		{name: "a second chain's gap on its timer: the same chain, its name and its label", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 104, time: 114, value: 20, want: "drop overlap", writer: 104},
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 120, time: 130, value: 10, want: "pass"},
			{start: 134, time: 144, value: 3, want: "drop overlap", writer: 104},
			{start: 130, time: 140, value: 10, want: "pass"},
			{start: 144, time: 154, value: 9, want: "drop overlap", writer: 104},
		}},
		{name: "a second chain's first interval shorter than its timer's: the stream's interval places its gap", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 104.5, time: 114, value: 20, want: "drop overlap", writer: 104.5}, // from its first measurement, not a tick
			{start: 110, time: 120, value: 10, want: "pass"},
			{start: 124, time: 134, value: 3, want: "drop overlap", writer: 104.5}, // 114 + 10, not 114 + 9.5
		}},
		{name: "the elected chain's first interval shorter than its timer's: a second chain's interval places its gap", steps: []pt{
			{start: 100.5, time: 110, value: 10, want: "pass"},
			{start: 104, time: 114, value: 20, want: "drop overlap", writer: 104},
			{start: 114, time: 124, value: 20, want: "drop overlap", writer: 104},
			{start: 120, time: 130, value: 10, want: "pass"}, // 110 + 10: the elected chain goes on, no restart
		}},
		{name: "a start on two chains' timers goes on from neither", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 100.01, time: 110.01, value: 20, want: "drop overlap", writer: 100.01},
			{start: 130, time: 140, value: 3, want: "pass elect:restart"},
		}},
		{name: "the interval a chain went on across, late: the chain's, labelled by its own start when the elected chain's", steps: []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 120, time: 130, value: 10, want: "pass"},
			{start: 110, time: 120, value: 10, want: "label", writer: 110},
			{start: 110, time: 120, value: 10, want: "drop out_of_order"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, autoTracker(t, tc.policy), deltaSum, tc.steps) })
	}
}

// TestDeltaAutoTruth: the cases through the Tracker, delta
// temporality, the truth being every measurement: one reader; a second
// reader joining 2.5 s into a 6 s run (a copy); 2 and 4 processes sharing
// one identity, the later ones joining 2.5 s in, each counting its own.
// What is delivered (passed, labelled, released) plus what is still held
// (undecided when every writer stopped) equals the truth; the share held
// at the end is logged, with how long the peers took.
func TestDeltaAutoTruth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		copy    bool
		until   float64
	}{
		{name: "one reader", workers: 1, until: 6},
		{name: "a second reader joins", workers: 1, copy: true, until: 6},
		{name: "2 workers", workers: 2, until: 6},
		{name: "4 workers", workers: 4, until: 6},
		{name: "4 workers/15 s", workers: 4, until: 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var heldShare []float64
			undecidedRuns := 0
			for run := range simRuns {
				r := rand.New(rand.NewPCG(uint64(run), 23))
				var pts []simPoint
				truth := 0.0
				for w := range tc.workers {
					join := 0.0
					if w > 0 {
						join = 2.5 + 0.011*float64(w)
					}
					src := poisson(r, 10, join, tc.until)
					e := reader{src: src, join: join, first: join + r.Float64(), iv: 1}
					ds := e.deltas(tc.until, false)
					for _, d := range ds {
						truth += d.p.Value // what the process exported
					}
					pts = merge(pts, ds)
					if tc.copy {
						c := reader{src: src, join: 2.5, first: 2.5 + r.Float64(), iv: 1}
						pts = merge(pts, c.deltas(tc.until, false))
					}
				}
				s := newDeltaSim(t)
				for _, x := range pts {
					s.feed(deltaSum, x.p)
				}
				got, held := s.delivered, s.stillHeld()
				if tc.copy {
					held = 0 // a copy's held deltas are the first reader's: never sent
				}
				if got+held != truth || got > truth {
					t.Fatalf("run %d: delivered %g and held %g, truth %g", run, got, held, truth)
				}
				if held > 0 {
					undecidedRuns++
				}
				heldShare = append(heldShare, held/truth)
			}
			m, w := stats(heldShare)
			t.Logf("%s: delivered + held = truth in %d/%d runs; still held at the end (undecided) in %d runs, share of the truth median %.2f, worst %.2f", tc.name, simRuns, simRuns, undecidedRuns, m, w)
		})
	}
}

// TestDeltaAutoLateFirstInterval: a peer's first interval arrives after
// its second (an export that waited, for its connection or a busy
// process, while the next went on: the JS SDK's first export on a loaded
// machine). Its run start names a chain of one point that nothing would
// decide: it is pooled with the writer of the chain it precedes, decided
// with it, and its counts are delivered (before, its held point expired
// and its counts were lost: 595 of 600 in an end-to-end run of 4 JS
// processes).
func TestDeltaAutoLateFirstInterval(t *testing.T) {
	a := func(k float64) Point { return pt{start: 100 + 10*k, time: 110 + 10*k, value: 10}.point() }
	first := pt{start: 113, time: 118, value: 5}.point()
	b := deltaChain(118, 10, 30, 1, 30, 30)
	for _, late := range []int{1, 4} { // b's points before its first interval arrives
		s := newDeltaSim(t)
		truth := first.Value
		var firstDecision Decision
		for k := range 6 {
			s.feed(deltaSum, a(float64(k)))
			truth += 10
			if k >= 1 && k-1 < len(b) {
				s.feed(deltaSum, b[k-1])
				truth += b[k-1].Value
				if k == late {
					firstDecision = s.feed(deltaSum, first)
				}
			}
		}
		want := map[int]string{1: "drop overlap", 4: "label overlap"}[late]
		if firstDecision.String() != want || firstDecision.Writer != secs(113) {
			t.Errorf("first interval after %d later ones: %v writer %d, want %s", late, firstDecision, firstDecision.Writer, want)
		}
		if s.delivered != truth || s.stillHeld() != 0 {
			t.Errorf("first interval after %d later ones: delivered %g, held %g, want the truth %g", late, s.delivered, s.stillHeld(), truth)
		}
		if j, ok := s.tr.Judgement(ID{1}, secs(113)); !ok || s.tr.judge.classOf(s.tr.judge.byKey[pairKey{ID{1}, secs(113)}]) != ClassPeer {
			t.Errorf("first interval after %d later ones: %+v", late, j)
		}
	}
}

// TestDeltaAutoAnchorContinued: one export's points are one writer's.
// Process X's first histogram interval carried the run start of the
// elected chain (JS SDKs stamp each instrument's start in milliseconds:
// another process's can be the same), so it was left to the delta rules
// and X's histogram chain is named by its second interval's start; its
// counter chain, which counts alike with the elected one's, is decided
// with that histogram chain only if the two are pooled: the chain
// continued in X's ScopeMetrics anchors the new one met after it. Before,
// X's counter chain was judged on its own: here, counting exactly alike,
// a copy (its counts dropped); in a run of 4 JS processes, replayed,
// undecided to the end (457 of 600 delivered, 600 now).
func TestDeltaAutoAnchorContinued(t *testing.T) {
	tr, err := NewTracker(func() Policy { p := DefaultPolicy(); p.Auto, p.MaxHeldBytes = true, 1<<20; return p }())
	if err != nil {
		t.Fatal(err)
	}
	counter, hist := ID{1}, ID{2}
	delivered, truth, held := 0.0, 0.0, map[uint64]float64{}
	feed := func(id ID, p Point, x bool) {
		d := tr.ObserveFrom(id, 9, deltaSum, p, int64(p.Time))
		if id != counter {
			return
		}
		if x {
			truth += p.Value
		}
		if x && d.Verdict != Drop {
			delivered += p.Value
		}
		if d.Hold {
			held[d.Writer] += p.Value
			tr.Hold(id, d.Writer, pmetric.NewMetrics(), 10)
		}
	}
	release := func() {
		tr.TakeReleased(func(id ID, w uint64, _ pmetric.Metrics, _ int) {
			if id == counter {
				delivered += held[w]
				delete(held, w)
			}
		})
	}
	for i := range 30 {
		k := float64(i)
		y := func(v float64) Point {
			return pt{start: 100 + 10*k, time: 110 + 10*k, value: v}.point()
		}
		tr.NewScope(0)
		feed(counter, y(10), false)
		feed(hist, y(10), false)
		release()
		xStart := 105 + 10*k
		if k == 0 {
			xStart = 101 // the counter's first interval; the histogram's starts at 100, the elected chain's start
		}
		tr.NewScope(0)
		feed(counter, pt{start: xStart, time: 115 + 10*k, value: 10}.point(), true)
		if k == 0 {
			xStart = 100
		}
		feed(hist, pt{start: xStart, time: 115 + 10*k, value: 30}.point(), true)
		release()
	}
	if delivered != truth || len(held) != 0 {
		t.Errorf("X's counter: delivered %g, held %v, want the truth %g", delivered, held, truth)
	}
	if j, ok := tr.Judgement(counter, secs(101)); !ok || tr.judge.classOf(tr.judge.byKey[pairKey{counter, secs(101)}]) != ClassPeer {
		t.Errorf("X's counter chain: %+v", j)
	}
}

// TestDeltaAutoQuietAfterBreak: the elected chain of a process read twice
// breaks (an export lost or late on a loaded machine) and its reader goes
// on as a new chain, started before the elected chain's next point was
// due (a second chain, not a restart). The elected chain is quiet then,
// but its writer is not: the copy is not a peer (a copy called a peer
// counts every measurement twice: 287 of 150 in an end-to-end run of the
// JS SDK). The reader's new chain, whose elected chain went quiet with
// nothing started since, is decided a peer by the quiet rule and
// delivered, so the total is the first reader's.
func TestDeltaAutoQuietAfterBreak(t *testing.T) {
	s := newDeltaSim(t)
	truth := 0.0
	a := func(from, to float64) {
		s.feed(deltaSum, pt{start: from, time: to, value: 10 * (to - from)}.point())
		truth += 10 * (to - from)
	}
	b := func(from, to float64) Decision {
		return s.feed(deltaSum, pt{start: from, time: to, value: 10 * (to - from)}.point())
	}
	for i := range 5 {
		k := float64(i)
		a(100+k, 101+k)
		if k >= 2 {
			b(100.5+k, 101.5+k)
		}
	}
	// 105 to 106 is lost; the reader's next interval starts at 105.95.
	// Its chain straddles the elected chain's intervals: two of its points
	// to each interval of the elected chain's a copy's first reader would
	// have lost, so twice QuietSparsePoints of them to be a peer.
	for i := range 2*QuietSparsePoints + 2 {
		k := float64(i)
		a(105.95+k, 106.95+k)
		if d := b(105.5+k, 106.5+k); d.Class == ClassPeer {
			t.Fatalf("the copy at %g s: %v", 106.5+k, d)
		}
	}
	if s.delivered != truth {
		t.Errorf("delivered %g, held %g; the first reader exported %g", s.delivered, s.stillHeld(), truth)
	}
}

// TestDeltaAutoResentOld: the elected chain's old points resent (a
// sender retrying a request that was delivered) are not counted again:
// before any other chain they make a late chain of their own (deltaAuto),
// dropped and held, never released, while a peer that joins later is
// delivered in full; within a known chain's span, they are out of order.
func TestDeltaAutoResentOld(t *testing.T) {
	s := newDeltaSim(t)
	truth := 0.0
	for i := range 20 {
		k := float64(i)
		s.feed(deltaSum, pt{start: 100 + 10*k, time: 110 + 10*k, value: 10}.point())
		truth += 10
		if i >= 7 {
			v := []float64{30, 1, 30, 30}[i%4]
			s.feed(deltaSum, pt{start: 95 + 10*k, time: 105 + 10*k, value: v}.point())
			truth += v
		}
		if i == 5 || i == 6 || i == 15 { // old points of the elected chain, resent
			s.feed(deltaSum, pt{start: 100 + 10*(k-4), time: 110 + 10*(k-4), value: 10}.point())
		}
	}
	if s.delivered != truth {
		t.Errorf("delivered %g, want the truth %g (held %g)", s.delivered, truth, s.stillHeld())
	}
	if s.stillHeld() != 20 {
		t.Errorf("held %g, want the 20 resent before the peer joined", s.stillHeld())
	}
}

// TestDeltaAutoNextBeforeItsPredecessor: a writer's next interval arrives
// before the one it follows. At a process's shutdown the Go SDK cancels
// its periodic export (already on the wire, it arrives) and sends a final
// one, a moment later, on another stream of the connection: the gateway
// may receive the final one first. Its run start is the end of an interval
// not seen yet: a new chain, undecided, its counts held; when the
// interval it follows arrives, nothing goes on from it (the process has
// ended), and its counts were lost at the gateway's shutdown (599 of 600
// in a CI run of TestDefaultDeltaWriters/go/4_workers; every such
// reordering of 14 kept runs' last exports, replayed, lost 1 to 25). It
// is the writer's own chain: decided with the chain it continues, its
// counts delivered; a copy's continuation is a copy's (dropped).
func TestDeltaAutoNextBeforeItsPredecessor(t *testing.T) {
	a := func(k float64) Point { return pt{start: 100 + 10*k, time: 110 + 10*k, value: 10}.point() }
	aFinal := pt{start: 140, time: 140.5, value: 1}.point()
	peer := deltaChain(105, 10, 30, 1, 30, 30)
	peerFinal := pt{start: 145, time: 145.5, value: 2}.point()
	// A copy: a second reader of a's process, its intervals covered by
	// a's, counting a's measurements (10 per 10 s, evenly).
	cp := append(deltaChain(105, 10, 10, 10, 10), pt{start: 135, time: 139, value: 4}.point())
	cpFinal := pt{start: 139, time: 140.2, value: 1}.point()
	for _, tc := range []struct {
		name  string
		order []Point
		truth float64
	}{
		{"a peer's final export first", []Point{a(0), peer[0], a(1), peer[1], a(2), peer[2], a(3), peerFinal, peer[3], aFinal}, 40 + 1 + 91 + 2},
		{"the elected writer's final export first", []Point{a(0), peer[0], a(1), peer[1], a(2), peer[2], aFinal, a(3), peer[3], peerFinal}, 40 + 1 + 91 + 2},
		{"a copy's final export first", []Point{a(0), cp[0], a(1), cp[1], a(2), cp[2], a(3), cpFinal, cp[3], aFinal}, 40 + 1},
	} {
		copyCase := tc.truth == 41
		t.Run(tc.name, func(t *testing.T) {
			s := newDeltaSim(t)
			for _, p := range tc.order {
				s.feed(deltaSum, p)
			}
			if copyCase {
				// The copy's chain, undecided, holds its counts (never
				// delivered: they are a's); its final interval is judged
				// with it.
				jd := s.tr.judge
				if s.delivered != tc.truth || jd.classOf(jd.byKey[pairKey{ID{1}, secs(139)}]) != jd.classOf(jd.byKey[pairKey{ID{1}, secs(105)}]) {
					t.Errorf("delivered %g, want %g; the final interval's class %v, the copy's %v", s.delivered, tc.truth,
						jd.classOf(jd.byKey[pairKey{ID{1}, secs(139)}]), jd.classOf(jd.byKey[pairKey{ID{1}, secs(105)}]))
				}
			} else if s.delivered != tc.truth || s.stillHeld() != 0 {
				t.Errorf("delivered %g, held %g, want the truth %g and nothing held", s.delivered, s.stillHeld(), tc.truth)
			}
			if s.stepBack != 0 {
				// The overtaken interval goes out labelled, as its own
				// series: the stream's own times never step back.
				t.Errorf("%d points passed unlabelled older than one passed before", s.stepBack)
			}
			if c := s.tr.JudgeStats().Continued; c != 1 {
				t.Errorf("continued %d, want 1", c)
			}
		})
	}
}

// TestDeltaAutoSparseWriters: writers that export no delta point for an
// interval without measurements (the Python and Go SDKs), their next
// point starting where the empty interval ended, whole intervals after
// their newest point: gunicorn workers that serve what the kernel hands
// them. Through the Tracker, 200 seeded runs per case, exports every
// second in random phases, the truth being what the processes exported.
// Peers (one identity, each counting its own events) are delivered in
// full or held, undecided, never doubled; a copy (a second reader of one
// sparse process, joined 2.5 s in) is never labelled a peer, not when
// either reader loses exports (the gap a lost export leaves looks the
// same as an empty interval's), and none of its points is delivered but
// those a misjudged restart passes: a copy whose point starts after the
// first reader's newest point, and after its next was due, is elected as
// a restart until the first reader goes on (docs/metrics.md, "Delta
// writers"; counted, not asserted). docs/metrics.md has the figures the
// log lines give.
func TestDeltaAutoSparseWriters(t *testing.T) {
	sparse := func(pts []simPoint) []simPoint {
		out := pts[:0]
		for _, x := range pts {
			if x.p.Value > 0 {
				out = append(out, x)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		workers int
		rate    float64
		copy    bool
		lose    float64 // the share of exports lost
		until   float64
		// exports: each export also carries a point of another stream
		// (an up-down counter's, which every export has): an interval
		// without measurements is known empty when its export arrived
		// (exports.go); a lost export loses both.
		exports bool
	}{
		{name: "4 workers, 1.5 events/s each, 20 s", workers: 4, rate: 1.5, until: 20},
		{name: "4 workers, 0.5 events/s each, 20 s", workers: 4, rate: 0.5, until: 20},
		{name: "2 workers, 1.5 events/s each, 20 s", workers: 2, rate: 1.5, until: 20},
		{name: "a sparse reader and a copy, 1.5 events/s, 20 s", workers: 1, rate: 1.5, copy: true, until: 20},
		{name: "a sparse reader and a copy, 1.5 events/s, a fifth of the exports lost (never two in a row)", workers: 1, rate: 1.5, copy: true, lose: 0.2, until: 20},
		{name: "a sparse reader and a copy, 0.5 events/s, 30 s, 3 in 10 exports lost (never two in a row)", workers: 1, rate: 0.5, copy: true, lose: 0.3, until: 30},
		{name: "4 workers, 1.5 events/s each, 20 s, exports seen", workers: 4, rate: 1.5, until: 20, exports: true},
		{name: "4 workers, 0.5 events/s each, 20 s, exports seen", workers: 4, rate: 0.5, until: 20, exports: true},
		{name: "2 workers, 1.5 events/s each, 20 s, exports seen", workers: 2, rate: 1.5, until: 20, exports: true},
		{name: "4 workers, 1.5 events/s each, 20 s, exports seen, a tenth lost", workers: 4, rate: 1.5, until: 20, exports: true, lose: 0.1},
		{name: "a sparse reader and a copy, 1.5 events/s, 20 s, exports seen", workers: 1, rate: 1.5, copy: true, until: 20, exports: true},
		{name: "a sparse reader and a copy, 1.5 events/s, a fifth of the exports lost (never two in a row), exports seen", workers: 1, rate: 1.5, copy: true, lose: 0.2, until: 20, exports: true},
		{name: "a sparse reader and a copy, 0.5 events/s, 30 s, 3 in 10 exports lost (never two in a row), exports seen", workers: 1, rate: 0.5, copy: true, lose: 0.3, until: 30, exports: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			truthRuns, restartRuns := 0, 0
			var heldShare, passedShare []float64
			for run := range simRuns {
				r := rand.New(rand.NewPCG(uint64(run), 41))
				var pts []simPoint
				truth := 0.0
				lost := func() map[int]bool { // never two in a row, as FuzzPairCopyNeverPeer's quietCopy
					m := map[int]bool{}
					for k := range int(tc.until) + 1 {
						if r.Float64() < tc.lose && !m[k-1] {
							m[k] = true
						}
					}
					return m
				}
				copies := map[[2]uint64]bool{}
				// companions: an export's point of another stream (its
				// reader's up-down counter, cumulative, started with the
				// reader: Value is the reader, +1), sent with it, empty
				// or not.
				companions := func(w int, all []simPoint) []simPoint {
					if !tc.exports {
						return nil
					}
					out := make([]simPoint, len(all))
					for k, x := range all {
						out[k] = simPoint{at: x.at, p: Point{Start: secs(1) + uint64(w)*uint64(time.Millisecond), Time: x.p.Time, Value: float64(w + 1), NoValue: true}}
					}
					return out
				}
				for w := range tc.workers {
					join := 0.011 * float64(w)
					src := poisson(r, tc.rate, join, tc.until)
					e := reader{src: src, join: join, first: join + r.Float64(), iv: 1, drop: lost()}
					all := e.deltas(tc.until, false)
					ds := sparse(slices.Clone(all))
					for _, d := range ds {
						truth += d.p.Value
					}
					pts = merge(merge(pts, companions(2*w, all)), ds)
					if tc.copy {
						c := reader{src: src, join: 2.5, first: 2.5 + r.Float64(), iv: 1, drop: lost()}
						all := c.deltas(tc.until, false)
						cs := sparse(slices.Clone(all))
						for _, x := range cs {
							copies[[2]uint64{x.p.Start, x.p.Time}] = true
						}
						pts = merge(merge(pts, companions(2*w+1, all)), cs)
					}
				}
				s := newDeltaSim(t)
				copyPassed := 0.0
				for _, x := range pts {
					if tc.exports {
						s.tr.NewScope(7) // one identity; each point its own export's
					}
					if x.p.NoValue {
						s.tr.ObserveFrom(ID{2, byte(x.p.Value)}, 9, upDown, Point{Start: x.p.Start, Time: x.p.Time, Value: 1}, 0)
						continue
					}
					d := s.feed(deltaSum, x.p)
					if copies[[2]uint64{x.p.Start, x.p.Time}] {
						switch d.Verdict {
						case Label:
							t.Fatalf("run %d: a copy's point labelled, a peer: %v", run, d)
						case Pass:
							copyPassed += x.p.Value
						}
					}
				}
				got, held := s.delivered, s.stillHeld()
				if tc.copy {
					held = 0 // a copy's held deltas are the first reader's: never sent
				}
				if got-copyPassed > truth || !tc.copy && got+held != truth {
					t.Fatalf("run %d: delivered %g (%g of them a copy's, passed) and held %g, truth %g", run, got, copyPassed, held, truth)
				}
				if got == truth {
					truthRuns++
				}
				if got > truth {
					restartRuns++
					passedShare = append(passedShare, (got-truth)/truth)
				}
				heldShare = append(heldShare, max(truth-got, 0)/truth)
			}
			m, w := stats(heldShare)
			t.Logf("%s: the truth delivered in %d of %d runs; short (held, undecided) median %.2f, worst %.2f of the truth", tc.name, truthRuns, simRuns, m, w)
			if tc.copy {
				m, w := stats(passedShare)
				t.Logf("%s: more than the truth in %d of %d runs, a copy's points passed by a misjudged restart (median %.2f, worst %.2f of the truth over)", tc.name, restartRuns, simRuns, m, w)
			}
		})
	}
}
