package streams

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// source is one process's measurements: event times (seconds, sorted) and
// values (for histograms).
type source struct {
	times, vals []float64
}

// poisson makes events at rate per second over [from, to), each event's
// value drawn from an exponential distribution of mean 0.1 (a latency).
func poisson(r *rand.Rand, rate, from, to float64) *source {
	s := &source{}
	if rate <= 0 {
		return s
	}
	for t := from + r.ExpFloat64()/rate; t < to; t += r.ExpFloat64() / rate {
		s.times = append(s.times, t)
		s.vals = append(s.vals, r.ExpFloat64()/10)
	}
	return s
}

// idle removes the events in [from, to): a writer that records nothing.
func (s *source) idle(from, to float64) *source {
	o := &source{}
	for i, t := range s.times {
		if t < from || t >= to {
			o.times = append(o.times, t)
			o.vals = append(o.vals, s.vals[i])
		}
	}
	return o
}

var simBounds = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1}

// reader is one metric reader of a source: it aggregates the events after
// join (cumulative, start = join) and exports every interval from its
// first export at first; skew shifts its clock; drop skips exports (a
// lost interval); dips makes every fifth sum one ulp lower (the float sums
// of the original report).
type reader struct {
	src             *source
	join, first, iv float64
	skew            float64
	drop            map[int]bool
	dips            bool
	noMinMax        bool // histograms without min and max
	intervalMinMax  bool // min and max of each interval only (not cumulative)
}

// simPoint is one export.
type simPoint struct {
	at float64 // when it arrives
	p  Point
}

// points returns the reader's exports until end, as histogram points (the
// count is the Sum's value when hist is false).
func (rd reader) points(until float64, hist bool) []simPoint {
	var out []simPoint
	i := sort.SearchFloat64s(rd.src.times, rd.join)
	var count uint64
	var sum float64
	lo, hi := math.Inf(1), math.Inf(-1)
	buckets := make([]uint64, len(simBounds)+1)
	for k := 0; ; k++ {
		t := rd.first + float64(k)*rd.iv
		if t > until {
			return out
		}
		for i < len(rd.src.times) && rd.src.times[i] <= t {
			v := rd.src.vals[i]
			count++
			sum += v
			lo, hi = min(lo, v), max(hi, v)
			buckets[sort.SearchFloat64s(simBounds, v)]++
			i++
		}
		if rd.drop[k] {
			continue
		}
		ts := t + rd.skew
		p := Point{Start: secs(100 + rd.join + rd.skew), Time: secs(100 + ts), Value: float64(count)}
		if hist {
			s := sum
			if rd.dips && k%5 == 4 {
				s = math.Nextafter(s, math.Inf(-1))
			}
			p.Sum, p.HasSum = s, true
			bc := pcommon.NewUInt64Slice()
			bc.FromRaw(slices.Clone(buckets))
			p.Buckets, p.HasBuckets, p.Layout = bc, true, 42
			if count > 0 && !rd.noMinMax && !math.IsInf(lo, 1) {
				p.Min, p.Max, p.HasMinMax = lo, hi, true
			}
			if rd.intervalMinMax {
				lo, hi = math.Inf(1), math.Inf(-1)
			}
		}
		p.Fingerprint = uint64(k)
		out = append(out, simPoint{at: t, p: p})
	}
}

// merge orders the exports of both readers by arrival.
func merge(a, b []simPoint) []simPoint {
	all := append(slices.Clone(a), b...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].at < all[j].at })
	return all
}

// outcome is what a Pair made of two readers' points.
type outcome struct {
	class   Class
	seconds float64 // from the later writer's first point to the last decision
	points  int     // points of both writers fed
	// points of both writers up to the first decision
	decidedPoints int
	everPeer      bool
	part          string // the value that decided a peer
}

func judgePair(shape Shape, pts []simPoint) outcome {
	var p Pair
	var o outcome
	var firstLater uint64
	later := uint64(0)
	for _, sp := range pts {
		if later == 0 || sp.p.Start > later {
			later = max(later, sp.p.Start)
		}
	}
	for _, sp := range pts {
		if sp.p.Start == later && firstLater == 0 {
			firstLater = sp.p.Time
		}
		before := p.Class()
		p.Add(shape, sp.p)
		o.points++
		if p.Class() != before {
			o.seconds = float64(int64(p.Evidence().Decided)-int64(firstLater)) / 1e9
			o.decidedPoints = o.points
			if o.class == ClassUndecided {
				o.class = p.Class() // the first decision
			}
			if p.Class() == ClassPeer {
				o.everPeer, o.part = true, p.Evidence().Part
				return o
			}
		}
	}
	if o.class == ClassUndecided {
		o.class = p.Class()
	}
	return o
}

// stats is a median and a worst.
func stats(xs []float64) (median, worst float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

const simRuns = 200

// TestPairCopyNeverPeer: a second reader that joined later, on every kind
// of stream and with its exporter dropping intervals or its sums dipping by
// an ulp, is never called a peer; it is called a copy once both moved.
func TestPairCopyNeverPeer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hist  bool
		rate  float64
		mut   func(e, l *reader)
		copyS float64 // the most seconds a copy decision may take
	}{
		{name: "sum", rate: 10},
		{name: "sum/slow", rate: 1},
		{name: "histogram", hist: true, rate: 10},
		{name: "histogram/dips", hist: true, rate: 10, mut: func(e, l *reader) { e.dips, l.dips = true, true }},
		{name: "sum/copy_drops_one_interval", rate: 10, mut: func(_, l *reader) { l.drop = map[int]bool{3: true} }},
		{name: "sum/first_drops_one_interval", rate: 10, mut: func(e, _ *reader) { e.drop = map[int]bool{8: true} }},
		{name: "histogram/same_phase", hist: true, rate: 10, mut: func(e, l *reader) { l.first = e.first + math.Ceil(l.join-e.first) }},
		// An SDK that reports each interval's min and max on a cumulative
		// histogram: the extremes are not evidence then.
		{name: "histogram/interval_minmax", hist: true, rate: 10, mut: func(e, l *reader) { e.intervalMinMax, l.intervalMinMax = true, true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape := monoSum
			if tc.hist {
				shape = histogram
			}
			var secsToCopy, pointsToCopy []float64
			for run := range simRuns {
				r := rand.New(rand.NewPCG(uint64(run), 7))
				src := poisson(r, tc.rate, 0, 60)
				join := 3 + 4*r.Float64()
				e := reader{src: src, join: 0, first: r.Float64(), iv: 1}
				l := reader{src: src, join: join, first: join + r.Float64(), iv: 1}
				if tc.mut != nil {
					tc.mut(&e, &l)
				}
				o := judgePair(shape, merge(e.points(60, tc.hist), l.points(60, tc.hist)))
				if o.everPeer {
					t.Fatalf("run %d: a copy called a peer", run)
				}
				if o.class == ClassCopy {
					secsToCopy = append(secsToCopy, o.seconds)
					pointsToCopy = append(pointsToCopy, float64(o.decidedPoints))
				}
			}
			if len(secsToCopy) < simRuns*9/10 {
				t.Errorf("%d of %d copies decided within 60 s", len(secsToCopy), simRuns)
			}
			m, w := stats(secsToCopy)
			pm, pw := stats(pointsToCopy)
			t.Logf("copy decided in %d/%d runs within 60 s: seconds median %.1f worst %.1f; points median %.0f worst %.0f", len(secsToCopy), simRuns, m, w, pm, pw)
		})
	}
}

// TestPairPeers: processes sharing one identity are called peers, in the
// hard cases too; none is called a copy first, and the time it takes is
// logged.
func TestPairPeers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hist         bool
		rateE, rateL float64
		mut          func(r *rand.Rand, e, l *reader, se, sl **source)
		within       float64 // every peer decided within this many seconds
	}{
		{name: "sum/different_rates", rateE: 10, rateL: 3, within: 20},
		{name: "sum/same_rate", rateE: 10, rateL: 10, within: 60},
		{name: "histogram/same_rate", hist: true, rateE: 10, rateL: 10, within: 20},
		{name: "sum/slow_same_rate", rateE: 1, rateL: 1, within: 60},
		{name: "sum/peer_idle_20s", rateE: 10, rateL: 10, within: 20, mut: func(_ *rand.Rand, _, _ *reader, _, sl **source) { *sl = (*sl).idle(0, 20) }},
		{name: "sum/clocks_differ_2s", rateE: 10, rateL: 10, within: 60, mut: func(_ *rand.Rand, _, l *reader, _, _ **source) { l.skew = 2 }},
		{name: "sum/clocks_differ_-2s", rateE: 10, rateL: 10, within: 60, mut: func(_ *rand.Rand, _, l *reader, _, _ **source) { l.skew = -2 }},
		{name: "histogram/same_phase_same_rate", hist: true, rateE: 10, rateL: 10, within: 20, mut: func(_ *rand.Rand, e, l *reader, _, _ **source) { l.first = e.first + 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape := monoSum
			if tc.hist {
				shape = histogram
			}
			var secsToPeer, pointsToPeer []float64
			calledCopy := 0
			for run := range simRuns {
				r := rand.New(rand.NewPCG(uint64(run), 11))
				se, sl := poisson(r, tc.rateE, 0, 90), poisson(r, tc.rateL, 0, 90)
				startL := 0.001 + 0.01*r.Float64() // pre-fork workers start milliseconds apart
				e := reader{join: 0, first: r.Float64(), iv: 1}
				l := reader{join: startL, first: startL + r.Float64(), iv: 1}
				if tc.mut != nil {
					tc.mut(r, &e, &l, &se, &sl)
				}
				e.src, l.src = se, sl
				o := judgePair(shape, merge(e.points(90, tc.hist), l.points(90, tc.hist)))
				if o.class == ClassCopy {
					calledCopy++
				}
				if !o.everPeer {
					t.Errorf("run %d: peers not told apart in 90 s (class %v)", run, o.class)
					continue
				}
				secsToPeer = append(secsToPeer, o.seconds)
				pointsToPeer = append(pointsToPeer, float64(o.decidedPoints))
			}
			m, w := stats(secsToPeer)
			pm, pw := stats(pointsToPeer)
			if w > tc.within {
				t.Errorf("worst %.1f s to tell peers apart, want at most %.0f", w, tc.within)
			}
			t.Logf("peer decided in %d/%d runs: seconds median %.1f worst %.1f; points median %.0f worst %.0f; called copy first: %d", len(secsToPeer), simRuns, m, w, pm, pw, calledCopy)
		})
	}
}

// TestPairRules: each evidence rule on hand-made points.
func TestPairRules(t *testing.T) {
	type step struct {
		start, time, value float64
		want               Class
	}
	for _, tc := range []struct {
		name  string
		shape Shape
		steps []step
	}{
		{"the bracketing bounds of a copy stay consistent", monoSum, []step{
			{100, 110, 10, ClassUndecided}, // E
			{125, 135, 3, ClassUndecided},  // L: c ≥ 10-3 = 7
			{100, 140, 40, ClassUndecided}, // c ≤ 40-3 = 37
			{125, 145, 8, ClassUndecided},  // c ≥ 32
			{100, 150, 50, ClassUndecided}, // c ≤ 42
			{125, 155, 13, ClassUndecided}, // c ≥ 37: [37, 37]
			{100, 160, 52, ClassUndecided}, // c ≤ 39
			{100, 170, 70, ClassUndecided}, // c ≤ 57: still [37, 37]
			{125, 175, 20, ClassPeer},      // c ≥ 50 > 37
		}},
		{"a later writer above the earlier one: peer at once (c ≥ 0)", monoSum, []step{
			{103, 108, 50, ClassUndecided},
			{100, 110, 10, ClassPeer}, // c ≤ 10-50 < 0
		}},
		{"both idle: nothing decided", monoSum, []step{
			{100, 110, 10, ClassUndecided}, {105, 111, 4, ClassUndecided},
			{100, 120, 10, ClassUndecided}, {105, 121, 4, ClassUndecided},
			{100, 130, 10, ClassUndecided}, {105, 131, 4, ClassUndecided},
		}},
		{"one idle while the other moves: peer", monoSum, []step{
			{100, 110, 10, ClassUndecided}, {105, 111, 4, ClassUndecided}, // c ≥ 6
			{100, 120, 10, ClassUndecided}, // c ≤ 6
			{105, 121, 4, ClassUndecided},  // c ≥ 6
			{100, 130, 20, ClassUndecided}, // c ≤ 16
			{105, 131, 4, ClassPeer},       // c ≥ 16 > 6
		}},
		{"points closer than TimeSlack bound nothing", monoSum, []step{
			{100, 110, 10, ClassUndecided}, {105, 110.01, 50, ClassUndecided},
		}},
		{"an UpDownCounter gives no evidence", upDown, []step{
			{103, 108, 50, ClassUndecided}, {100, 110, 10, ClassUndecided},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pair
			for i, s := range tc.steps {
				p.Add(tc.shape, Point{Start: secs(s.start), Time: secs(s.time), Value: s.value})
				if got := p.Class(); got != s.want {
					t.Fatalf("step %d: class %v, want %v (%v)", i, got, s.want, p.Evidence())
				}
			}
		})
	}
}

// TestPairBucketsDecide: equal counts and sums, different bucket shares.
func TestPairBucketsDecide(t *testing.T) {
	h := func(start, tm float64, count uint64, b ...uint64) Point {
		bc := pcommon.NewUInt64Slice()
		bc.FromRaw(b)
		return Point{Start: secs(start), Time: secs(tm), Value: float64(count), Sum: float64(count), HasSum: true, Buckets: bc, HasBuckets: true, Layout: 7}
	}
	var p Pair
	for _, pt := range []Point{
		h(100, 110, 10, 5, 5, 0, 0),
		h(100.001, 111, 10, 0, 0, 5, 5),
		h(100, 112, 20, 10, 10, 0, 0), // buckets 2, 3: c ≤ 0-5 < 0
	} {
		p.Add(histogram, pt)
	}
	if e := p.Evidence(); e.Class != ClassPeer || e.Part != "bucket group 3 of 4" {
		t.Fatalf("evidence %v, want a peer by bucket group 3", e)
	}
}

func TestEvidenceString(t *testing.T) {
	var p Pair
	p.Add(monoSum, Point{Start: secs(103), Time: secs(108), Value: 50})
	p.Add(monoSum, Point{Start: secs(100), Time: secs(110), Value: 10})
	if got, want := p.Evidence().String(), "peer: value of the later writer is not the earlier one's less a constant: needs c ≥ 0 and c ≤ -40 (1 tests)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	_ = time.Second
}

// metronome makes one event every 100 ms from from to to, each value 20
// ms and a jitter of 0.5 ms on average: the end-to-end clients' 20 ms
// sleeps, all in one bucket.
func metronome(r *rand.Rand, from, to float64) *source {
	const every = 0.1
	s := &source{}
	for t := from + every; t < to; t += every {
		s.times = append(s.times, t)
		s.vals = append(s.vals, 0.02+r.ExpFloat64()/2000)
	}
	return s
}

// TestPairLockstepPeers: processes forked together that record the same
// number of events on the same beat, in one bucket, and export in the same
// phase (the end-to-end TestDefaultSharedIdentity): their counters are the
// same at every export and their sums stay within the bracketing bounds,
// so only the histograms' min and max tell them apart: their extremes
// alone (unless the earlier writer's cover the later's), and the joint
// test of count and sum, which bounds the measurements between two reads
// by them. Without min and max no such peer is decided; with them, every
// one by its last point, also when the earlier writer's first two
// measurements are just below and well above all the later's (dominated:
// its extremes cover the later's, only the joint test can decide).
func TestPairLockstepPeers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noMinMax  bool
		dominated bool
		phase     float64 // the later writer starts up to this much later (else 30 ms)
		life      float64
		least     int // peers decided of simRuns, at least
	}{
		{"minmax/6s", false, false, 0, 6, simRuns}, {"no_minmax/6s", true, false, 0, 6, 0},
		{"minmax/15s", false, false, 0, 15, simRuns}, {"no_minmax/15s", true, false, 0, 15, 0},
		{"dominated/6s", false, true, 0, 6, simRuns * 9 / 10}, {"dominated/15s", false, true, 0, 15, simRuns * 97 / 100},
		{"any_phase/6s", false, false, 0.5, 6, simRuns}, {"any_phase/dominated/6s", false, true, 0.5, 6, simRuns * 9 / 10},
		{"any_phase/dominated/15s", false, true, 0.5, 15, simRuns * 97 / 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decided, calledCopy := 0, 0
			by := map[string]int{}
			var secsToPeer []float64
			for run := range simRuns {
				r := rand.New(rand.NewPCG(uint64(run), 13))
				startL := 0.001 + 0.03*r.Float64()
				if tc.phase > 0 {
					startL = 0.001 + tc.phase*r.Float64()
				}
				src := metronome(r, 0, tc.life)
				if tc.dominated {
					src.times = append([]float64{0.01, 0.02}, src.times...)
					src.vals = append([]float64{0.0199, 0.026}, src.vals...) // past every one of L's but 1 in 160000
				}
				e := reader{src: src, join: 0, first: 0.5, iv: 0.5, noMinMax: tc.noMinMax}
				l := reader{src: metronome(r, startL, tc.life+startL), join: startL, first: startL + 0.5, iv: 0.5, noMinMax: tc.noMinMax}
				o := judgePair(histogram, merge(e.points(tc.life, true), l.points(tc.life+startL, true)))
				if o.class == ClassCopy {
					calledCopy++ // 30 tests passed, none tight enough to fail
				}
				if o.everPeer {
					decided++
					by[o.part]++
					secsToPeer = append(secsToPeer, o.seconds)
				}
			}
			m, w := stats(secsToPeer)
			t.Logf("decided %d/%d by the last points (by %v); seconds median %.1f worst %.1f; called a copy first: %d", decided, simRuns, by, m, w, calledCopy)
			if decided < tc.least {
				t.Errorf("%d of %d peers decided, want at least %d", decided, simRuns, tc.least)
			}
			if tc.dominated && by["min"]+by["max"] > 0 {
				t.Errorf("decided by the extremes %d times: the earlier writer's cover the later's, want none", by["min"]+by["max"])
			}
		})
	}
}

// TestPairJointDecides: two writers read 10 ms apart each second (the
// bracketing bounds only use the reads a second apart), one event each
// between reads, the later writer's extremes within the earlier's. A copy (the
// earlier writer's measurements from its third on) keeps a join count
// that fits; a peer whose sums differ from the earlier's by less than one
// measurement's spread has none left: peer by the count and sum together.
func TestPairJointDecides(t *testing.T) {
	eVals := []float64{0.010, 0.030, 0.021, 0.020, 0.022, 0.021, 0.020, 0.022, 0.021, 0.020}
	peerVals := []float64{0.021, 0.020, 0.022, 0.022, 0.020, 0.021, 0.022, 0.020, 0.020, 0.021}
	point := func(start, tm float64, vals []float64) Point {
		p := Point{Start: secs(start), Time: secs(tm), HasSum: true, HasMinMax: true, Min: math.Inf(1), Max: math.Inf(-1)}
		for _, v := range vals {
			p.Value++
			p.Sum += v
			p.Min, p.Max = min(p.Min, v), max(p.Max, v)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		l    func(n int) []float64 // the later writer's measurements by the n-th read
		want Class
	}{
		{"copy", func(n int) []float64 { return eVals[2:n] }, ClassUndecided},
		{"peer", func(n int) []float64 { return peerVals[2:n] }, ClassPeer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pair
			for n := 3; n <= len(eVals); n++ {
				tm := 100 + float64(n)
				p.Add(histogram, point(100, tm, eVals[:n]))
				p.Add(histogram, point(100.5, tm+0.01, tc.l(n)))
			}
			e := p.Evidence()
			if e.Class != tc.want || tc.want == ClassPeer && e.Part != "count and sum" {
				t.Fatalf("evidence %v, want %v (by count and sum)", e, tc.want)
			}
			if tc.want == ClassPeer && !strings.Contains(e.String(), "fits the later writer's count and sum together") {
				t.Errorf("evidence line %q names no joint test", e.String())
			}
		})
	}
}
