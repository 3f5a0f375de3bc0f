package streams

import (
	"testing"
)

// TestExportTimes: the record of exports seen remembers (identity, time)
// pairs, one per export however many points it has, tells identities
// apart, forgets the oldest past its bound (counted), and starts with the
// first delta point (a tracker of cumulative streams keeps none).
func TestExportTimes(t *testing.T) {
	e := exportTimes{max: 3}
	e.observe(7, gauge, Point{Time: secs(1)})
	if e.seen(7, secs(1)) || e.set != nil {
		t.Fatal("recorded before any delta point")
	}
	e.observe(7, deltaSum, Point{Time: secs(2)})
	e.observe(7, gauge, Point{Time: secs(2)}) // the same export
	e.observe(7, gauge, Point{Time: secs(3)})
	if !e.seen(7, secs(2)) || !e.seen(7, secs(3)) || e.seen(8, secs(2)) || e.seen(7, secs(1)) || e.seen(0, secs(2)) {
		t.Fatal("seen: wrong answer")
	}
	if len(e.ring) != 2 {
		t.Fatalf("%d entries for 2 exports", len(e.ring))
	}
	e.observe(8, gauge, Point{Time: secs(2)})
	e.observe(7, gauge, Point{Time: secs(4)}) // past the bound: 7@2 goes
	if e.seen(7, secs(2)) || !e.seen(7, secs(3)) || !e.seen(8, secs(2)) || !e.seen(7, secs(4)) || e.forgotten != 1 || len(e.ring) != 3 {
		t.Fatalf("past the bound: forgotten %d, %d entries", e.forgotten, len(e.ring))
	}
	e.observe(0, deltaSum, Point{Time: secs(9)}) // no identity: nothing
	if e.forgotten != 1 {
		t.Fatal("an unknown identity recorded")
	}
	if k := e.add(9, secs(5)); k == 0 || e.add(9, secs(5)) != 0 {
		t.Fatal("add: a new export's key, then none")
	} else if e.forget(k); e.seen(9, secs(5)) || e.forgotten != 2 {
		t.Fatalf("forget (a refused request's export): still seen, or %d forgotten", e.forgotten)
	}
	off := exportTimes{}
	off.observe(7, deltaSum, Point{Time: secs(2)})
	if off.seen(7, secs(2)) {
		t.Fatal("a record of no size remembered")
	}
}

// TestExportTimesFirstExportRead: the export of the first delta point,
// which turns the record on, is its reader's when that export's first
// cumulative point came before it (an up-down counter ahead of the delta
// counter), so that the reader is known to export still after it (alive:
// the delta quiet rule waits); not by a cumulative point of another
// export, or of another identity.
func TestExportTimesFirstExportRead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		identity  uint64
		time      float64
		wantAlive bool
	}{
		{"the same export", 7, 4.5, true},
		{"another export's", 7, 3.5, false},
		{"another identity's", 8, 4.5, false},
	} {
		e := exportTimes{max: 64}
		e.observe(tc.identity, upDown, Point{Start: secs(-0.5 + 10), Time: secs(tc.time + 10), Value: 1})
		e.observe(7, deltaSum, Point{Start: secs(3.5 + 10), Time: secs(4.5 + 10), Value: 1})
		e.observe(7, upDown, Point{Start: secs(-0.5 + 10), Time: secs(6.5 + 10), Value: 1}) // its next export, without a delta point
		if got := e.alive(7, secs(4.5+10)); got != tc.wantAlive {
			t.Errorf("%s: alive %v, want %v", tc.name, got, tc.wantAlive)
		}
	}
}

// TestExportTimesEmptyGap: one interval on the chain's timer whose export
// was seen is empty; several are when the reader's exports, walked back
// one interval each, come to the chain's newest point's export; not when
// one of them is missing (lost), is another reader's, or lies off the
// interval, nor when a first interval much shorter than the stream's
// stands in.
func TestExportTimesEmptyGap(t *testing.T) {
	e := exportTimes{max: 64, on: true}
	// Reader A (its up-down counter started at 1 s) exports every 10 s
	// from 110 to 150, but its export at 170 is lost; reader B, a copy,
	// at 165 and 175. Every export has an up-down counter's point.
	for _, x := range []struct{ start, time float64 }{
		{1, 110}, {1, 120}, {1, 130}, {1, 140}, {1, 150}, {1, 160}, {2, 165}, {2, 175}, {1, 180}, {1, 190.3}, {1, 200.3},
	} {
		e.observe(7, upDown, Point{Start: secs(x.start), Time: secs(x.time), Value: 1})
	}
	iv := secs(10)
	for _, tc := range []struct {
		name              string
		first, end, start uint64
		want              bool
	}{
		{"one interval, its export seen", 0, secs(110), secs(120), true},
		{"one interval, its export not seen", 0, secs(110), secs(119.99), false},
		{"two intervals, both exports seen", 0, secs(110), secs(130), true},
		{"four intervals, all seen", 0, secs(110), secs(150), true},
		{"two intervals, the first lost (170)", 0, secs(160), secs(180), false},
		{"a walk that lands off the chain's newest point", 0, secs(115), secs(135), false},
		{"an interval of 10.3 s in the walk (off the timer)", 0, secs(180), secs(200.3), false},
		{"a first interval of 9 s for the stream's 10 s: the writer's interval not known", secs(9), secs(110), secs(120), false},
		{"a first interval of 7 s for the stream's 10 s", secs(7), secs(110), secs(120), false},
	} {
		if got := e.emptyGap(7, iv, tc.first, tc.end, tc.start); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if e.emptyGap(8, iv, 0, secs(110), secs(130)) {
		t.Error("another identity's walk")
	}
}

// TestDeltaAutoEmptyInterval: an elected writer that counts in every other
// interval and a second chain that counts ten times as much, which a copy
// of it could not (the processor's golden auto_delta_empty_interval). With
// each export of the elected writer carrying another stream's point, its
// intervals without a point are known empty, the pair's bounds stay whole,
// and the second chain is a peer; the same points without the other
// stream's, or from another identity, or exports forgotten at the bound,
// leave it undecided (every gap may be a lost export).
func TestDeltaAutoEmptyInterval(t *testing.T) {
	for _, tc := range []struct {
		name       string
		exports    bool
		identity   uint64 // the other stream's resource (the jobs' is 7)
		maxExports int
		undo       bool // the requests of the exports without a jobs point refused downstream
		want       Class
	}{
		{name: "the elected writer's exports seen", exports: true, identity: 7, maxExports: DefaultMaxExportTimes, want: ClassPeer},
		{name: "no other stream", want: ClassUndecided},
		{name: "another identity's exports at those times", exports: true, identity: 8, maxExports: DefaultMaxExportTimes, want: ClassUndecided},
		{name: "no record (max_export_times 0)", exports: true, identity: 7, want: ClassUndecided},
		{name: "exports forgotten at the bound", exports: true, identity: 7, maxExports: 1, want: ClassUndecided},
		{name: "the exports without a jobs point refused downstream (undone)", exports: true, identity: 7, maxExports: DefaultMaxExportTimes, undo: true, want: ClassUndecided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := autoTracker(t, func(p *Policy) { p.MaxHeldBytes, p.MaxExportTimes = 1<<20, tc.maxExports })
			jobs, active := ID{1}, ID{2}
			export := func(at float64) { // the elected writer's export at t: its other stream
				if tc.exports {
					var j Journal
					if tc.undo && (at == 120 || at == 140) {
						tr.Record(&j)
						defer func() { tr.Record(nil); tr.Undo(&j) }()
					}
					tr.NewScope(tc.identity)
					tr.ObserveFrom(active, 9, gauge, Point{Time: secs(at), Value: 1}, 0)
					if tc.maxExports == 1 {
						tr.ObserveFrom(active, 9, gauge, Point{Time: secs(at) + 1, Value: 1}, 0) // another export, at once
					}
				}
				tr.NewScope(7)
			}
			pt := func(start, end, v float64) {
				tr.NewScope(7) // each point its own export's
				tr.ObserveFrom(jobs, 9, deltaSum, Point{Start: secs(start), Time: secs(end), Value: v}, 0)
			}
			tr.NewScope(7)
			pt(100, 110, 1)
			export(110)
			pt(113, 118, 5)
			export(120) // no jobs point: its interval had no measurements
			pt(118, 128, 10)
			pt(120, 130, 1)
			export(130)
			pt(128, 138, 10)
			export(140)
			pt(138, 148, 10)
			pt(140, 150, 1)
			export(150)
			pt(148, 158, 10)
			j, ok := tr.Judgement(jobs, secs(113))
			if !ok || j.Class != tc.want {
				t.Fatalf("the second chain: %v (%v), want %v", j, ok, tc.want)
			}
			st := tr.JudgeStats()
			if wantEmpty := tc.want == ClassPeer; (st.EmptyIntervals > 0) != wantEmpty || st.AcrossGap != 2 {
				t.Errorf("across_gap %d, empty_interval %d", st.AcrossGap, st.EmptyIntervals)
			}
			if tc.maxExports == 1 && (st.ExportTimesForgotten == 0 || tr.ExportTimesForgotten() != st.ExportTimesForgotten || st.ExportTimes != 1) {
				t.Errorf("at the bound: %d forgotten, %d kept", st.ExportTimesForgotten, st.ExportTimes)
			}
		})
	}
}

// TestDeltaAutoLinkedExports: a point whose writer's exports link back to
// a chain's newest point goes on from that chain, whatever the timers say:
// after 9 empty intervals whose reads drifted 150 ms from the timer the
// chain's newest interval makes (off it: a restart without the links), and
// from a chain whose timer another chain shares within 1 ms (on both: a
// new chain without the links). Without the up-down counter's points, or
// with one of the reader's exports lost, the timers judge as before.
func TestDeltaAutoLinkedExports(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exports bool
		lose    int    // the k-th read's export lost (0: none)
		want    string // the decision for the point after the gap
		empty   bool
	}{
		{name: "linked: the elected chain goes on, its 9 intervals empty", exports: true, want: "pass", empty: true},
		{name: "no up-down counter: off the timer, a restart", want: "pass elect:restart"},
		{name: "one of the exports lost: a step of two intervals, the chain goes on across a gap", exports: true, lose: 4, want: "pass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := autoTracker(t, func(p *Policy) { p.MaxHeldBytes = 1 << 20 })
			jobs, active := ID{1}, ID{2}
			export := func(at float64, k int) { // the elected writer's k-th read's export: its up-down counter, started at 1 s
				if tc.exports && (k == 0 || k != tc.lose) {
					tr.NewScope(7)
					tr.ObserveFrom(active, 9, upDown, Point{Start: secs(1), Time: secs(at), Value: 1}, 0)
				}
			}
			pt := func(start, end, v float64) Decision {
				tr.NewScope(7)
				return tr.ObserveFrom(jobs, 9, deltaSum, Point{Start: secs(start), Time: secs(end), Value: v}, 0)
			}
			export(110, 0)
			pt(100, 110, 1)
			export(120, 0)
			pt(110, 120, 1) // interval 10 s: the timer
			// Reads every 10.0167 s (150 ms over 9), nothing measured.
			at := 120.0
			for k := range 9 {
				at += 10.0167
				export(at, k+1)
			}
			next := at + 10
			export(next, 0)
			d := pt(at, next, 2)
			if got := d.String(); got != tc.want {
				t.Fatalf("the point after the gap: %q, want %q", got, tc.want)
			}
			if st := tr.JudgeStats(); (st.EmptyIntervals > 0) != tc.empty {
				t.Errorf("empty_interval %d, want it %v", st.EmptyIntervals, tc.empty)
			}
		})
	}
}

// TestDeltaAutoLinkedExportsOneTimer: two processes whose reads lie 1 ms
// apart: a gap's start is on both chains' timers, so the timers cannot
// tell whose chain goes on (a restart of the stream, every pair's
// evidence begun again); their exports, linked by each process's up-down
// counter, can.
func TestDeltaAutoLinkedExportsOneTimer(t *testing.T) {
	for _, exports := range []bool{true, false} {
		tr := autoTracker(t, func(p *Policy) { p.MaxHeldBytes = 1 << 20 })
		jobs, active := ID{1}, ID{2}
		at := func(start, at float64) { // a process's export: its up-down counter
			if exports {
				tr.NewScope(7)
				tr.ObserveFrom(active, 9, upDown, Point{Start: secs(start), Time: secs(at), Value: 1}, 0)
			}
		}
		pt := func(start, end, v float64) Decision {
			tr.NewScope(7)
			return tr.ObserveFrom(jobs, 9, deltaSum, Point{Start: secs(start), Time: secs(end), Value: v}, 0)
		}
		pt(100, 110, 1) // the first delta point: the record starts (exports.go)
		at(1, 110)
		at(2, 110.001)
		pt(100.001, 110.001, 5) // another process: a second chain
		at(1, 120)              // nothing measured by either
		at(2, 120.001)
		at(1, 130)
		d := pt(120, 130, 1) // the first process's, across (110, 120]: on both timers
		want := "pass"
		if !exports {
			want = "pass elect:restart"
		}
		if got := d.String(); got != want {
			t.Errorf("exports %v: %q, want %q", exports, got, want)
		}
	}
}

// seen says whether identity exported a point at time, as far as the
// record remembers.
func (e *exportTimes) seen(identity, time uint64) bool {
	if identity == 0 || e.set == nil {
		return false
	}
	_, ok := e.set[exportKey(identity, time)]
	return ok
}
