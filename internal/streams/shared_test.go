package streams

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// twoSharers are the points of two processes sharing the start 100 s,
// exporting every second: A at whole seconds from 110 s counting 2 a
// second from 10, B 400 ms later counting 4 a second from 40, rounds
// points each, in time order.
func twoSharers(rounds int) []pt {
	var out []pt
	for k := range rounds {
		out = append(out,
			pt{start: 100, time: 110 + float64(k), value: 10 + 2*float64(k)},
			pt{start: 100, time: 110.4 + float64(k), value: 40 + 4*float64(k)})
	}
	return out
}

// TestSharedStart: two processes sharing a start (shared.go). Until their
// export interval is found the points are judged as today (B's pass, A's
// fall: dropped); from A's 5th point on (eight points of the start kept,
// one interval found that they repeat) each is its own series: B, which
// holds the newest passed point, unlabelled, A labelled SharerName(100 s, 1).
func TestSharedStart(t *testing.T) {
	tr := autoTracker(t, nil)
	for i, p := range twoSharers(8) {
		d := tr.Observe(ID{1}, monoSum, p.point(), 1)
		a := i%2 == 0
		want := "pass"
		switch {
		case a && i >= 8:
			want = "label overlap"
		case a && i >= 2:
			want = "drop decrease"
		}
		if d.String() != want || d.Verdict == Label && (d.Sharer != 1 || d.Writer != secs(100)) {
			t.Errorf("point %d (%g s, %g): %v sharer %d, want %s", i, p.time, p.value, d, d.Sharer, want)
		}
	}
	e, ok := tr.Shared(ID{1})
	if !ok || e.Writers != 2 || e.Interval != uint64(time.Second) || e.Split != secs(114) || e.Unsplit != 0 {
		t.Fatalf("shared %v %+v", ok, e)
	}
	if s := e.String(); !strings.HasPrefix(s, "writers sharing one start: split by export phase (every 1s) into 2 writers") {
		t.Errorf("evidence %q", s)
	}
	if s := tr.JudgeStats(); s.SharedSplit != 1 || s.Shared != 1 || s.SharedUnsplit != 0 {
		t.Errorf("stats %+v", s)
	}
	// The stream's fold names the split, as verify and the status page do.
	if f := tr.StreamClass(ID{1}); f.Class() != ClassPeer || f.Evidence() != e.String() || f.Len() != 1 {
		t.Errorf("fold %v %q", f.Class(), f.Evidence())
	}
	if got, want := SharerName(secs(100), 1), WriterName(secs(100))+"-1"; got != want {
		t.Errorf("SharerName %q, want %q", got, want)
	}
	// A repeat and a late point of a chain.
	for _, c := range []struct {
		p    pt
		want string
	}{
		{pt{start: 100, time: 118, value: 26}, "label overlap"},
		{pt{start: 100, time: 118, value: 26}, "drop duplicate"},
		{pt{start: 100, time: 117.5, value: 25}, "drop out_of_order"},
		{pt{start: 100, time: 118.4, value: 72}, "pass"},
		// off both phases, not above both: given to no chain, counted
		{pt{start: 100, time: 118.7, value: 27}, "drop overlap"},
		// a new start (a restart) ends the split
		{pt{start: 200, time: 201, value: 1}, "pass elect:restart"},
		{pt{start: 200, time: 202, value: 2}, "pass"},
	} {
		if d := tr.Observe(ID{1}, monoSum, c.p.point(), 1); d.String() != c.want {
			t.Errorf("%+v: %v, want %s", c.p, d, c.want)
		}
	}
	if _, ok := tr.Shared(ID{1}); ok {
		t.Error("still shared after a restart")
	}
	if s := tr.JudgeStats(); s.SharedUnsplit != 1 {
		t.Errorf("unsplit %d, want 1 (the point off both phases)", s.SharedUnsplit)
	}
}

// TestSharedStartNotSplit: what is not split, and what is said of it.
func TestSharedStartNotSplit(t *testing.T) {
	t.Run("a copy on its own timer (one aggregation, read twice)", func(t *testing.T) {
		tr := autoTracker(t, nil)
		for k := range 20 {
			tm := 110 + float64(k)
			for _, p := range []pt{{start: 100, time: tm, value: 3 * tm}, {start: 100, time: tm + 0.3, value: 3 * (tm + 0.3)}} {
				if d := tr.Observe(ID{1}, monoSum, p.point(), 1); d.String() != "pass" {
					t.Fatalf("%+v: %v", p, d)
				}
			}
		}
		if s := tr.JudgeStats(); s.SharedSplit != 0 || s.SharedUnsplit != 0 || s.Shared != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("a fall closer in time than TimeSlack: counted, not learnt", func(t *testing.T) {
		tr := autoTracker(t, nil)
		run(t, tr, monoSum, []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 100, time: 110.01, value: 9, want: "drop decrease"},
		})
		if s := tr.JudgeStats(); s.SharedUnsplit != 1 || s.Shared != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("exports within TimeSlack of each other: could not be split, counted", func(t *testing.T) {
		// Two processes whose exports come 2 ms apart: no point of one is
		// far enough in time from the other's to prove a second writer.
		tr := autoTracker(t, nil)
		for k := range 40 {
			tm := 110 + float64(k)
			for _, p := range []pt{{start: 100, time: tm, value: 100 + 10*tm}, {start: 100, time: tm + 0.002, value: tm}} {
				d := tr.Observe(ID{1}, monoSum, p.point(), 1)
				if want := map[bool]string{true: "pass", false: "drop decrease"}[p.value > 1000]; d.String() != want {
					t.Fatalf("%+v: %v, want %s", p, d, want)
				}
			}
		}
		if _, ok := tr.Shared(ID{1}); ok {
			t.Error("split")
		}
		if s := tr.JudgeStats(); s.SharedUnsplit != 40 || s.SharedSplit != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("one early export (a flush at shutdown) is no second timer", func(t *testing.T) {
		tr := autoTracker(t, nil)
		for k := range 10 {
			tr.Observe(ID{1}, monoSum, pt{start: 100, time: 110 + float64(k), value: float64(k)}.point(), 1)
		}
		tr.Observe(ID{1}, monoSum, pt{start: 100, time: 119.3, value: 9.5}.point(), 1) // learning begins
		for k := range 40 {
			if d := tr.Observe(ID{1}, monoSum, pt{start: 100, time: 120 + float64(k), value: 10 + float64(k)}.point(), 1); d.String() != "pass" {
				t.Fatalf("point %d: %v", k, d)
			}
		}
		if _, ok := tr.Shared(ID{1}); ok {
			t.Error("split")
		}
		if s := tr.JudgeStats(); s.SharedSplit != 0 || s.SharedUnsplit != 0 || s.Shared != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("the classifier's limit: a fall counted, not learnt", func(t *testing.T) {
		tr := autoTracker(t, func(p *Policy) { p.MaxJudged = 1 })
		for _, id := range []ID{{1}, {2}} {
			tr.Observe(id, monoSum, pt{start: 100, time: 110, value: 10}.point(), 1)
			tr.Observe(id, monoSum, pt{start: 100, time: 111, value: 5}.point(), 1)
		}
		if s := tr.JudgeStats(); s.Shared != 1 || s.SharedUnsplit != 1 || s.Refused != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestSharedStartUndo: a split point whose request could not be
// delivered is taken back, and the sender's retry is judged the same.
func TestSharedStartUndo(t *testing.T) {
	tr := autoTracker(t, nil)
	for _, p := range twoSharers(5) {
		tr.Observe(ID{1}, monoSum, p.point(), 1)
	}
	var j Journal
	tr.Record(&j)
	a, b := pt{start: 100, time: 115, value: 20}.point(), pt{start: 100, time: 115.4, value: 60}.point()
	da, db := tr.Observe(ID{1}, monoSum, a, 1), tr.Observe(ID{1}, monoSum, b, 1)
	tr.Record(nil)
	if da.Sharer != 1 || da.Verdict != Label || db.Verdict != Pass {
		t.Fatalf("decisions %+v, %+v", da, db)
	}
	if n := tr.Undo(&j); n != 4 { // each point's chain and stream
		t.Fatalf("undid %d, want 4", n)
	}
	if again := tr.Observe(ID{1}, monoSum, a, 1); again != da {
		t.Errorf("retry %+v, want %+v", again, da)
	}
	if again := tr.Observe(ID{1}, monoSum, b, 1); again != db {
		t.Errorf("retry %+v, want %+v", again, db)
	}
}

// sharedRun is one simulated stream written by n processes sharing one
// start: each counts its own measurements (rate a second) and exports
// every iv at its own phase, each export stamped up to 5 ms late, arriving
// up to 150 ms later in any order across processes.
type sharedRun struct {
	delivered float64 // sum over the output series of their newest value
	truth     float64 // sum over the processes of their newest export
	regular   float64 // the same without the flush at shutdown
	writers   int     // chains at the end
	decided   uint64  // time after the first export at which n chains were open; 0: never
	unsplit   uint64  // points counted unsplit or ambiguous
	byValue   uint64  // points placed by the value they continue (flushOf)
	byConn    uint64  // points placed by their connection against or without their phase
}

// simulateSharedWith simulates a sharedRun with Policy.Auto (the default)
// or keep_one (auto false: the rules before writers sharing a start were
// split, for comparison), each export of process w carrying the
// connection conn(w) (nil: none known).
func simulateSharedWith(t testing.TB, rng *rand.Rand, n int, iv, dur uint64, flush, auto bool, conn func(w int) uint64) sharedRun {
	const start = 1000 * sec
	type export struct {
		at uint64
		p  Point
		w  int
	}
	var all []export
	truth, regular := make([]float64, n), make([]float64, n)
	for w := range n {
		rate := 1 + rng.IntN(20)
		phase := uint64(rng.Int64N(int64(iv)))
		v := 0.0
		emit := func(tm uint64) {
			stamp := tm + uint64(rng.Int64N(int64(5*time.Millisecond)))
			v += float64(rng.IntN(2*rate + 1)) // its own measurements since its previous export
			p := Point{Start: start, Time: stamp, Value: v, Fingerprint: math.Float64bits(v) ^ stamp}
			if conn != nil {
				p.Conn = conn(w)
			}
			all = append(all, export{at: stamp + uint64(rng.Int64N(int64(150*time.Millisecond))), w: w, p: p})
			truth[w] = v
		}
		tm := start + phase
		for ; tm <= start+dur; tm += iv {
			emit(tm)
		}
		regular[w] = truth[w]
		if flush { // a shutdown's final export, sooner than its interval
			emit(tm - iv + iv/3)
		}
	}
	slices.SortStableFunc(all, func(a, b export) int { return cmp.Compare(a.at, b.at) })
	tr := autoTracker(t, nil)
	if !auto {
		tr = newTracker(t, nil)
	}
	series := map[uint8]Point{}
	var r sharedRun
	first := all[0].p.Time
	for _, e := range all {
		d := tr.ObserveFrom(ID{1}, 9, monoSum, e.p, 0)
		if d.Verdict != Drop {
			if q, ok := series[d.Sharer]; !ok || e.p.Time > q.Time {
				series[d.Sharer] = e.p
			}
		}
		if s, ok := tr.Shared(ID{1}); ok && s.Writers == n && r.decided == 0 {
			r.decided = e.p.Time - first
		}
	}
	for _, p := range series {
		r.delivered += p.Value
	}
	for w := range truth {
		r.truth += truth[w]
		r.regular += regular[w]
	}
	s, _ := tr.Shared(ID{1})
	r.writers, r.unsplit, r.byValue, r.byConn = s.Writers, tr.JudgeStats().SharedUnsplit+s.Ambiguous, s.ByValue, s.ByConn
	return r
}

// TestSharedStartSimulation: 2, 4 and 8 processes sharing one start, over
// 500 seeded runs each, with and without a flush at shutdown (an export
// off its timer): the sum of the output series' newest values equals the
// processes' regular exports' (the truth but for the flush, whose point is
// given to no chain and counted) in every run split into n writers with
// no point counted ambiguous; a run whose total is wrong is never silent
// once the stream is split (its points are counted unsplit or ambiguous).
// The share split and exact, and the time to split (median, worst), are
// logged for docs/metrics.md.
func TestSharedStartSimulation(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		for _, flush := range []bool{false, true} {
			truthBy := [2]int{}
			for ci, conn := range []bool{false, true} {
				truthBy[ci] = sharedSimulationRow(t, n, flush, conn)
			}
			// The connections place what the phase cannot: never fewer
			// runs exactly the truth than the phase alone.
			if truthBy[1] < truthBy[0] {
				t.Errorf("%d processes (flush %v): the truth in %d runs with connections, %d without", n, flush, truthBy[1], truthBy[0])
			}
		}
	}
}

// sharedSimulationRow runs and logs one row of TestSharedStartSimulation
// and returns how many runs delivered exactly the truth.
func sharedSimulationRow(t *testing.T, n int, flush, conn bool) int {
	t.Helper()
	const runs = 500
	var times []time.Duration
	exact, exactTruth, twice, byValue, byConn, split, silent, lost, lostKeepOne := 0, 0, 0, uint64(0), uint64(0), 0, 0, 0.0, 0.0
	var own func(int) uint64 // each process its own connection
	if conn {
		own = func(w int) uint64 { return uint64(w) + 1 }
	}
	for run := range runs {
		r := simulateSharedWith(t, rand.New(rand.NewPCG(uint64(n), uint64(run))), n, uint64(time.Second), 30*sec, flush, true, own)
		if r.writers == n {
			split++
			times = append(times, time.Duration(r.decided))
		}
		// The truth, or the processes' regular exports' (a flush
		// given to no chain and counted).
		want := r.regular
		if r.delivered == r.truth {
			want = r.truth
			exactTruth++
		}
		if r.delivered == want {
			exact++
		}
		if r.delivered > r.truth {
			twice++
		}
		byValue += r.byValue
		byConn += r.byConn
		lost += (r.truth - r.delivered) / r.truth
		k1 := simulateSharedWith(t, rand.New(rand.NewPCG(uint64(n), uint64(run))), n, uint64(time.Second), 30*sec, flush, false, own)
		lostKeepOne += (k1.truth - k1.delivered) / k1.truth
		switch {
		case r.writers == n && r.unsplit == 0 && r.delivered != want:
			t.Errorf("%d writers split, none ambiguous: delivered %g, want %g", n, r.delivered, want)
		case r.delivered != want && r.writers > 0 && r.unsplit == 0:
			t.Errorf("%d writers split into %d, silently: delivered %g, want %g", n, r.writers, r.delivered, want)
		case r.delivered != want && r.writers == 0 && r.unsplit == 0:
			silent++ // never split, nothing counted
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	med, worst := time.Duration(0), time.Duration(0)
	if len(times) > 0 {
		med, worst = times[len(times)/2], times[len(times)-1]
	}
	t.Logf("%d processes (flush at shutdown %v, connections %v): split into %d in %d of %d runs (median %s, worst %s after the first export); totals exact in %d (the truth in %d); over the truth in %d; never split and wrong in %d; counts lost %.2f%% (keep_one: %.2f%%); %d points placed by value, %d by connection",
		n, flush, conn, n, split, runs, med.Round(time.Millisecond), worst.Round(time.Millisecond), exact, exactTruth, twice, silent, 100*lost/runs, 100*lostKeepOne/runs, byValue, byConn)
	if silent > 0 {
		t.Errorf("%d processes: %d runs wrong and never split, nothing counted", n, silent)
	}
	if n <= 4 && split < runs*4/5 {
		t.Errorf("%d processes: split in %d of %d runs", n, split, runs)
	}
	return exactTruth
}

// sharedCopy: two readers of one process that registered together (one
// start), each exporting the same aggregation on its own timer (ops[0],
// ops[1]: 1 to 8 s; ops[2]: the second's phase; both the same when ops[0]
// is odd), each read taken up to 40 ms after its stamp (ops[4:]), the
// exports arriving in any order within a quarter interval, each reader's
// on its own connection (its own exporter). A Tracker
// never splits them: no point is labelled. (A read taken so late that
// the other reader's later stamp shows less is a fall closer than
// TimeSlack: counted unsplit, not split.)
func sharedCopy(t *testing.T, vals []float64, ops []byte) {
	if len(ops) < 4 {
		return
	}
	n := len(vals)
	ivA, ivB := uint64(ops[0]%8+1)*sec, uint64(ops[1]%8+1)*sec
	phase := uint64(ops[2]) * ivB / 256
	if ops[0]&1 != 0 {
		ivB, phase = ivA, 0
	}
	const base = 1000 * sec
	jitter := ops[3:]
	type export struct {
		at uint64
		p  Point
	}
	var all []export
	k := 0
	emit := func(first, iv, conn uint64) {
		for tm := first; tm <= base+uint64(n)*sec; tm += iv {
			b := jitter[k%len(jitter)]
			k++
			read := tm + uint64(b%41)*uint64(time.Millisecond)
			p := Point{Start: base, Time: tm, Conn: conn}
			for i := 0; i < n && base+uint64(i)*sec+sec/4 <= read; i++ {
				p.Value += math.Abs(vals[i])
			}
			p.Fingerprint = math.Float64bits(p.Value) ^ tm
			all = append(all, export{at: tm + uint64(b>>2)*min(ivA, ivB)/4/64, p: p})
		}
	}
	emit(base+ivA, ivA, 1)
	emit(base+ivB+phase, ivB, 2) // each reader's exporter its own connection
	slices.SortStableFunc(all, func(a, b export) int { return cmp.Compare(a.at, b.at) })
	tr := newSimTracker(t).tr
	for _, e := range all {
		d := tr.ObserveFrom(ID{1}, 9, monoSum, e.p, 0)
		if d.Sharer != 0 || d.Verdict == Label {
			e, _ := tr.Shared(ID{1})
			t.Fatalf("a copy sharing its start (every %s and %s) split at %s: %+v, %s", time.Duration(ivA), time.Duration(ivB), time.Duration(d.Writer), d, e)
		}
	}
	if s := tr.JudgeStats(); s.SharedSplit != 0 {
		t.Fatalf("a copy sharing its start: %+v", s)
	}
}

// TestSharedStartSize: what a shared start holds, for docs/metrics.md:
// its chains, and its ring of kept points while learning.
func TestSharedStartSize(t *testing.T) {
	if got := unsafe.Sizeof(sharedStart{}); got > 576 {
		t.Errorf("sharedStart is %d bytes, docs/metrics.md says at most 576", got)
	}
	if got := unsafe.Sizeof([sharedRing]sharer{}); got != 32*48 {
		t.Errorf("the ring is %d bytes, docs/metrics.md says 1,536", got)
	}
	t.Logf("sharedStart %d bytes, ring %d", unsafe.Sizeof(sharedStart{}), unsafe.Sizeof([sharedRing]sharer{}))
}
