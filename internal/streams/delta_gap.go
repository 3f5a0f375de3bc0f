package streams

import (
	"math"
	"time"
)

// Delta chains across intervals their writer sent nothing for
// (docs/metrics.md, "Delta writers"). The Python and Go SDKs export no
// delta point for an interval without measurements, and start the next
// point where that interval ended: a sparse writer's chain goes on after a
// gap of whole export intervals, its next run start on its own timer. The
// same shape is a lost export. A point whose start lies on exactly one
// chain's timer, whole intervals after that chain's newest point, goes on
// from that chain: its writer, its series and its evidence, with the
// bounds a lost interval could have broken dropped (Pair.gapped).

// GridSlack is how far a point's start may lie from a chain's timer, whole
// intervals after its newest point, and still be taken as that chain's
// next point: the slack of one reading plus a share of the intervals
// skipped (GridDrift each), which the SDK's timer drifts by. A timer is
// told only while that tolerance is less than a GridShare-th of its
// interval (a start anywhere would lie on a timer of intervals not much
// longer than the slack).
const (
	GridSlack = uint64(10 * time.Millisecond)
	GridDrift = 1000 // a thousandth of an interval per interval skipped
	GridShare = 10
	// GridMaxSkip is the most intervals a chain may skip and go on.
	GridMaxSkip = 64
	// QuietSparsePoints is how many points that counted measurements a
	// chain must have sent since the elected chain's newest point for the
	// quiet rule to decide it in a stream whose chains go on across empty
	// intervals (flagSparse): as many exports of a copy's first reader
	// lost, not one.
	QuietSparsePoints = 6
)

// onTimer says whether a distance g from a chain's newest point is whole
// intervals iv of its timer: within GridSlack and the drift of the
// intervals skipped, for an interval that tolerance is a small share of.
func onTimer(iv, g uint64) bool {
	if iv == 0 {
		return false
	}
	k := (g + iv/2) / iv
	if k == 0 || k > GridMaxSkip {
		return false
	}
	off := g - k*iv
	if k*iv > g {
		off = k*iv - g
	}
	tol := GridSlack + k*iv/GridDrift
	return off <= tol && tol*GridShare < iv
}

// timer is a chain's timer: iv, its newest interval, one tick to the
// next; and alt, when that interval is the chain's first and shorter than
// the stream's interval, that one too (0: none). A first interval may
// start when its writer first measured, not at a tick (the Python SDK
// starts an instrument's first delta there): a share of an interval
// short, which, whole intervals on, puts the writer's next point off the
// timer it makes. Writers of one identity mostly share their export
// interval, so the stream's stands in for it; but a second reader may
// have its own (a framework's reader beside the application's), so a
// start on either timer is on the chain's (on either of two chains', on
// neither's: a new chain, or a restart).
type timer struct{ iv, alt uint64 }

// timerOf is the timer of a chain of run start run whose newest interval
// is (from, end], in a stream whose interval is cycle.
func timerOf(run, from, end, cycle uint64) timer {
	if end <= from || from == 0 {
		return timer{}
	}
	t := timer{iv: end - from}
	if from == run && cycle > t.iv {
		t.alt = cycle
	}
	return t
}

// on says whether a distance g is whole intervals of either of the
// timer's intervals (onTimer).
func (t timer) on(g uint64) bool { return onTimer(t.iv, g) || t.alt != 0 && onTimer(t.alt, g) }

// one says whether a distance g between two of the writer's reads is
// surely one interval, none skipped: one of its own interval iv, known
// once the chain has sent a point after its first (that point's interval
// is one tick of its timer to the next). While the chain has sent only its
// first interval (alt set) the writer's interval is not known: the
// stream's says nothing of it (a second reader may read every 1 s beside
// others' 2 s, and one of its steps of 2 s skipped a lost export), nor its
// first interval (a first read late on a busy machine makes it longer than
// the writer's interval): FuzzPairCopyNeverPeer's sparseCopy found both.
func (t timer) one(g uint64) bool {
	if t.iv == 0 || t.alt != 0 {
		return false
	}
	return (g+t.iv/2)/t.iv == 1 && onTimer(t.iv, g)
}

// onGrid says whether a point starting at start lies on the timer of a
// chain whose newest point ends at end.
func (t timer) onGrid(end, start uint64) bool { return start > end && t.on(start-end) }

// emptyGap says whether p, going on across whole intervals from the chain
// of run start run whose newest interval is (from, end], skipped only
// empty ones: its writer's exports of them arrived (exports.go). By the
// chain's own interval when p lies on that timer, else by the stream's
// standing in for a first one (its length, first, then checked).
func (j *judge) emptyGap(s *stream, run, from, end uint64, p Point) bool {
	if j.exports.set == nil {
		return false
	}
	t := timerOf(run, from, end, j.cycle(s))
	if onTimer(t.iv, p.Start-end) {
		return j.exports.emptyGap(j.identity, t.iv, 0, end, p.Start)
	}
	return t.alt != 0 && j.exports.emptyGap(j.identity, t.alt, t.iv, end, p.Start)
}

// linkedChain finds the chain p goes on from by its writer's exports
// (exports.go): the export at p's start, an empty read, walked back
// through its reader's previous exports to one at the newest point of the
// elected chain or of a second chain (noSlot: the elected). The reader is
// the chain's writer: one export, one reader, one time. No step may be
// shorter than the chain's interval (a reader whose exports are linked
// with another's, both naming one start, would step a share of one); the
// intervals were empty when each step was one interval (a longer step:
// that reader's exports in between were lost). False: no link, no such
// chain, or a step too short: judged by the timers (gapOf).
func (j *judge) linkedChain(s *stream, p Point) (uint32, across, bool) {
	e := &j.exports
	if e.set == nil || j.identity == 0 || p.Start == 0 {
		return 0, across{}, false
	}
	l, ok := e.set[exportKey(j.identity, p.Start)]
	if !ok || l.reader == 0 {
		return 0, across{}, false
	}
	r, at := l.reader, p.Start
	var steps [GridMaxSkip]uint64
	c := &s.cur
	head := j.byStream[s.id]
	for n := range GridMaxSkip {
		if l.prev == 0 || l.prev >= at {
			return 0, across{}, false
		}
		steps[n] = at - l.prev
		at = l.prev
		if l, ok = e.set[exportKey(j.identity, at)]; !ok || l.reader != r {
			return 0, across{}, false
		}
		slot, tm := uint32(0), timer{}
		switch {
		case at == c.time && at > c.deltaStart():
			slot, tm = noSlot, timerOf(c.start, c.deltaStart(), c.time, j.cycle(s))
		default:
			for i := head; i != 0; i = j.pairs[i-1].next {
				if jp := &j.pairs[i-1]; jp.chains != nil && jp.own.time == at && !jp.late {
					slot, tm = i-1, timerOf(jp.other, math.Float64bits(jp.own.sum), jp.own.time, j.cycle(s))
					break
				}
			}
			if tm == (timer{}) {
				continue
			}
		}
		short := tm.iv
		if tm.alt != 0 {
			short = min(short, tm.alt)
		}
		empty := true
		for _, st := range steps[:n+1] {
			if st+GridSlack+short/GridDrift < short {
				return 0, across{}, false
			}
			empty = empty && tm.one(st)
		}
		return slot, across{end: at, empty: empty}, true
	}
	return 0, across{}, false
}

// cycle is stream s's export interval as its chains show it: the newest
// interval of the elected chain, or else of a second chain, that is not
// the chain's first; 0: none yet.
func (j *judge) cycle(s *stream) uint64 {
	if c := &s.cur; c.deltaStart() != c.start && c.time > c.deltaStart() {
		return c.time - c.deltaStart()
	}
	if head, ok := j.byStream[s.id]; ok {
		for i := head; i != 0; i = j.pairs[i-1].next {
			jp := &j.pairs[i-1]
			if from := math.Float64bits(jp.own.sum); jp.chains != nil && from != jp.other && jp.own.time > from {
				return jp.own.time - from
			}
		}
	}
	return 0
}

// Where p may go on from across a gap (timers): the runs and chains of
// stream s on whose timer p's start lies.
const (
	onCur = 1 << iota // the elected run
	onAlt             // the run elected before a restart (the runner-up), on a timer of its own
	onOld             // the elected run's timer, wholly before its newest interval: an old interval of it resent
)

// timers returns where p may go on from across a gap: which runs (onCur,
// onAlt, onOld) and how many of the stream's second chains (the last of
// them in slot) have p's start on their timer. A chain of resent old
// points (late, not gone on from) counts twice: not a writer's chain yet.
// The runner-up is not counted when its timer is the elected run's too
// (a restart that was the same writer's next point), nor when it is a
// judged second chain (its newest point is the pair's).
func (j *judge) timers(s *stream, p Point) (runs uint8, chains int, slot uint32) {
	c := &s.cur
	cy := j.cycle(s)
	ct := timerOf(c.start, c.deltaStart(), c.time, cy)
	switch {
	case ct.onGrid(c.time, p.Start):
		runs |= onCur
	case p.Time <= c.deltaStart() && ct.on(c.time-p.Start):
		runs |= onOld
	}
	if a := &s.alt; s.flags&flagAlt != 0 && a.start != c.start {
		at := timerOf(a.start, a.deltaStart(), a.time, cy)
		if at.onGrid(a.time, p.Start) && (runs&onCur == 0 || !at.onGrid(a.time, c.deltaStart())) {
			if _, judged := j.byKey[pairKey{s.id, a.start}]; !judged {
				runs |= onAlt // a judged run is a second chain: below, as it goes on
			}
		}
	}
	if head, ok := j.byStream[s.id]; ok {
		for i := head; i != 0; i = j.pairs[i-1].next {
			jp := &j.pairs[i-1]
			if jp.chains != nil && timerOf(jp.other, math.Float64bits(jp.own.sum), jp.own.time, cy).onGrid(jp.own.time, p.Start) {
				chains++
				slot = i - 1
				if jp.late {
					chains++
				}
			}
		}
	}
	return runs, chains, slot
}

// gapOf finds the chain of stream s that p goes on from across intervals
// it sent nothing for: noSlot for the elected chain, else a pair slot.
// Only when p's start lies on exactly one chain's timer and continues no
// chain outright (chainOf, the runner-up run).
func (j *judge) gapOf(s *stream, p Point) (uint32, bool) {
	runs, chains, slot := j.timers(s, p)
	switch {
	case runs == onCur && chains == 0:
		return noSlot, true
	case runs == 0 && chains == 1:
		return slot, true
	}
	return 0, false
}

// altGap says whether p goes on from the run elected before a restart,
// across a gap: on that run's timer alone.
func (j *judge) altGap(s *stream, p Point) bool {
	runs, chains, _ := j.timers(s, p)
	return runs == onAlt && chains == 0
}

// gapped says that writer run's chain went on after intervals it sent
// nothing for: empty intervals, or an export lost. Lost, its running
// totals lack that interval's counts from now on: a later writer's totals
// fall below a copy's (c grows: the upper bounds of c no longer hold, the
// lower ones do), the earlier writer's below what a copy of it counted (c
// shrinks, below zero even: the lower bounds no longer hold, nor c ≥ 0
// for bounds yet to come, nor the joint test, which counts the
// measurements between two reads). The earlier writer's extremes may then
// miss a measurement the later one has: true (the earlier writer's, or
// the only one seen) tells the caller to start both chains' extremes
// afresh from the gap, and the retained points' extremes are not
// compared. The writer's retained points are from before the gap.
func (p *Pair) gapped(run uint64) (earlier bool) {
	w := 0
	switch run {
	case p.start[0]:
	case p.start[1]:
		w = 1
	default:
		return false
	}
	for k := range MaxParts {
		if p.bounded&(1<<k) == 0 {
			continue
		}
		if w == 0 {
			p.lo[k] = math.Inf(-1)
		} else {
			p.hi[k] = math.Inf(1)
		}
	}
	p.joint = joint{}
	p.pts[w] = [History]sample{}
	p.last[w] = [2]float64{}
	if w == 1 {
		return false
	}
	p.noFloor = true
	for k := range History {
		p.pts[1][k].mm = false
	}
	return true
}

// A filler is a chain's interval that arrives after the point that went on
// across it (exports reordered: a process's final export overtaking its
// cancelled periodic one, or a busy machine's). The chain's newest gap is
// kept: the elected chain's in its stream's shift (a delta stream has no
// change-over: changeOver is for cumulative sums), a second chain's in its
// deltaChains. An interval within the gap that starts or ends at one of
// its bounds is the chain's own, older than its newest point: the gap
// shrinks by it.

// deltaGap returns the elected chain's newest gap (from, to]; to 0: none.
func (s *stream) deltaGap() (from, to uint64) {
	return s.shift.Start, math.Float64bits(s.shift.Offset)
}

func (s *stream) setDeltaGap(from, to uint64) {
	s.shift = Shift{Start: from, Offset: math.Float64frombits(to)}
}

// fill says whether p fills part of the gap (from, to] at one of its
// bounds, and returns the gap that is left (to 0: none).
func fill(from, to uint64, p Point) (uint64, uint64, bool) {
	switch {
	case to == 0 || p.Start < from || p.Time > to || p.Start >= p.Time:
		return from, to, false
	case p.Start == from && p.Time == to:
		return 0, 0, true
	case p.Start == from:
		return p.Time, to, true
	case p.Time == to:
		return from, p.Start, true
	}
	return from, to, false
}

// deltaFiller judges p when it fills a gap of the elected chain or of a
// second chain (above); false: it fills none. The elected chain's goes
// out labelled by its own run start (its counts are the elected writer's,
// but older than the point passed: the stream's own times never step
// back), as the continued rule sends an overtaken interval; a second
// chain's is judged by that chain's class, without evidence (its running
// totals went on without it).
func (j *judge) deltaFiller(t *Tracker, s *stream, p Point, d Decision) (Decision, bool) {
	from, to := s.deltaGap()
	if f, g, ok := fill(from, to, p); ok {
		s.setDeltaGap(f, g)
		j.stats.Continued++
		d.Writer, d.Verdict = p.Start, Label
		if head, ok := j.byStream[s.id]; ok {
			for i := head; i != 0; i = j.pairs[i-1].next {
				if jp := &j.pairs[i-1]; jp.chains != nil {
					before := jp.class
					jp.chains.filled(&jp.Pair, s.shape, p)
					j.chainDecided(jp, before, p.Time)
				}
			}
		}
		return d, true
	}
	head, ok := j.byStream[s.id]
	if !ok {
		return d, false
	}
	for i := head; i != 0; i = j.pairs[i-1].next {
		jp := &j.pairs[i-1]
		if jp.chains == nil {
			continue
		}
		f, g, ok := fill(jp.chains.gap[0], jp.chains.gap[1], p)
		if !ok {
			continue
		}
		jp.chains.gap = [2]uint64{f, g}
		j.stats.Continued++
		before := jp.class
		jp.chains.filled(&jp.Pair, s.shape, p)
		j.chainDecided(jp, before, p.Time)
		d.Writer, d.Class = jp.other, jp.class
		if before == ClassPeer {
			d.Verdict, d.Reason = Label, ReasonOverlap
			return d, true
		}
		// Held with the chain's held point, which spans it: one point
		// sent if the chain is a peer (decided by this filler, it is
		// released with the request), never one that overlaps another.
		d = t.loser(d)
		d.Hold = jp.class != ClassCopy && j.holding()
		return d, true
	}
	return d, false
}

// gapState is what a gap dropped from a DeltaPair's evidence: the bounds
// of the count and sum, the floor, both chains' extremes. When a single
// interval fills the gap (an export that was late, not lost), its counts
// are known: the evidence gathered since is shifted by them and the state
// before the gap restored (filled).
type gapState struct {
	run, from, to uint64
	lo, hi        [2]float64
	bounded       uint8
	noFloor, ok   bool
	mm            [2]bool
	mn, mx        [2]float64
	mmFrom        uint64
}

// keep saves the evidence before the gap (from, to] of chain run.
func (d *deltaChains) keep(p *Pair, run, from, to uint64) {
	b := gapState{run: run, from: from, to: to, bounded: p.bounded & 3, noFloor: p.noFloor, ok: true, mmFrom: d.mmFrom}
	copy(b.lo[:], p.lo[:2])
	copy(b.hi[:], p.hi[:2])
	for k := range 2 {
		c := &d.chains[k]
		b.mm[k], b.mn[k], b.mx[k] = c.mm, c.mn, c.mx
	}
	d.before = b
}

// filled feeds the interval pt that fills the newest gap of one of the
// chains exactly, and says whether it did. Its counts are what that
// chain's running totals lacked since the gap: added to the chain, to its
// retained points, and to the bounds gathered since (the earlier writer's
// lack lowered c by them, the later writer's raised it); the bounds and
// extremes from before the gap are restored. The bounds, now all of one
// c, may cross: a peer.
func (d *deltaChains) filled(p *Pair, shape Shape, pt Point) bool {
	b := &d.before
	if !b.ok || pt.Start != b.from || pt.Time != b.to || !JudgedDelta(shape) || pt.NoValue ||
		math.IsNaN(pt.Value) || pt.Value < 0 || math.IsInf(pt.Value, 0) {
		return false
	}
	b.ok = false
	w := -1
	for k := range int(d.n) {
		if d.chains[k].run == b.run {
			w = k
		}
	}
	wi := 0
	switch b.run {
	case p.start[0]:
	case p.start[1]:
		wi = 1
	default:
		return false
	}
	if w < 0 {
		return false
	}
	c := &d.chains[w]
	var f [2]float64
	f[0] = pt.Value
	c.count += pt.Value
	if c.hasSum && pt.HasSum {
		f[1] = pt.Sum
		c.sum += pt.Sum
	} else {
		c.hasSum = false // no longer the chain's sum: not compared from now on (add)
	}
	if wi == 0 {
		d.mmFrom = b.mmFrom
		for k := range int(d.n) {
			x := &d.chains[k]
			if b.mm[k] {
				x.mn, x.mx, x.mm = min(x.mn, b.mn[k]), max(x.mx, b.mx[k]), true
			}
		}
	}
	if pt.HasMinMax && pt.Value > 0 && d.extremesFrom(w, pt) {
		// Only what the chain's extremes hold since the earlier writer's
		// newest gap, as add keeps them: a later writer's filler from
		// before it would set its max beside an earlier writer's that
		// misses that interval's measurements.
		c.mn, c.mx, c.mm = min(c.mn, pt.Min), max(c.mx, pt.Max), true
	}
	if p.class == ClassPeer {
		return true
	}
	sign := 1.0 // the earlier writer's lack lowered c
	if wi == 1 {
		sign = -1
		// Its retained points (since its gap) hold the filler's counts
		// from here on, not its extremes: not compared (the joint test
		// would bound the filler's measurements by extremes without them).
		for i := range History {
			p.pts[1][i].mm = false
		}
	} else {
		// The extremes are the chains' whole again: the retained points'
		// (since the gap) are less, not compared.
		for i := range History {
			p.pts[0][i].mm, p.pts[1][i].mm = false, false
		}
	}
	for k := range 2 {
		if k == 1 && !c.hasSum {
			// The chain's sum lacks the filler's from the gap on, for
			// good: compared no more (as a sum that may fall), its
			// bounds forgotten; the floor that comes back below is the
			// count's.
			p.negSum = true
			p.bounded &^= 1 << 1
			break
		}
		for i := range History {
			if q := &p.pts[wi][i]; q.time != 0 && k < int(q.n) {
				q.v[k] += f[k]
			}
		}
		if p.bounded&(1<<k) == 0 {
			continue
		}
		p.lo[k] += sign * f[k]
		p.hi[k] += sign * f[k]
		if b.bounded&(1<<k) != 0 {
			p.lo[k], p.hi[k] = max(p.lo[k], b.lo[k]), min(p.hi[k], b.hi[k])
		}
		if !b.noFloor {
			p.lo[k] = max(p.lo[k], 0)
		}
		if p.lo[k]-p.hi[k] > RelEpsilon*p.scale[k] {
			p.class, p.part, p.pooled = ClassPeer, uint8(k), false
			p.crossLo, p.crossHi = p.lo[k], p.hi[k]
			p.decided = pt.Time
			return true
		}
	}
	p.noFloor = b.noFloor
	p.joint = joint{}
	return true
}
