package streams

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestQuietPeer: an undecided writer that sends nothing for three of its
// intervals while the elected writer goes on is a peer (a process that
// ended): its held point is released. Not before, and not a writer whose
// elected writer ended with it (a restart took the stream over).
func TestQuietPeer(t *testing.T) {
	a, b := secs(100), secs(103)
	t.Run("a peer that ended", func(t *testing.T) {
		f := newHeldFixture(t, 1000)
		f.feed(1, monoSum, Point{Start: a, Time: secs(110), Value: 10}, 0)
		for k, v := range []float64{6, 16, 26} { // A's less 4 to 14: undecided
			if d, held := f.feed(1, monoSum, Point{Start: b, Time: secs(111 + 10*float64(k)), Value: v}, 50); !held || d.Class != ClassUndecided {
				t.Fatalf("B's point %d: %v, held %v", k, d, held)
			}
			f.feed(1, monoSum, Point{Start: a, Time: secs(120 + 10*float64(k)), Value: 20 + 10*float64(k)}, 0)
		}
		// B's newest at 131 s, its interval 10 s: quiet from 161 s on.
		for _, tm := range []float64{140, 150, 160} {
			f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm - 100}, 0)
			if got := f.released(); len(got) != 0 {
				t.Fatalf("released %v at %g s, %g s after B's newest", got, tm, tm-131)
			}
		}
		f.feed(1, monoSum, Point{Start: a, Time: secs(170), Value: 70}, 0)
		if got := f.released(); len(got) != 1 || got[1] != 26 {
			t.Fatalf("released %v, want B's newest point (26)", got)
		}
		j, _ := f.tr.Judgement(ID{1}, b)
		if j.Class != ClassPeer || !strings.HasPrefix(j.String(), "peer: it sent nothing for 39s while the elected writer went on (30s waited)") {
			t.Errorf("judgement %v: %s", j.Class, j)
		}
		if s := f.tr.JudgeStats(); s.Quiet != 1 || s.Held[HeldReleased] != 1 {
			t.Errorf("stats %+v, want one quiet peer, its point released", s)
		}
		// If it comes back, it is a peer's own series.
		if d, _ := f.feed(1, monoSum, Point{Start: b, Time: secs(171), Value: 66}, 50); d.Verdict != Label {
			t.Errorf("B back: %v, want labelled", d)
		}
	})
	t.Run("a single point waits QuietOneShot", func(t *testing.T) {
		f := newHeldFixture(t, 1000)
		f.feed(1, monoSum, Point{Start: a, Time: secs(110), Value: 10}, 0)
		f.feed(1, monoSum, Point{Start: b, Time: secs(111), Value: 1}, 50)
		for tm := 120.0; tm < 111+QuietOneShot.Seconds(); tm += 10 {
			f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm}, 0)
			if got := f.released(); len(got) != 0 {
				t.Fatalf("released %v at %g s", got, tm)
			}
		}
		f.feed(1, monoSum, Point{Start: a, Time: secs(111 + QuietOneShot.Seconds()), Value: 1000}, 0)
		if got := f.released(); len(got) != 1 {
			t.Fatalf("released %v, want B's point after %s", got, QuietOneShot)
		}
	})
	t.Run("a copy that ended with its process, then a restart", func(t *testing.T) {
		f := newHeldFixture(t, 1000)
		for k := range 5 {
			tm := 110 + 10*float64(k)
			f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm}, 0)
			f.feed(1, monoSum, Point{Start: b, Time: secs(tm + 1), Value: tm + 1 - 50}, 50)
		}
		// The process ends at 151 s; a new one (start 160 s) goes on. Its
		// first point comes 20 s after A's newest, sooner than A's failover
		// time (30 s): held as a restart (restart.go); at 180 s A is
		// overdue, the new writer is elected, and its held point goes out
		// before the electing one.
		if d, _ := f.feed(1, monoSum, Point{Start: secs(160), Time: secs(170), Value: 10}, 0); d.Verdict != Drop || !d.Restart {
			t.Fatalf("the restart's first point: %v (restart %v), want held", d, d.Restart)
		}
		for k := range 29 {
			tm := 180 + 10*float64(k)
			if d, _ := f.feed(1, monoSum, Point{Start: secs(160), Time: secs(tm), Value: tm - 160}, 0); d.Verdict != Pass {
				t.Fatalf("the restart's point at %g s: %v", tm, d)
			}
			if k == 0 {
				if got := f.restarts(false); !slices.Equal(got, []float64{10}) {
					t.Fatalf("held restart points sent %v, want [10]", got)
				}
			}
			if got := f.released(); len(got) != 0 {
				t.Fatalf("released %v at %g s: the copy ended with its elected writer", got, tm)
			}
		}
		if j, _ := f.tr.Judgement(ID{1}, b); j.Class == ClassPeer {
			t.Fatalf("the copy called a peer: %s", j)
		}
	})
	t.Run("a copy that exports less often than the elected writer", func(t *testing.T) {
		f := newHeldFixture(t, 1000)
		for k := range 200 {
			tm := 110 + 10*float64(k)
			f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm}, 0)
			if k%4 == 3 { // every 40 s, a moment later
				f.feed(1, monoSum, Point{Start: b, Time: secs(tm + 1), Value: tm + 1 - 50}, 50)
			}
			if got := f.released(); len(got) != 0 {
				t.Fatalf("released %v at %g s", got, tm)
			}
		}
		if j, _ := f.tr.Judgement(ID{1}, b); j.Class != ClassCopy {
			t.Fatalf("class %v, want a copy: %s", j.Class, j)
		}
	})
}

// simTracker feeds exports to a Tracker with Auto as the processor does
// (holding what it asks to hold) and keeps, per writer, the newest value
// delivered: passed, labelled or released.
type simTracker struct {
	tr        *Tracker
	delivered map[uint64]float64
	labelled  map[uint64]bool
	decidedAt map[uint64]uint64 // the point time of the writer's first labelled or released point
	lastOwn   map[uint64]uint64
}

func newSimTracker(t testing.TB) *simTracker {
	p := DefaultPolicy()
	p.Auto, p.MaxHeldBytes = true, 1<<20
	tr, err := NewTracker(p)
	if err != nil {
		t.Fatal(err)
	}
	return &simTracker{tr: tr, delivered: map[uint64]float64{}, labelled: map[uint64]bool{}, decidedAt: map[uint64]uint64{}, lastOwn: map[uint64]uint64{}}
}

func (s *simTracker) feed(shape Shape, p Point) {
	d := s.tr.ObserveFrom(ID{1}, 9, shape, p, 0)
	s.lastOwn[p.Start] = p.Time
	switch d.Verdict {
	case Pass:
		s.delivered[p.Start] = p.Value
	case Label:
		s.delivered[p.Start] = p.Value
		if !s.labelled[p.Start] {
			s.labelled[p.Start], s.decidedAt[p.Start] = true, p.Time
		}
	}
	if d.Hold {
		md := pmetric.NewMetrics()
		md.ResourceMetrics().AppendEmpty().Resource().Attributes().PutDouble("value", p.Value)
		s.tr.Hold(ID{1}, d.Writer, md, 10)
	}
	s.tr.TakeReleased(func(_ ID, w uint64, md pmetric.Metrics, _ int) {
		v, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("value")
		s.delivered[w] = v.Double()
		if !s.labelled[w] {
			s.labelled[w], s.decidedAt[w] = true, p.Time
		}
	})
}

func until(pts []simPoint, end float64) []simPoint {
	var out []simPoint
	for _, p := range pts {
		if p.at <= end {
			out = append(out, p)
		}
	}
	return out
}

// TestQuietSimulations: short-lived peers (3.5 s at a 1 s interval, each
// its own process beside a long-lived one) are all delivered whole, the
// quiet rule deciding those the values did not; copies whose process ends
// (then restarts), whatever their interval, are never called peers.
func TestQuietSimulations(t *testing.T) {
	t.Run("peers that live 3.5 s", func(t *testing.T) {
		var after []float64
		byQuiet := 0
		for run := range simRuns {
			r := rand.New(rand.NewPCG(uint64(run), 13))
			se, sp := poisson(r, 10, 0, 60), poisson(r, 10, 0, 60)
			join := 2 + 8*r.Float64()
			e := reader{src: se, join: 0, first: r.Float64(), iv: 1}
			p := reader{src: sp, join: join, first: join + r.Float64(), iv: 1}
			peerPts := until(p.points(60, false), join+3.5)
			s := newSimTracker(t)
			for _, x := range merge(e.points(60, false), peerPts) {
				s.feed(monoSum, x.p)
			}
			last := peerPts[len(peerPts)-1].p
			if got := s.delivered[last.Start]; got != last.Value {
				t.Fatalf("run %d: the peer's count delivered %g, want %g (labelled %v)", run, got, last.Value, s.labelled[last.Start])
			}
			if s.decidedAt[last.Start] > last.Time {
				byQuiet++
				after = append(after, float64(s.decidedAt[last.Start]-last.Time)/1e9)
			}
		}
		m, w := stats(after)
		t.Logf("peers living 3.5 s: %d/%d delivered whole; %d decided by the quiet rule, %.1f s median, %.1f s worst after their last point", simRuns, simRuns, byQuiet, m, w)
	})
	for _, tc := range []struct {
		name      string
		copyIv    float64
		delay     float64 // the copy's exports arrive up to this late
		dropEvery int     // the copy loses every n-th export
	}{
		{name: "same interval", copyIv: 1},
		{name: "copy every 2.5 s", copyIv: 2.5},
		{name: "copy every 0.5 s", copyIv: 0.5},
		{name: "copy arrives late and loses exports", copyIv: 1, delay: 0.45, dropEvery: 4},
	} {
		t.Run("copies that end with their process/"+tc.name, func(t *testing.T) {
			for run := range simRuns {
				r := rand.New(rand.NewPCG(uint64(run), 17))
				src := poisson(r, 10, 0, 120)
				join := 1 + 4*r.Float64()
				end := join + 1 + 40*r.Float64()
				e := reader{src: src, join: 0, first: r.Float64(), iv: 1}
				c := reader{src: src, join: join, first: join + r.Float64()*tc.copyIv, iv: tc.copyIv}
				if tc.dropEvery > 0 {
					c.drop = map[int]bool{}
					for k := tc.dropEvery - 1; k < 200; k += tc.dropEvery {
						c.drop[k] = true
					}
				}
				cp := until(c.points(120, false), end)
				for i := range cp {
					cp[i].at += tc.delay * r.Float64()
				}
				restart := reader{src: poisson(r, 10, end, 120), join: end + 0.5, first: end + 0.5 + r.Float64(), iv: 1}
				all := merge(merge(until(e.points(120, false), end), cp), restart.points(120, false))
				s := newSimTracker(t)
				for _, x := range all {
					s.feed(monoSum, x.p)
				}
				if cs := cp[0].p.Start; s.labelled[cs] {
					j, _ := s.tr.Judgement(ID{1}, cs)
					t.Fatalf("run %d: a copy called a peer: %s", run, j)
				}
			}
		})
	}
}
