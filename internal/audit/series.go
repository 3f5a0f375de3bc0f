package audit

import (
	"math"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

// Sample is one stored sample: a timestamp in milliseconds since the epoch
// (Prometheus's resolution) and a value.
type Sample struct {
	T int64
	V float64
}

// Class is what the resets of a series look like.
type Class string

// The classes, worst first.
const (
	// ClassInterleaved: two or more writers of one series whose samples
	// alternate. The series splits into monotonic chains and some chain
	// resumes after another chain's sample: A B A. Every step from the
	// higher chain to the lower is a reset to PromQL, and increase() adds
	// the whole previous value each time.
	ClassInterleaved Class = "interleaved"
	// ClassDrop: the series fell, not to near zero, and the earlier level
	// never came back: a change of writer (failover, a replica taking over)
	// or a restart whose first sample came late. Not conclusive.
	ClassDrop Class = "drop"
	// ClassRestart: every reset falls to near zero (at most NearZeroFraction
	// of the value before it) and the earlier chain never resumes: a genuine
	// counter reset, which increase() handles correctly.
	ClassRestart Class = "restart"
	// ClassClean: no resets.
	ClassClean Class = "clean"
)

// rank orders classes worst first.
func (c Class) rank() int {
	switch c {
	case ClassInterleaved:
		return 0
	case ClassDrop:
		return 1
	case ClassRestart:
		return 2
	}
	return 3
}

// NearZeroFraction is the largest fraction of the value before a reset that
// the value after it may keep for the reset to count as a fall to near zero
// (a restart).
const NearZeroFraction = 0.1

// Defaults of DeinterleaveOptions.
const (
	// DefaultStaleAfter is Prometheus's default lookback delta: a chain not
	// written for this long is closed and cannot resume.
	DefaultStaleAfter = 5 * time.Minute
	// DefaultMaxChains bounds the chains open at once; the one written
	// longest ago is closed to make room.
	DefaultMaxChains = 16
)

// AmbiguousRatio: a sample that another chain fits (does not decrease,
// and lies off its extrapolation) by less than this many times the
// distance from the chain it joined, plus one count, is ambiguous.
const AmbiguousRatio = 3

// candidateChains bounds the chains a sample is compared with: the ones
// created last. Older chains keep their samples but take no more.
const candidateChains = 64

// DeinterleaveOptions tune Deinterleave. The zero value uses the defaults.
type DeinterleaveOptions struct {
	StaleAfter time.Duration
	MaxChains  int
}

func (o DeinterleaveOptions) withDefaults() DeinterleaveOptions {
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.MaxChains <= 0 {
		o.MaxChains = DefaultMaxChains
	}
	return o
}

// Chain is one monotonic (non-decreasing) run of samples picked out of a
// series.
type Chain struct {
	Samples int
	First   Sample
	Last    Sample
	open    bool
}

// predict extrapolates the chain to time t at its average rate.
func (c *Chain) predict(t int64) float64 {
	if c.Last.T <= c.First.T {
		return c.Last.V
	}
	rate := (c.Last.V - c.First.V) / float64(c.Last.T-c.First.T)
	return c.Last.V + rate*float64(t-c.Last.T)
}

// Deinterleaved is a series split into monotonic chains.
type Deinterleaved struct {
	Chains []Chain
	// Assign gives each sample's chain index; -1 for NaN samples, which
	// belong to no chain.
	Assign []int32
	// Ambiguous marks the samples that another open chain fits almost as
	// well as the one they joined (AmbiguousRatio): their chain is a
	// guess, and JudgeChains does not take them for evidence.
	Ambiguous []bool
	// Returns counts samples that went back to a chain after a sample of
	// another chain: the signature of interleaved writers.
	Returns int
	// Dominant is the index of the chain with the most samples (ties: the
	// longest, then the highest); -1 without chains.
	Dominant int
}

// Deinterleave splits samples (in time order) into monotonic chains. Each
// sample joins the open chain it does not decrease whose extrapolated value
// at the sample's time is nearest (ties: the chain written last, then the
// first created). A chain not written for StaleAfter is closed, so a
// restarted counter that later grows past its old level is not taken for
// the old writer coming back; a sample that fits no open chain reopens the
// closed one it does not decrease whose last value is nearest (a gap in
// scraping or pushing, not a new writer), and otherwise starts a new chain.
func Deinterleave(samples []Sample, opts DeinterleaveOptions) Deinterleaved {
	opts = opts.withDefaults()
	stale := opts.StaleAfter.Milliseconds()
	d := Deinterleaved{Assign: make([]int32, len(samples)), Ambiguous: make([]bool, len(samples)), Dominant: -1}
	prev := int32(-1)
	open := 0
	// pick returns the nearest chain among the open (or the closed) ones
	// that s does not decrease, closing open chains that went stale, and
	// how many there were.
	pick := func(s Sample, wantOpen bool) (int, bool) {
		best, bestErr, secondErr := -1, math.Inf(1), math.Inf(1)
		for ci := max(0, len(d.Chains)-candidateChains); ci < len(d.Chains); ci++ {
			c := &d.Chains[ci]
			if c.open && s.T-c.Last.T > stale {
				c.open = false
				open--
			}
			if c.open != wantOpen || s.V < c.Last.V {
				continue
			}
			// Open chains: distance from the chain's extrapolation. Closed
			// ones (after a gap, where extrapolating is guesswork): distance
			// from the chain's last value.
			e := s.V - c.Last.V
			if wantOpen {
				e = math.Abs(s.V - c.predict(s.T))
			}
			if best < 0 || e < bestErr || (e == bestErr && c.Last.T > d.Chains[best].Last.T) {
				best, bestErr, secondErr = ci, e, bestErr
			} else if e < secondErr {
				secondErr = e
			}
		}
		return best, best >= 0 && !math.IsInf(secondErr, 1) && secondErr <= AmbiguousRatio*bestErr+1
	}
	// makeRoom closes the open chain written longest ago when MaxChains
	// are open.
	makeRoom := func() {
		if open < opts.MaxChains {
			return
		}
		oldest := -1
		for ci := range d.Chains {
			if d.Chains[ci].open && (oldest < 0 || d.Chains[ci].Last.T < d.Chains[oldest].Last.T) {
				oldest = ci
			}
		}
		d.Chains[oldest].open = false
		open--
	}
	for i, s := range samples {
		if math.IsNaN(s.V) {
			d.Assign[i] = -1
			continue
		}
		best, ambiguous := pick(s, true)
		d.Ambiguous[i] = ambiguous
		if best < 0 {
			// After a gap: a closed chain the sample continues.
			if best, ambiguous = pick(s, false); best >= 0 {
				d.Ambiguous[i] = ambiguous
				makeRoom()
				d.Chains[best].open = true
				open++
			}
		}
		if best < 0 {
			makeRoom()
			d.Chains = append(d.Chains, Chain{First: s, Last: s, open: true})
			open++
			best = len(d.Chains) - 1
		} else if prev >= 0 && int32(best) != prev {
			d.Returns++
		}
		c := &d.Chains[best]
		c.Samples++
		c.Last = s
		d.Assign[i] = int32(best)
		prev = int32(best)
	}
	for ci := range d.Chains {
		c := &d.Chains[ci]
		if d.Dominant < 0 {
			d.Dominant = ci
			continue
		}
		b := &d.Chains[d.Dominant]
		switch {
		case c.Samples != b.Samples:
			if c.Samples > b.Samples {
				d.Dominant = ci
			}
		case c.Last.T-c.First.T != b.Last.T-b.First.T:
			if c.Last.T-c.First.T > b.Last.T-b.First.T {
				d.Dominant = ci
			}
		case c.Last.V > b.Last.V:
			d.Dominant = ci
		}
	}
	return d
}

// Analysis is what one series' samples say.
type Analysis struct {
	Samples int
	// Resets is what PromQL's resets() returns over the same samples.
	Resets int
	Class  Class
	Chains int
	// Returns counts samples that went back to an earlier chain.
	Returns int
	// RestartResets and DropResets split Resets that are not returns into
	// falls to near zero and other falls.
	RestartResets int
	DropResets    int
	// NaiveIncrease is what increase() over the range returns for the
	// stored samples; NaN with fewer than two samples.
	NaiveIncrease float64
	// DominantIncrease is the same computation over the dominant chain's
	// samples alone.
	DominantIncrease float64
	DominantSamples  int
	// Writers is, for interleaved series, the classifier's judgement
	// (internal/streams, the gateway's overlap: auto) of the chains
	// other than the dominant one, tested against it: a peer if any of
	// them is one, a copy if every one is, undecided otherwise (streams.Fold).
	// Evidence is the line of the chain that decided it.
	Writers  streams.Class
	Evidence string

	Split Deinterleaved
}

// Analyze reads one series' samples (in time order, all within the range
// (start, end], in milliseconds) as a counter.
func Analyze(samples []Sample, start, end int64, opts DeinterleaveOptions) Analysis {
	a := Analysis{Samples: len(samples)}
	a.Split = Deinterleave(samples, opts)
	a.Chains = len(a.Split.Chains)
	a.Returns = a.Split.Returns

	var rc streams.ResetCounter
	prev := math.NaN()
	next := int32(0) // the index the next new chain gets
	for i, s := range samples {
		c := a.Split.Assign[i]
		created := c >= 0 && c == next
		if created {
			next++
		}
		// A reset that started a new chain; the others went back to an
		// earlier chain (returns).
		if rc.Add(s.V) && created {
			if s.V <= 0 || s.V <= NearZeroFraction*prev {
				a.RestartResets++
			} else {
				a.DropResets++
			}
		}
		if !math.IsNaN(s.V) {
			prev = s.V
		}
	}
	a.Resets = rc.Resets()

	switch {
	case a.Resets == 0:
		a.Class = ClassClean
	case a.Returns > 0:
		a.Class = ClassInterleaved
	case a.DropResets > 0:
		a.Class = ClassDrop
	default:
		a.Class = ClassRestart
	}

	if a.Class == ClassInterleaved {
		a.Writers, a.Evidence = JudgeChains(samples, a.Split)
	}
	a.NaiveIncrease = Increase(samples, start, end)
	if a.Split.Dominant >= 0 {
		chain := make([]Sample, 0, a.Split.Chains[a.Split.Dominant].Samples)
		for i, s := range samples {
			if a.Split.Assign[i] == int32(a.Split.Dominant) {
				chain = append(chain, s)
			}
		}
		a.DominantSamples = len(chain)
		a.DominantIncrease = Increase(chain, start, end)
	} else {
		a.DominantIncrease = math.NaN()
	}
	return a
}

// Increase computes what Prometheus 2.x's increase() returns for a range
// selector evaluated at end whose window starts at start (milliseconds),
// over samples in time order inside the window: the difference between the
// last and first sample plus, at every decrease, the value before it; then
// extrapolated towards the window's edges (not past where the counter
// would be zero) when the first and last samples are within 1.1 average
// intervals of them, and by half an average interval otherwise. NaN with
// fewer than two samples, where PromQL returns nothing.
func Increase(samples []Sample, start, end int64) float64 {
	if len(samples) < 2 {
		return math.NaN()
	}
	first, last := samples[0], samples[len(samples)-1]
	result := last.V - first.V
	prev := first.V
	for _, s := range samples[1:] {
		if s.V < prev {
			result += prev
		}
		prev = s.V
	}
	durationToStart := float64(first.T-start) / 1000
	durationToEnd := float64(end-last.T) / 1000
	sampled := float64(last.T-first.T) / 1000
	avg := sampled / float64(len(samples)-1)
	if result > 0 && first.V >= 0 {
		durationToZero := sampled * (first.V / result)
		if durationToZero < durationToStart {
			durationToStart = durationToZero
		}
	}
	threshold := avg * 1.1
	interval := sampled
	if durationToStart < threshold {
		interval += durationToStart
	} else {
		interval += avg / 2
	}
	if durationToEnd < threshold {
		interval += durationToEnd
	} else {
		interval += avg / 2
	}
	return result * (interval / sampled)
}

// judgeStretch judges the samples at idx (of chains x and y) with a Pair:
// start 1 is the earlier writer, the chain whose last sample there is
// higher (a copy's values are below its original's), 2 the later.
func judgeStretch(samples []Sample, d Deinterleaved, idx []int, x, y int32) streams.Pair {
	var p streams.Pair
	var lastX, lastY float64
	for _, i := range idx {
		if d.Assign[i] == x {
			lastX = samples[i].V
		} else {
			lastY = samples[i].V
		}
	}
	hi := x
	if lastY > lastX {
		hi = y
	}
	for _, i := range idx {
		start := uint64(2)
		if d.Assign[i] == hi {
			start = 1
		}
		p.Add(counterShape, streams.Point{Start: start, Time: uint64(samples[i].T) * uint64(time.Millisecond), Value: samples[i].V})
	}
	return p
}

// stronger is the pair with the stronger verdict: a peer over a copy over
// an undecided one; of two undecided, the one with more tests.
func stronger(a, b streams.Pair) streams.Pair {
	switch {
	case a.Class() != b.Class():
		if a.Class() == streams.ClassPeer || a.Class() == streams.ClassCopy && b.Class() != streams.ClassPeer {
			return a
		}
		return b
	case a.Evidence().Tests >= b.Evidence().Tests:
		return a
	}
	return b
}

// counterShape is the shape of a counter series, for the classifier.
var counterShape = streams.NewShape(streams.KindSum, true, true)

// JudgeChains tests every chain of a de-interleaved series against the
// dominant one with the classifier the gateway uses (streams.Pair): is
// the chain the dominant writer's values less a constant (a copy: a
// second reader in one process), or not (a peer: another process writing
// the same series)? Of each two chains the one that ends higher is taken
// as the earlier writer, whose values a copy's are below. Prometheus keeps
// no start times, so the writers are only the chains the values form; a
// sample that could have joined more than one chain (Ambiguous) is not
// taken for evidence, since its chain is a guess and a copy's sample put
// in the original's chain would make it look like a peer.
func JudgeChains(samples []Sample, d Deinterleaved) (streams.Class, string) {
	if d.Dominant < 0 || len(d.Chains) < 2 {
		return streams.ClassUndecided, ""
	}
	var fold streams.Fold
	for ci := range d.Chains {
		if ci == d.Dominant || d.Chains[ci].Samples < 2 {
			continue
		}
		x, y := int32(d.Dominant), int32(ci)
		// The evidence runs over stretches in which each chain is one
		// writer for certain: an ambiguous sample may have swapped them,
		// so each stretch between two is judged on its own, with the chain
		// that ends higher in it as the earlier writer, and the series
		// takes the strongest verdict of its stretches.
		var best streams.Pair
		var stretch []int // sample indexes
		end := func() {
			best = stronger(best, judgeStretch(samples, d, stretch, x, y))
			stretch = stretch[:0]
		}
		for i := range samples {
			switch {
			case d.Assign[i] != x && d.Assign[i] != y:
			case d.Ambiguous[i]:
				end()
			default:
				stretch = append(stretch, i)
			}
		}
		end()
		p := best
		e := p.Evidence()
		e.Earlier, e.Later = 0, 0
		fold.Add(p.Class(), e)
	}
	return fold.Class(), fold.Evidence()
}
