package audit

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

// at builds samples one second apart starting at t0 (ms).
func at(t0 int64, values ...float64) []Sample {
	out := make([]Sample, len(values))
	for i, v := range values {
		out[i] = Sample{T: t0 + int64(i)*1000, V: v}
	}
	return out
}

func approx(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.IsNaN(want) {
		if !math.IsNaN(got) {
			t.Errorf("%s = %v, want NaN", what, got)
		}
		return
	}
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestDeinterleave(t *testing.T) {
	cases := []struct {
		name     string
		samples  []Sample
		assign   []int32
		chains   []Chain // Samples, First, Last only
		returns  int
		dominant int
	}{
		{
			// The research's measurement: two SDK readers, the second
			// started later with fresh state, alternating in one series.
			name:    "interleaved pair",
			samples: at(1000, 29, 9, 40, 15, 40, 15),
			assign:  []int32{0, 1, 0, 1, 0, 1},
			chains: []Chain{
				{Samples: 3, First: Sample{1000, 29}, Last: Sample{5000, 40}},
				{Samples: 3, First: Sample{2000, 9}, Last: Sample{6000, 15}},
			},
			returns:  4,
			dominant: 0, // equal samples and length: the higher one
		},
		{
			// A restart whose new counter grows past the old level while
			// the old chain is still open: prediction keeps it on its own
			// chain.
			name:    "restart growing past the old level",
			samples: at(0, 10, 20, 30, 40, 2, 12, 22, 32, 42, 52),
			assign:  []int32{0, 0, 0, 0, 1, 1, 1, 1, 1, 1},
			chains: []Chain{
				{Samples: 4, First: Sample{0, 10}, Last: Sample{3000, 40}},
				{Samples: 6, First: Sample{4000, 2}, Last: Sample{9000, 52}},
			},
			returns:  0,
			dominant: 1,
		},
		{
			name:     "clean",
			samples:  at(0, 1, 2, 2, 3),
			assign:   []int32{0, 0, 0, 0},
			chains:   []Chain{{Samples: 4, First: Sample{0, 1}, Last: Sample{3000, 3}}},
			dominant: 0,
		},
		{
			// Two independent writers whose values cross (an identity
			// collision): each keeps its own chain.
			name:    "crossing writers",
			samples: at(0, 100, 50, 101, 70, 102, 90, 103, 110, 104, 130),
			assign:  []int32{0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
			chains: []Chain{
				{Samples: 5, First: Sample{0, 100}, Last: Sample{8000, 104}},
				{Samples: 5, First: Sample{1000, 50}, Last: Sample{9000, 130}},
			},
			returns:  8,
			dominant: 1, // equal samples and length: the higher last value
		},
		{
			// A NaN belongs to no chain and does not break one.
			name:     "NaN",
			samples:  at(0, 1, math.NaN(), 2, 3),
			assign:   []int32{0, -1, 0, 0},
			chains:   []Chain{{Samples: 3, First: Sample{0, 1}, Last: Sample{3000, 3}}},
			dominant: 0,
		},
		{
			// A 10-minute gap closes the chain; the next sample continues it
			// and reopens it rather than starting a writer.
			name:     "gap",
			samples:  []Sample{{0, 1}, {60_000, 2}, {660_000, 5}, {720_000, 6}},
			assign:   []int32{0, 0, 0, 0},
			chains:   []Chain{{Samples: 4, First: Sample{0, 1}, Last: Sample{720_000, 6}}},
			dominant: 0,
		},
		{
			// After a gap both interleaved writers come back to their own
			// chains.
			name:    "interleaved across a gap",
			samples: []Sample{{0, 100}, {1000, 10}, {2000, 101}, {3000, 11}, {900_000, 150}, {901_000, 60}, {902_000, 151}},
			assign:  []int32{0, 1, 0, 1, 0, 1, 0},
			chains: []Chain{
				{Samples: 4, First: Sample{0, 100}, Last: Sample{902_000, 151}},
				{Samples: 3, First: Sample{1000, 10}, Last: Sample{901_000, 60}},
			},
			returns:  5,
			dominant: 0,
		},
		{
			name:     "empty",
			samples:  nil,
			assign:   []int32{},
			dominant: -1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Deinterleave(c.samples, DeinterleaveOptions{})
			if !slices.Equal(d.Assign, c.assign) {
				t.Errorf("assign = %v, want %v", d.Assign, c.assign)
			}
			if len(d.Chains) != len(c.chains) {
				t.Fatalf("%d chains, want %d: %+v", len(d.Chains), len(c.chains), d.Chains)
			}
			for i, want := range c.chains {
				got := d.Chains[i]
				if got.Samples != want.Samples || got.First != want.First || got.Last != want.Last {
					t.Errorf("chain %d = %d samples %v..%v, want %d samples %v..%v", i, got.Samples, got.First, got.Last, want.Samples, want.First, want.Last)
				}
			}
			if d.Returns != c.returns {
				t.Errorf("returns = %d, want %d", d.Returns, c.returns)
			}
			if d.Dominant != c.dominant {
				t.Errorf("dominant = %d, want %d", d.Dominant, c.dominant)
			}
		})
	}
}

func TestDeinterleaveMaxChains(t *testing.T) {
	// Every sample below the last: with room for 2 open chains, the third
	// closes the one written longest ago.
	d := Deinterleave(at(0, 50, 40, 30, 31), DeinterleaveOptions{MaxChains: 2})
	if want := []int32{0, 1, 2, 2}; !slices.Equal(d.Assign, want) {
		t.Errorf("assign = %v, want %v", d.Assign, want)
	}
	if d.Chains[0].open || !d.Chains[1].open || !d.Chains[2].open {
		t.Errorf("open = %v %v %v, want false true true", d.Chains[0].open, d.Chains[1].open, d.Chains[2].open)
	}
}

func TestAnalyzeClasses(t *testing.T) {
	cases := []struct {
		name            string
		samples         []Sample
		start, end      int64
		class           Class
		resets          int
		chains, returns int
		restarts, drops int
		naive, dominant float64
		dominantSamples int
	}{
		{
			// 29 9 40 15 40 15: resets at 9, 15, 15. increase() adds 29,
			// 40 and 40 to 15-29: 95 over 5 s, extrapolated by 1 s at each
			// end (within 1.1 intervals): 95 * 7/5. The dominant chain
			// 29 40 40: 11 over 4 s, extrapolated by 1 s and 2 s: 11 * 7/4.
			name:    "interleaved",
			samples: at(1000, 29, 9, 40, 15, 40, 15), start: 0, end: 7000,
			// The fall to 9 started the second chain (a drop); the other two
			// resets were returns.
			class: ClassInterleaved, resets: 3, chains: 2, returns: 4, drops: 1,
			naive: 133, dominant: 19.25, dominantSamples: 3,
		},
		{
			// 10 20 30 40 2 12 22 32 42 52: one reset to 2 (<= 4).
			// increase(): 52-10+40 = 82 over 9 s, +1 s each end: 82*11/9.
			// The dominant chain 2..52 (6 samples): 50 over 5 s, towards
			// the start only to its zero point 0.2 s before, +1 s at the
			// end: 50*6.2/5.
			name:    "restart",
			samples: at(1000, 10, 20, 30, 40, 2, 12, 22, 32, 42, 52), start: 0, end: 11000,
			class: ClassRestart, resets: 1, chains: 2, restarts: 1,
			naive: 82.0 * 11 / 9, dominant: 62, dominantSamples: 6,
		},
		{
			// 100 110 120 60 70 80: falls to 60, half the old level: drop.
			// increase(): 100 over 5 s, +1 s each end: 140. The dominant
			// chain (3 samples each, as long; the higher) 100 110 120: 20
			// over 2 s, +1 s at the start, half an interval at the end
			// (4 s away): 20*3.5/2.
			name:    "drop",
			samples: at(1000, 100, 110, 120, 60, 70, 80), start: 0, end: 7000,
			class: ClassDrop, resets: 1, chains: 2, drops: 1,
			naive: 140, dominant: 35, dominantSamples: 3,
		},
		{
			// 1..5 every 10 s in (0, 60 s]: 4 over 40 s; the zero point is
			// 10 s before the first sample, as is the range start: 4*60/40.
			name:    "clean",
			samples: []Sample{{10_000, 1}, {20_000, 2}, {30_000, 3}, {40_000, 4}, {50_000, 5}}, start: 0, end: 60_000,
			class: ClassClean, chains: 1,
			naive: 6, dominant: 6, dominantSamples: 5,
		},
		{
			name:    "one sample",
			samples: at(1000, 5), start: 0, end: 2000,
			class: ClassClean, chains: 1,
			naive: math.NaN(), dominant: math.NaN(), dominantSamples: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Analyze(c.samples, c.start, c.end, DeinterleaveOptions{})
			if a.Class != c.class || a.Resets != c.resets || a.Chains != c.chains || a.Returns != c.returns ||
				a.RestartResets != c.restarts || a.DropResets != c.drops || a.DominantSamples != c.dominantSamples {
				t.Errorf("got class %s resets %d chains %d returns %d restarts %d drops %d dominant samples %d;\nwant class %s resets %d chains %d returns %d restarts %d drops %d dominant samples %d",
					a.Class, a.Resets, a.Chains, a.Returns, a.RestartResets, a.DropResets, a.DominantSamples,
					c.class, c.resets, c.chains, c.returns, c.restarts, c.drops, c.dominantSamples)
			}
			approx(t, "naive increase", a.NaiveIncrease, c.naive)
			approx(t, "dominant increase", a.DominantIncrease, c.dominant)
		})
	}
}

func TestIncreaseExtrapolation(t *testing.T) {
	cases := []struct {
		name       string
		samples    []Sample
		start, end int64
		want       float64
	}{
		{
			// A series that starts inside the range: extrapolated towards
			// the start only as far as the counter's zero point (50 s
			// before), which is beyond 1.1 intervals, so by half an
			// interval: 1 * (10 + 5 + 10) / 10.
			name:    "starts inside the range",
			samples: []Sample{{100_000, 5}, {110_000, 6}}, start: 0, end: 120_000,
			want: 2.5,
		},
		{
			// A reset adds the value before it: 15-10+20 = 25 over 30 s,
			// extrapolated 10 s at each end.
			name:    "reset",
			samples: []Sample{{10_000, 10}, {20_000, 20}, {30_000, 5}, {40_000, 15}}, start: 0, end: 50_000,
			want: 25.0 * 50 / 30,
		},
		{
			// The counter's zero point is 2 s before the first sample, closer
			// than the range start.
			name:    "zero point",
			samples: []Sample{{10_000, 2}, {20_000, 12}}, start: 0, end: 20_000,
			want: 10.0 * 12 / 10,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			approx(t, "increase", Increase(c.samples, c.start, c.end), c.want)
		})
	}
}

func TestResultRanking(t *testing.T) {
	mk := func(series string, class Class, factor float64, resets int) *SeriesResult {
		return &SeriesResult{Series: series, Class: class, Factor: Float(factor), Resets: resets}
	}
	rs := []*SeriesResult{
		mk("restart", ClassRestart, math.NaN(), 9),
		mk("mild", ClassInterleaved, 1.5, 40),
		mk("drop", ClassDrop, math.NaN(), 1),
		mk("unknown", ClassInterleaved, math.NaN(), 100),
		mk("bad", ClassInterleaved, 7, 3),
		mk("worst", ClassInterleaved, math.Inf(1), 1),
	}
	slices.SortFunc(rs, worse)
	var got []string
	for _, r := range rs {
		got = append(got, r.Series)
	}
	if want := []string{"worst", "bad", "mild", "unknown", "drop", "restart"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestThinKeepsDips(t *testing.T) {
	var ss []Sample
	for i := range 1000 {
		v := float64(i)
		if i == 501 {
			v = 0 // one dip in the middle
		}
		ss = append(ss, Sample{T: int64(i) * 1000, V: v})
	}
	out := thin(ss, 0, 1_000_000, 100)
	if len(out) > 100 {
		t.Fatalf("%d points, want at most 100", len(out))
	}
	if !slices.ContainsFunc(out, func(s Sample) bool { return s.V == 0 && s.T == 501_000 }) {
		t.Errorf("the dip at 501 s was thinned away")
	}
	if !slices.IsSortedFunc(out, func(a, b Sample) int { return int(a.T - b.T) }) {
		t.Errorf("thinned samples out of time order")
	}
	_ = time.Second
}

// interleave merges two writers' samples of one series in time order: the
// first every second from 1 s, the second half a second later from from.
func interleave(n int, from int, first, second func(t float64) float64) []Sample {
	var out []Sample
	for i := 1; i <= n; i++ {
		out = append(out, Sample{T: int64(i) * 1000, V: first(float64(i))})
		if i >= from {
			out = append(out, Sample{T: int64(i)*1000 + 500, V: second(float64(i) + 0.5)})
		}
	}
	return out
}

// TestJudgeChains: the chains of an interleaved series are judged as the
// gateway judges writers: a chain that is the dominant one's values less
// a constant is a copy (a second reader in one process), one that is not
// is a peer (another process).
func TestJudgeChains(t *testing.T) {
	// Float sums near 333333 per event, summed by two readers from
	// different starts: the copy's sum is the first's less a constant only
	// up to rounding in the last digits.
	val := func(i int) float64 { return 333333.3333333333 + float64(i%7)/3 }
	sumTo := func(from, to int) float64 {
		s := 0.0
		for i := from; i < to; i++ {
			s += val(i)
		}
		return s
	}
	cases := []struct {
		name          string
		first, second func(t float64) float64
		want          streams.Class
	}{
		// A second reader joined at 2.5 s, counting 10 a second.
		{"copy", func(t float64) float64 { return 10 * t }, func(t float64) float64 { return 10*t - 25 }, streams.ClassCopy},
		// Another process from 2.5 s, counting 5 a second.
		{"peer", func(t float64) float64 { return 10 * t }, func(t float64) float64 { return 5 * (t - 2.5) }, streams.ClassPeer},
		// Another process counting 12 a second, started 4 s ago: its
		// chain ends higher, and is the one tested against.
		{"peer above", func(t float64) float64 { return 10 * t }, func(t float64) float64 { return 12*t - 30 }, streams.ClassPeer},
		// A histogram's _sum: 10 events a second, the second reader from
		// event 25.
		{"copy of a float sum", func(t float64) float64 { return sumTo(0, int(10*t)) }, func(t float64) float64 { return sumTo(25, int(10*t)) }, streams.ClassCopy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			samples := interleave(40, 3, c.first, c.second)
			a := Analyze(samples, 0, 41_000, DeinterleaveOptions{})
			t.Logf("%s, %d chains: %s", a.Class, a.Chains, a.Evidence)
			if a.Class != ClassInterleaved || a.Chains != 2 {
				t.Fatalf("class %s with %d chains, want interleaved with 2", a.Class, a.Chains)
			}
			if a.Writers != c.want || !strings.HasPrefix(a.Evidence, c.want.String()+": ") {
				t.Errorf("writers %s (%s), want %s", a.Writers, a.Evidence, c.want)
			}
			r := resultOf("s", nil, a)
			if r.Writers != c.want.String() || r.Cause != c.want.Cause() || r.Evidence != a.Evidence {
				t.Errorf("result writers %q cause %q evidence %q", r.Writers, r.Cause, r.Evidence)
			}
		})
	}
	// Too few samples decide nothing.
	a := Analyze(interleave(4, 3, func(t float64) float64 { return 10 * t }, func(t float64) float64 { return 10*t - 25 }), 0, 5000, DeinterleaveOptions{})
	if a.Class != ClassInterleaved || a.Writers != streams.ClassUndecided {
		t.Errorf("4 s: class %s, writers %s (%s), want interleaved, undecided", a.Class, a.Writers, a.Evidence)
	}
	// A restart is not judged.
	if a := Analyze(at(1000, 10, 20, 30, 2, 12, 22), 0, 7000, DeinterleaveOptions{}); a.Evidence != "" {
		t.Errorf("a restart judged: %s", a.Evidence)
	}
}

// TestJudgeChainsSparse: a copy or a peer whose counter moves in sparse
// steps (a histogram bucket most measurements miss) comes close to the
// other writer's, so that a sample's chain can be a guess. A copy is
// never judged a peer, nor a peer a copy: samples another chain fits
// almost as well are no evidence, and each stretch between them is judged
// on its own, its higher chain the earlier writer (undecided otherwise).
// Logs how many of each are decided.
func TestJudgeChainsSparse(t *testing.T) {
	for _, peer := range []bool{false, true} {
		for _, p := range []float64{0.9, 0.5, 0.3, 0.15} {
			decided := 0
			for run := range 300 {
				r := rand.New(rand.NewPCG(uint64(run), 3))
				// The first writer's events every 100 ms, each counted with
				// probability p; a copy counts the same ones from its join,
				// a peer its own, every 130 ms.
				var ev, evPeer []float64
				for tm := 0.1; tm < 15; tm += 0.1 {
					if r.Float64() < p {
						ev = append(ev, tm+r.Float64()*0.02)
					}
				}
				join := 1.5 + r.Float64()*0.3
				for tm := join + 0.05; tm < 15; tm += 0.13 {
					if r.Float64() < p {
						evPeer = append(evPeer, tm+r.Float64()*0.02)
					}
				}
				count := func(ev []float64, from, to float64) float64 {
					n := 0.0
					for _, e := range ev {
						if e > from && e <= to {
							n++
						}
					}
					return n
				}
				// Both export every 250 ms, in random phases.
				var s []Sample
				for tm := r.Float64() * 0.25; tm < 15; tm += 0.25 {
					s = append(s, Sample{T: int64(tm * 1000), V: count(ev, 0, tm)})
				}
				for tm := join + r.Float64()*0.25; tm < 15; tm += 0.25 {
					v := count(ev, join, tm)
					if peer {
						v = count(evPeer, 0, tm)
					}
					s = append(s, Sample{T: int64(tm * 1000), V: v})
				}
				sort.SliceStable(s, func(i, j int) bool { return s[i].T < s[j].T })
				a := Analyze(s, 0, 15000, DeinterleaveOptions{})
				if a.Class != ClassInterleaved {
					continue
				}
				wrong := streams.ClassPeer
				if peer {
					wrong = streams.ClassCopy
				}
				if a.Writers == wrong {
					t.Errorf("peer %v, p %.2f, run %d: judged %s (%s)", peer, p, run, a.Writers, a.Evidence)
				}
				if a.Writers != streams.ClassUndecided {
					decided++
				}
			}
			t.Logf("peer %v, events counted with p %.2f: %d of 300 decided", peer, p, decided)
		}
	}
}
