package streams

import (
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// heldFixture is a Tracker with Auto and room for maxHeld bytes of held
// points, a stream id with writer A (start 100 s) elected, and a helper
// that feeds a point and holds it when asked.
type heldFixture struct {
	t   *testing.T
	tr  *Tracker
	now int64 // the caller's clock
}

func newHeldFixture(t *testing.T, maxHeld int) *heldFixture {
	t.Helper()
	p := DefaultPolicy()
	p.Auto, p.MaxHeldBytes = true, maxHeld
	tr, err := NewTracker(p)
	if err != nil {
		t.Fatal(err)
	}
	return &heldFixture{t: t, tr: tr}
}

// feed observes a point of stream id (origin 9) and holds it (size bytes)
// when the decision asks for that; it returns the decision and whether it
// was held.
func (f *heldFixture) feed(id byte, shape Shape, pt Point, size int) (Decision, bool) {
	d := f.tr.ObserveFrom(ID{id}, 9, shape, pt, f.now)
	if !d.Hold {
		return d, false
	}
	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().Resource().Attributes().PutDouble("value", pt.Value)
	if d.Restart {
		r := pmetric.NewMetrics()
		md.CopyTo(r)
		f.tr.HoldRestart(ID{id}, d.Writer, r, size)
	}
	return d, f.tr.Hold(ID{id}, d.Writer, md, size)
}

// restarts takes the points of held restarts to send (all: every one still
// pending, as at shutdown), their values in order.
func (f *heldFixture) restarts(all bool) []float64 {
	var out []float64
	f.tr.TakeRestarts(f.now, all, func(md pmetric.Metrics, _ int, _ bool) {
		v, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("value")
		out = append(out, v.Double())
	})
	return out
}

// released takes the released points: stream id and value each.
func (f *heldFixture) released() map[byte]float64 {
	out := map[byte]float64{}
	f.tr.TakeReleased(func(id ID, _ uint64, md pmetric.Metrics, _ int) {
		v, _ := md.ResourceMetrics().At(0).Resource().Attributes().Get("value")
		out[id[0]] = v.Double()
	})
	return out
}

func (f *heldFixture) check() {
	f.t.Helper()
	if err := f.tr.judge.checkHeld(); err != nil {
		f.t.Fatal(err)
	}
}

// TestHeldReleasedAfterTheLastPoint: a writer's newest dropped point per
// stream is held while it is undecided, replaced by its newer ones, and
// handed back when the elected writer's next point decides it a peer,
// pooled over its streams.
func TestHeldReleasedAfterTheLastPoint(t *testing.T) {
	f := newHeldFixture(t, 1000)
	a, b := secs(100), secs(100.002)
	f.feed(1, monoSum, Point{Start: a, Time: secs(110), Value: 10}, 0)
	f.feed(2, histogram, Point{Start: a, Time: secs(110), Value: 10, Sum: 20, HasSum: true, Min: 1, Max: 5, HasMinMax: true}, 0)
	for i, v := range []float64{3, 6} {
		tm := secs(111 + float64(i)*4)
		if d, held := f.feed(1, monoSum, Point{Start: b, Time: tm, Value: v}, 100); d.Verdict != Drop || !held {
			t.Fatalf("point %d of B: %v, held %v; want a held drop", i, d, held)
		}
		if d, held := f.feed(2, histogram, Point{Start: b, Time: tm, Value: v, Sum: 2 * v, HasSum: true, Min: 1, Max: 6, HasMinMax: true}, 100); d.Verdict != Drop || !held {
			t.Fatalf("point %d of B's histogram: %v, held %v; want a held drop", i, d, held)
		}
	}
	f.check()
	if s := f.tr.JudgeStats(); s.HeldPoints != 2 || s.HeldBytes != 200 {
		t.Fatalf("held %d points of %d bytes, want 2 of 200 (the newer ones replace the older)", s.HeldPoints, s.HeldBytes)
	}
	if got := f.released(); len(got) != 0 {
		t.Fatalf("released %v while B is undecided", got)
	}
	// A's histogram at 120 s: max 5, below B's 6 at 115 s. A peer.
	f.feed(2, histogram, Point{Start: a, Time: secs(120), Value: 20, Sum: 40, HasSum: true, Min: 1, Max: 5, HasMinMax: true}, 0)
	got := f.released()
	if len(got) != 2 || got[1] != 6 || got[2] != 6 {
		t.Fatalf("released %v, want B's newest point of both streams (6)", got)
	}
	f.check()
	if s := f.tr.JudgeStats(); s.HeldPoints != 0 || s.HeldBytes != 0 || s.Held[HeldReleased] != 2 {
		t.Fatalf("stats %+v, want nothing held and 2 released", s)
	}
	if got := f.released(); len(got) != 0 {
		t.Fatalf("released %v again", got)
	}
}

// TestHeldSupersededAndDiscarded: a peer's labelled point supersedes its
// held one (nothing released); a copy's held point is dropped, not
// released.
func TestHeldSupersededAndDiscarded(t *testing.T) {
	t.Run("superseded", func(t *testing.T) {
		f := newHeldFixture(t, 1000)
		f.feed(1, monoSum, Point{Start: secs(100), Time: secs(110), Value: 10}, 0)
		if _, held := f.feed(1, monoSum, Point{Start: secs(103), Time: secs(111), Value: 4}, 50); !held {
			t.Fatal("B's first point not held")
		}
		// A idle at 120 s: with B's 4 at 111 s, c ≤ 6 (and c ≥ 6 before).
		f.feed(1, monoSum, Point{Start: secs(100), Time: secs(120), Value: 10}, 0)
		// B's 20 at 115 s, before A's 10 at 120 s: c ≤ -10. A peer, and this
		// newer point of B's passes labelled.
		if d, _ := f.feed(1, monoSum, Point{Start: secs(103), Time: secs(115), Value: 20}, 50); d.Verdict != Label {
			t.Fatalf("B's point above A's later one: %v, want labelled (a peer)", d)
		}
		f.check()
		if got := f.released(); len(got) != 0 {
			t.Fatalf("released %v: the labelled point superseded the held one", got)
		}
		if s := f.tr.JudgeStats(); s.HeldPoints != 0 || s.Held != [NumHeldOutcomes]uint64{} {
			t.Fatalf("stats %+v, want nothing held or counted", s)
		}
	})
	t.Run("copy", func(t *testing.T) {
		f := newHeldFixture(t, 100000)
		a, b := secs(100), secs(105)
		heldOnce := false
		for k := range 80 {
			e := float64(10 * (k + 1))
			f.feed(1, monoSum, Point{Start: a, Time: secs(110 + float64(k)), Value: e}, 0)
			if _, held := f.feed(1, monoSum, Point{Start: b, Time: secs(110.5 + float64(k)), Value: e + 5 - 50}, 60); held {
				heldOnce = true
			}
			f.released()
			f.check()
		}
		j, _ := f.tr.Judgement(ID{1}, b)
		if j.Class != ClassCopy || !heldOnce {
			t.Fatalf("class %v, held once %v: want a copy, held while undecided", j.Class, heldOnce)
		}
		if s := f.tr.JudgeStats(); s.HeldPoints != 0 || s.Held != [NumHeldOutcomes]uint64{} {
			t.Fatalf("stats %+v: a copy's held point is dropped uncounted", s)
		}
	})
}

// TestHeldBounded: past MaxHeldBytes a point is refused (counted) and the
// one held before stays; a writer forgotten while undecided takes its held
// point with it, counted as expired.
func TestHeldBounded(t *testing.T) {
	f := newHeldFixture(t, 150)
	a := secs(100)
	for id := byte(1); id <= 3; id++ {
		f.feed(id, monoSum, Point{Start: a, Time: secs(110), Value: 10}, 0)
	}
	// B's points within a second of A's newest: no failover.
	_, h1 := f.feed(1, monoSum, Point{Start: secs(100.002), Time: secs(110.3), Value: 5}, 100)
	_, h2 := f.feed(2, monoSum, Point{Start: secs(100.002), Time: secs(110.3), Value: 5}, 100)
	_, h1b := f.feed(1, monoSum, Point{Start: secs(100.002), Time: secs(110.5), Value: 6}, 140)
	_, h1c := f.feed(1, monoSum, Point{Start: secs(100.002), Time: secs(110.7), Value: 7}, 151)
	f.check()
	if !h1 || h2 || !h1b || h1c {
		t.Fatalf("held %v %v %v %v, want true false true false", h1, h2, h1b, h1c)
	}
	s := f.tr.JudgeStats()
	if s.HeldPoints != 1 || s.HeldBytes != 140 || s.Held[HeldRefused] != 2 {
		t.Fatalf("stats %+v, want 1 point of 140 bytes held, 2 refused", s)
	}
	// Stream 1 forgotten (MaxStale after its newest point): the held point
	// of its undecided writer expires, counted.
	f.tr.Sweep(int64(DefaultMaxStale)+1, 100)
	f.check()
	s = f.tr.JudgeStats()
	if s.HeldPoints != 0 || s.HeldBytes != 0 || s.Held[HeldExpired] != 1 {
		t.Fatalf("stats %+v, want the held point expired", s)
	}
}

// TestHeldDroppedAtShutdown: the points still held for undecided writers
// are counted expired when the caller's shutdown drops them (held points
// live in memory only), and nothing stays held.
func TestHeldDroppedAtShutdown(t *testing.T) {
	f := newHeldFixture(t, 1000)
	a, b := secs(100), secs(100.002)
	for id := byte(1); id <= 2; id++ {
		f.feed(id, monoSum, Point{Start: a, Time: secs(110), Value: 10}, 0)
		if _, held := f.feed(id, monoSum, Point{Start: b, Time: secs(110.3), Value: 5}, 100); !held {
			t.Fatalf("stream %d: B's point not held", id)
		}
	}
	f.check()
	if n := f.tr.DropHeld(); n != 2 {
		t.Fatalf("DropHeld: %d, want the 2 points of the undecided writer", n)
	}
	f.check()
	if s := f.tr.JudgeStats(); s.HeldPoints != 0 || s.HeldBytes != 0 || s.Held[HeldExpired] != 2 {
		t.Fatalf("stats %+v, want nothing held and 2 expired", s)
	}
	if n := f.tr.DropHeld(); n != 0 {
		t.Fatalf("DropHeld again: %d, want 0", n)
	}
}

// TestReholdAfterAFailedDelivery: a released point that could not be
// delivered is held again and released with the next TakeReleased.
func TestReholdAfterAFailedDelivery(t *testing.T) {
	f := newHeldFixture(t, 1000)
	f.feed(1, monoSum, Point{Start: secs(100), Time: secs(120), Value: 20}, 0)
	f.feed(1, monoSum, Point{Start: secs(100), Time: secs(130), Value: 30}, 0)
	f.feed(2, histogram, Point{Start: secs(100), Time: secs(120), Value: 20, Sum: 40, HasSum: true}, 0)
	if _, held := f.feed(1, monoSum, Point{Start: secs(100.002), Time: secs(115), Value: 12}, 80); !held {
		t.Fatal("B's counter not held")
	}
	f.feed(2, histogram, Point{Start: secs(100.002), Time: secs(115), Value: 22, Sum: 44, HasSum: true}, 0) // count above A's later one: a peer
	var md pmetric.Metrics
	f.tr.TakeReleased(func(id ID, w uint64, h pmetric.Metrics, size int) {
		if id != (ID{1}) || w != secs(100.002) || size != 80 {
			t.Fatalf("released %v %d (%d bytes)", id, w, size)
		}
		md = h
	})
	f.tr.Rehold(ID{1}, secs(100.002), md, 80)
	f.check()
	if s := f.tr.JudgeStats(); s.HeldPoints != 1 || s.Held[HeldReleased] != 0 {
		t.Fatalf("stats %+v, want the point held again, not counted released", s)
	}
	n := 0
	f.tr.TakeReleased(func(ID, uint64, pmetric.Metrics, int) { n++ })
	if n != 1 || f.tr.JudgeStats().Held[HeldReleased] != 1 {
		t.Fatalf("released %d after the rehold, want 1", n)
	}
}

// checkHeld verifies the held points' bookkeeping: every holder holds, no
// other pair does, and the bytes add up.
func (j *judge) checkHeld() error {
	if j == nil {
		return nil
	}
	bytes, n := 0, 0
	inList := map[uint32]bool{}
	for _, i := range j.holders {
		if inList[i] {
			return fmt.Errorf("pair %d listed twice", i)
		}
		inList[i] = true
	}
	for i := range j.pairs {
		jp := &j.pairs[i]
		if jp.held.ok != inList[uint32(i)] {
			return fmt.Errorf("pair %d holds %v, listed %v", i, jp.held.ok, inList[uint32(i)])
		}
		if jp.held.ok {
			if !jp.live {
				return fmt.Errorf("pair %d is free and holds a point", i)
			}
			bytes += jp.held.size
			n++
		}
		if jp.restart != nil {
			if !jp.live {
				return fmt.Errorf("pair %d is free and holds a restart", i)
			}
			if !slices.Contains(j.restarts, uint32(i)) {
				return fmt.Errorf("pair %d holds a restart, not listed", i)
			}
			for _, h := range jp.restart.pts {
				bytes += h.size
			}
		}
	}
	for _, i := range j.restarts {
		if j.pairs[i].restart == nil {
			return fmt.Errorf("pair %d listed as a held restart, holds none", i)
		}
	}
	for _, h := range j.out {
		bytes += h.size
	}
	if bytes != j.heldBytes || bytes > j.maxHeld {
		return fmt.Errorf("held %d bytes, counted %d, bound %d", bytes, j.heldBytes, j.maxHeld)
	}
	if n != len(j.holders) {
		return fmt.Errorf("%d holders listed, %d hold", len(j.holders), n)
	}
	return nil
}
