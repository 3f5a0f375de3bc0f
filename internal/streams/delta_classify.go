package streams

import "math"

// DeltaPair is the evidence about two writers of one monotonic delta
// stream (a Sum, Histogram or ExponentialHistogram with delta temporality),
// each a chain of intervals: every point starts where the writer's
// previous one ended (StartTimeUnixNano = the previous TimeUnixNano), so a
// chain tells a writer apart without a start time of its own; it is named
// by its first point's start (its run start).
//
// A chain's running totals are a cumulative writer that started at its
// run start: the count (a Sum's value) and sum added up over its
// intervals, the least min and greatest max. A copy (a second reader in
// one process, joined later) counts every measurement the first writer
// counts over its own intervals, so its running totals are the first
// writer's less the count at its join: the cumulative rule, L(t) = E(t) −
// c, which Pair tests with the same bracketing (its intervals covered by
// the first writer's, less the part it missed at the edges), with the
// min and max and the count and sum together. A peer's are not.
//
// A point that continues neither chain (a chain broken by a lost export,
// a third writer) is not evidence: a running total that missed an
// interval is no longer the writer's, so the caller resets the pair when
// one of its chains breaks. Buckets are not compared. A DeltaPair is not
// safe for concurrent use; the zero value is ready to use.
type DeltaPair struct {
	Pair
	deltaChains
}

// deltaChains are a DeltaPair's two chains, fed to a Pair.
type deltaChains struct {
	chains [2]chain
	n      uint8  // chains known
	mmFrom uint64 // extremes only of intervals that start at or after it (gapped)
	// gap is the judged chain's newest gap (from, to], for a filler
	// (delta_gap.go); to 0: none.
	gap [2]uint64
	// before is what the newest gap dropped, restored when one interval
	// fills it (filled).
	before gapState
	// since is the time of the judged chain's first point that counted
	// measurements and started after the elected chain's newest point,
	// 0 when the elected chain went on since (the quiet rule, deltaOther);
	// counted, the fewest of the elected chain's intervals since its
	// newest point that its exports must all have been lost for to miss
	// the measurements this chain counted since (the points' intervals
	// hit by the fewest of the elected chain's, greedily: lastHit is the
	// last one taken).
	since, lastHit uint64
	counted        uint32
}

// chain is one writer's chain: its run start, its newest point's time and
// start, and its running totals.
type chain struct {
	run, end, from uint64
	count, sum     float64
	mn, mx         float64
	mm             bool
	hasSum         bool
}

// JudgedDelta says whether points of a stream of this shape are delta
// evidence: a monotonic delta Sum or (explicit) Histogram. Exponential
// histograms keep the delta rules (a held point could not add up their
// rescaled buckets).
func JudgedDelta(s Shape) bool {
	return !s.Cumulative() && s.Monotonic() && (s.Kind() == KindSum || s.Kind() == KindHistogram)
}

// cumulativeOf is the cumulative shape of a delta stream's running totals.
func cumulativeOf(s Shape) Shape { return NewShape(s.Kind(), true, true) }

// chainOf returns the chain (0 or 1) that pt continues or starts, or -1:
// a point that lies at or before a chain's newest interval (a repeat, a
// point out of order), one that shares a chain's newest start (writers
// that share a start are not told apart here), or a third chain.
func (d *deltaChains) chainOf(pt Point) int {
	for w := range int(d.n) {
		if c := &d.chains[w]; pt.Start == c.end && pt.Time > c.end {
			return w
		}
	}
	for w := range int(d.n) {
		if c := &d.chains[w]; pt.Time <= c.from || pt.Start == c.from || pt.Time == c.end {
			return -1
		}
	}
	if d.n < 2 {
		return int(d.n)
	}
	return -1
}

// extremesFrom says whether pt's min and max count in chain w's since the
// earlier writer's gap (mmFrom): the later writer's measurements, every
// one of them the earlier writer's too were it a copy, only from its
// intervals that start after the gap; the earlier writer's from every
// interval that ends after it (the chain of the least run start known is
// the earlier writer's).
func (d *deltaChains) extremesFrom(w int, pt Point) bool {
	for k := range int(d.n) {
		if k != w && d.chains[k].run < d.chains[w].run {
			return pt.Start >= d.mmFrom
		}
	}
	return pt.Time > d.mmFrom
}

// chainAfter returns the chain whose newest point ended at gapEnd, before
// pt starts, or -1.
func (d *deltaChains) chainAfter(pt Point, gapEnd uint64) int {
	if gapEnd == 0 || pt.Start <= gapEnd {
		return -1
	}
	for w := range int(d.n) {
		if d.chains[w].end == gapEnd {
			return w
		}
	}
	return -1
}

// Runs returns the two chains' run starts (0: not seen).
func (d *deltaChains) Runs() (a, b uint64) { return d.chains[0].run, d.chains[1].run }

// Add feeds one delta point of either writer. A point that continues
// neither chain, a point flagged "no recorded value", or a stream that is
// not JudgedDelta adds nothing (false).
func (d *DeltaPair) Add(shape Shape, pt Point) (moves int, ok bool) {
	return d.add(&d.Pair, shape, pt, across{})
}

// AddAfterGap feeds a point that goes on, across intervals its writer sent
// nothing for, from the chain whose newest point ended at end (the caller
// found it on that chain's timer): the chain goes on, and the bounds the
// gap may have broken are dropped (Pair.gapped).
func (d *DeltaPair) AddAfterGap(shape Shape, pt Point, end uint64) (moves int, ok bool) {
	return d.add(&d.Pair, shape, pt, across{end: end})
}

// AddAfterEmpty feeds a point that goes on from the chain whose newest
// point ended at end across intervals known to have been empty (its
// writer's exports of them arrived without a point of this stream:
// exports.go): the chain goes on, its bounds whole.
func (d *DeltaPair) AddAfterEmpty(shape Shape, pt Point, end uint64) (moves int, ok bool) {
	return d.add(&d.Pair, shape, pt, across{end: end, empty: true})
}

// Fill feeds an interval that arrives after the point that went on across
// it (AddAfterGap), filling that gap exactly: an export that was late, not
// lost. False: it fills no gap (it adds nothing).
func (d *DeltaPair) Fill(shape Shape, pt Point) bool { return d.filled(&d.Pair, shape, pt) }

// add feeds pt to its chain and the chain's running totals to p; g.end,
// when set, is the end of the chain pt goes on from across a gap, whose
// bounds are dropped unless the gap was one empty interval (g.empty).
func (d *deltaChains) add(p *Pair, shape Shape, pt Point, g across) (moves int, ok bool) {
	if !JudgedDelta(shape) || pt.Start == 0 || pt.Time <= pt.Start || pt.NoValue ||
		math.IsNaN(pt.Value) || pt.Value < 0 || math.IsInf(pt.Value, 0) {
		return 0, false
	}
	gapEnd := g.end
	w := d.chainAfter(pt, gapEnd)
	if w < 0 {
		w = d.chainOf(pt)
	}
	if w < 0 {
		return 0, false
	}
	c := &d.chains[w]
	if gapEnd != 0 && c.end == gapEnd && w < int(d.n) && !g.empty {
		d.keep(p, c.run, gapEnd, pt.Start)
		if p.gapped(c.run) {
			// The earlier writer's gap: extremes from its end on, both
			// chains'.
			d.mmFrom = pt.Start
			for k := range int(d.n) {
				d.chains[k].mn, d.chains[k].mx, d.chains[k].mm = math.Inf(1), math.Inf(-1), false
			}
		}
	}
	// The point's own interval, for the joint test (joint.go): linked to
	// the chain's newest point when it goes on from it, or across
	// intervals known to be empty; not after a gap.
	iv := interval{mn: pt.Min, mx: pt.Max, mm: pt.HasMinMax, empty: pt.Value == 0}
	switch {
	case w == int(d.n):
		iv.kind = ivFirst
	case pt.Start == c.end || (g.empty && c.end == gapEnd):
		iv.kind, iv.link = ivLinked, c.end
	}
	if w == int(d.n) {
		d.n++
		*c = chain{run: pt.Start, mn: math.Inf(1), mx: math.Inf(-1), hasSum: pt.HasSum}
	}
	c.end, c.from = pt.Time, pt.Start
	c.count += pt.Value
	if pt.HasSum && c.hasSum {
		c.sum += pt.Sum
	} else {
		c.hasSum = false
	}
	if pt.HasMinMax && pt.Value > 0 && d.extremesFrom(w, pt) {
		c.mn, c.mx, c.mm = min(c.mn, pt.Min), max(c.mx, pt.Max), true
	}
	cp := Point{Start: c.run, Time: pt.Time, Value: c.count, Fingerprint: pt.Fingerprint}
	if c.hasSum && shape.Kind() != KindSum {
		cp.Sum, cp.HasSum = c.sum, true
	}
	if c.mm {
		cp.Min, cp.Max, cp.HasMinMax = c.mn, c.mx, true
	}
	return p.addInterval(cumulativeOf(shape), cp, iv)
}

// Reset forgets the evidence and both chains.
func (d *DeltaPair) Reset() { *d = DeltaPair{} }
