package streams

import (
	"slices"
	"testing"
)

// TestHeldRestartSecondReader: the FastAPI 0.142 interleaving. The app's
// reader (A, start 100 s) exports every second; a second reader added at
// startup (B) starts its stream after A's newest point and exports before
// A's next one. B's point looks like a restart: it is held, not elected; A's
// next point shows that B is a second writer, and the stream stays A's with
// no step down (no reset), B's points dropped as any undecided writer's.
func TestHeldRestartSecondReader(t *testing.T) {
	f := newHeldFixture(t, 1000)
	a, b := secs(100), secs(111.3)
	for _, tm := range []float64{110, 111} {
		f.now = int64(secs(tm))
		if d, _ := f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm - 90}, 50); d.Verdict != Pass {
			t.Fatalf("A at %g s: %v", tm, d)
		}
	}
	f.now = int64(secs(111.5))
	d, held := f.feed(1, monoSum, Point{Start: b, Time: secs(111.5), Value: 1}, 50)
	if d.Verdict != Drop || !d.Restart || !held || d.Election != ElectionNone {
		t.Fatalf("B's first point: %v restart %v held %v; want a held restart", d, d.Restart, held)
	}
	f.check()
	if got := f.restarts(false); len(got) != 0 {
		t.Fatalf("sent %v before A was overdue", got)
	}
	f.now = int64(secs(112))
	if d, _ := f.feed(1, monoSum, Point{Start: a, Time: secs(112), Value: 22}, 50); d.Verdict != Pass || d.Election != ElectionNone {
		t.Fatalf("A's next point: %v, want it to pass, no election", d)
	}
	f.now = int64(secs(112.5))
	if d, held := f.feed(1, monoSum, Point{Start: b, Time: secs(112.5), Value: 2}, 50); d.Verdict != Drop || d.Restart || !held {
		t.Fatalf("B's next point: %v restart %v held %v; want an undecided writer's held drop", d, d.Restart, held)
	}
	// Long after: the held restart is discarded (A went on), B's newest
	// point stays held as an undecided writer's.
	f.now = int64(secs(200))
	if got := f.restarts(false); len(got) != 0 {
		t.Fatalf("sent %v: A sent again, B is a second writer", got)
	}
	f.check()
	if s := f.tr.JudgeStats(); s.HeldPoints != 1 || s.HeldBytes != 50 || s.Held[HeldReleased] != 0 {
		t.Fatalf("stats %+v; want B's newest point held, nothing released", s)
	}
	if d, _ := f.feed(1, monoSum, Point{Start: a, Time: secs(113), Value: 23}, 50); d.Verdict != Pass || d.Election != ElectionNone {
		t.Fatalf("A at 113 s: %v", d)
	}
}

// TestHeldRestartReleasedByTime: a genuine restart whose new writer sends
// one point and nothing more (nor does the old one): once the caller's
// clock passes the old writer's failover time after the point was held, it
// is elected and its point handed out as the stream's own.
func TestHeldRestartReleasedByTime(t *testing.T) {
	for _, all := range []bool{false, true} {
		f := newHeldFixture(t, 1000)
		a, b := secs(100), secs(121)
		for _, tm := range []float64{110, 120} {
			f.now = int64(secs(tm))
			f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm - 100}, 50)
		}
		f.now = int64(secs(125))
		if d, held := f.feed(1, monoSum, Point{Start: b, Time: secs(125), Value: 3}, 50); !d.Restart || !held {
			t.Fatalf("B's point: %v restart %v held %v", d, d.Restart, held)
		}
		f.now = int64(secs(154)) // A's failover time is 30 s (three 10 s intervals)
		want := []float64(nil)
		if all { // shutdown: every held restart goes out
			want = []float64{3}
		}
		if got := f.restarts(all); !slices.Equal(got, want) {
			t.Fatalf("all %v: sent %v at 154 s, want %v", all, got, want)
		}
		if !all {
			f.now = int64(secs(155))
			if got := f.restarts(false); !slices.Equal(got, []float64{3}) {
				t.Fatalf("sent %v at 155 s, want B's point", got)
			}
		}
		f.check()
		if s := f.tr.JudgeStats(); s.HeldPoints != 0 || s.HeldBytes != 0 || s.Held[HeldReleased] != 1 || s.Pairs != 0 {
			t.Fatalf("stats %+v; want nothing held, one point released, B elected", s)
		}
		if d, _ := f.feed(1, monoSum, Point{Start: b, Time: secs(135), Value: 5}, 50); d.Verdict != Pass || d.Election != ElectionNone {
			t.Fatalf("B's next point: %v, want it to pass as the elected writer's", d)
		}
		if got := f.restarts(true); len(got) != 0 {
			t.Fatalf("sent %v again", got)
		}
	}
}

// TestHeldRestartElectedByItsPoint: the new writer goes on; its first point
// past the old writer's failover time elects it, and its held points go
// out, oldest first, before that point.
func TestHeldRestartElectedByItsPoint(t *testing.T) {
	f := newHeldFixture(t, 1000)
	a, b := secs(100), secs(121)
	for _, tm := range []float64{110, 120} {
		f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm - 100}, 50)
	}
	for k, tm := range []float64{125, 135, 145} {
		if d, held := f.feed(1, monoSum, Point{Start: b, Time: secs(tm), Value: float64(k + 1)}, 50); !d.Restart || !held || d.Verdict != Drop {
			t.Fatalf("B at %g s: %v restart %v held %v", tm, d, d.Restart, held)
		}
		f.check()
	}
	if d, _ := f.feed(1, monoSum, Point{Start: b, Time: secs(155), Value: 4}, 50); d.Verdict != Pass || d.Election != ElectionRestart {
		t.Fatalf("B at 155 s: %v, want elected (restart)", d)
	}
	if got := f.restarts(false); !slices.Equal(got, []float64{1, 2, 3}) {
		t.Fatalf("sent %v, want B's held points 1, 2, 3 in order", got)
	}
	f.check()
	if s := f.tr.JudgeStats(); s.HeldBytes != 0 || s.Held[HeldReleased] != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// TestHeldRestartOneShot: an elected writer that has sent a single point
// has no observed interval; the time from its start to that point stands
// for it (at most RestartOneShot).
func TestHeldRestartOneShot(t *testing.T) {
	f := newHeldFixture(t, 1000)
	f.feed(1, monoSum, Point{Start: secs(109), Time: secs(110), Value: 5}, 50)
	if d, _ := f.feed(1, monoSum, Point{Start: secs(110.2), Time: secs(110.5), Value: 1}, 50); !d.Restart {
		t.Fatalf("B's point 0.5 s after A's only one: %v, want held", d)
	}
	if d, _ := f.feed(1, monoSum, Point{Start: secs(109), Time: secs(111), Value: 7}, 50); d.Verdict != Pass || d.Election != ElectionNone {
		t.Fatalf("A's second point: %v", d)
	}
	// An estimate past RestartOneShot is cut to it: a restart 3 minutes
	// and a second after such a writer's only point is elected at once.
	g := newHeldFixture(t, 1000)
	g.feed(1, monoSum, Point{Start: secs(100), Time: secs(10000), Value: 5}, 50)
	if d, _ := g.feed(1, monoSum, Point{Start: secs(10001), Time: secs(10181), Value: 1}, 50); d.Election != ElectionRestart {
		t.Fatalf("a restart 181 s after a single point: %v, want elected", d)
	}
}

// TestHeldRestartBounded: held restart points count against MaxHeldBytes
// with the labelled ones; past it they are refused (counted), and a stream
// forgotten with a held restart frees its bytes.
func TestHeldRestartBounded(t *testing.T) {
	f := newHeldFixture(t, 250)
	a, b := secs(100), secs(121)
	for _, tm := range []float64{110, 120} {
		f.feed(1, monoSum, Point{Start: a, Time: secs(tm), Value: tm - 100}, 0)
	}
	for k, tm := range []float64{125, 130} {
		f.feed(1, monoSum, Point{Start: b, Time: secs(tm), Value: float64(k + 1)}, 100)
		f.check()
	}
	// 125: 100 restart + 100 labelled; 130: its restart copy refused.
	if s := f.tr.JudgeStats(); s.HeldBytes != 200 || s.Held[HeldRefused] != 1 {
		t.Fatalf("stats %+v; want 200 bytes held, one refused", s)
	}
	f.now = int64(secs(10000))
	f.tr.Sweep(f.now, 100)
	f.check()
	if s := f.tr.JudgeStats(); s.HeldBytes != 0 || s.HeldPoints != 0 || s.Held[HeldExpired] != 1 {
		t.Fatalf("after the stream expired: %+v; want nothing held, the labelled point expired", s)
	}
	if got := f.restarts(true); len(got) != 0 {
		t.Fatalf("sent %v for a forgotten stream", got)
	}
}
