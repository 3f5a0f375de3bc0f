package streams

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Class is what a second writer of a stream is, judged from the values.
type Class uint8

const (
	// ClassUndecided: the evidence has not decided yet. Handled as a copy
	// (its points are dropped): a cumulative point carries its writer's
	// whole running total, so a writer later found to be a peer loses
	// nothing, its first passing point carries everything it counted.
	ClassUndecided Class = iota
	// ClassCopy: it records the same measurements as the stream's other
	// writer (a second metric reader in one process, joined later): its
	// value is the other's less a constant. Dropped, as with keep_one.
	ClassCopy
	// ClassPeer: it records its own measurements (another process with the
	// same resource identity). Kept as its own series, as with split.
	ClassPeer

	// NumClasses is the number of classes, for arrays indexed by Class.
	NumClasses = iota
)

var classNames = [...]string{"undecided", "copy", "peer"}

func (c Class) String() string { return nameOf(classNames[:], c) }

// Cause is how a warning or report names a class's case.
func (c Class) Cause() string {
	switch c {
	case ClassCopy:
		return "a second metric reader in one process"
	case ClassPeer:
		return "two processes share one identity: give each a service.instance.id"
	}
	return "a second writer, not yet told a copy or a peer"
}

// The evidence rules' constants (docs/metrics.md, "overlap: auto").
const (
	// MaxParts is the most values of a point compared: the value (Sum) or
	// count, the sum, and the explicit buckets folded into MaxParts-2
	// contiguous groups.
	MaxParts = 6
	// RelEpsilon is the relative tolerance of every comparison: a bound is
	// widened by RelEpsilon times the larger magnitude compared. It covers
	// the rounding of float sums added up in a different order or from a
	// different start (about 1e-13 after a million additions) and exact
	// integers up to 1e9 lose less than one count.
	RelEpsilon = 1e-9
	// TimeSlack is how far apart in time two points must be to be ordered:
	// an SDK stamps a collection's time and reads its aggregations over the
	// next milliseconds, so a point's values may be a little newer than
	// its time says.
	TimeSlack = uint64(50 * time.Millisecond)
	// History is how many of each writer's newest points a Pair keeps to
	// compare the other's with: when the two export moments apart, the
	// newest is too close in time to order, the ones before are not; and
	// between peers whose clocks differ by up to History-1 intervals, some
	// point of one is newer than some of the other's.
	History = 4
	// CopyMoves is how many tests in which both writers' values had moved
	// must pass, pooled over a writer's streams, before it is called a copy.
	CopyMoves = 30
	// JointCandidates is the most join counts the joint test of a
	// histogram's count, sum, min and max follows (joint.go): it starts
	// once the count's bounds leave at most this many integers.
	JointCandidates = 16
)

// Pair is the evidence about two writers of one cumulative monotonic
// stream (told apart by start time): is the later-started one a copy of
// the earlier one, L(t) = E(t) − c with one constant c ≥ 0 per value, or
// a peer? Every pair of points, one of each writer, bounds c: a point of E
// (value x at time tx) and one of L (y at ty) give c ≥ x − y when tx ≤ ty
// (E does not decrease) and c ≤ x − y when tx ≥ ty (L does not decrease).
// Each Add compares the point with the other writer's newest, so the
// bounds of the rule (a_before − b, a_after − b) are found in
// whatever order the points arrive. The bounds are intersected per value;
// an empty intersection is a peer (final). A Pair is fixed-size (no
// history beyond each writer's newest point) and not safe for concurrent
// use. The zero value is ready to use.
type Pair struct {
	start   [2]uint64          // [0] the earlier start; 0: not seen yet
	pts     [2][History]sample // each writer's newest points
	last    [2][2]float64      // per writer: its own and the other's first value at its previous test
	lo, hi  [MaxParts]float64  // bounds of c per value
	scale   [MaxParts]float64  // the largest magnitude compared per value
	bounded uint8              // bit k: lo/hi[k] hold a bound
	layout  uint64
	shape   Shape
	class   Class
	pooled  bool  // class set by SetClass, not by this pair's evidence
	noMM    bool  // a writer's min or max moved back: not cumulative, not compared
	negSum  bool  // a writer measured a negative value: its sum may fall, not compared
	noFloor bool  // the earlier writer's chain went on across a gap: c may be below 0 (gapped)
	part    uint8 // peer: the value whose bounds crossed
	tests   uint32
	moves   uint32
	points  uint32
	first   uint64 // point time of the first test
	decided uint64 // point time of the decision
	crossLo float64
	crossHi float64
	joint   joint // the count and sum tested together (joint.go)
}

// sample is one retained point of a writer.
type sample struct {
	time   uint64
	n      uint8
	mm     bool // mn and mx hold a histogram's min and max
	v      [MaxParts]float64
	mn, mx float64
	iv     interval // a delta chain's point: its own interval
}

// interval is a delta chain's point's own interval, beside the running
// totals a sample holds: the measurements it counted lie within its own
// min and max, and after the chain's point that ended at link (joint.go).
type interval struct {
	link   uint64 // the chain's previous point's time: nothing measured between it and this point's start
	mn, mx float64
	kind   uint8 // ivNone, ivFirst, ivLinked
	mm     bool  // mn and mx hold the interval's min and max
	empty  bool  // it counted nothing
}

// An interval's kinds: not known (a cumulative point, a delta point that
// went on across a gap), its chain's first point (nothing measured before
// it is the chain's), or linked to the chain's previous point.
const (
	ivNone uint8 = iota
	ivFirst
	ivLinked
)

// The parts that a Pair's peer decision can name beyond the values of
// partsOf: a histogram's max and min.
const (
	partMax = MaxParts + iota
	partMin
	partJoint // the count and sum together (joint.go)
	partQuiet // it went quiet while the elected writer went on (judge.go)
	partLast  = partQuiet
)

// Evidence is a Pair's state, for reports and the status page.
type Evidence struct {
	Class  Class
	Points int // points fed
	Tests  int // bounds derived
	Moves  int // tests in which both writers had moved
	// Part names the value: "value" (Sum), "count", "sum", "buckets[i:j]".
	// For a peer, the value whose bounds crossed; otherwise the first.
	Part string
	// Lo and Hi bound c for Part; a peer's Lo > Hi.
	Lo, Hi float64
	// First is the point time of the first test, Decided of the decision
	// (0 while undecided).
	First, Decided uint64
	// Earlier and Later are the two writers' starts.
	Earlier, Later uint64
	// Pooled: the class was decided on another stream of the same writer
	// (Tracker.ObserveFrom); Lo and Hi are this stream's bounds.
	Pooled bool
}

// String is the evidence in one line.
func (e Evidence) String() string {
	num := func(f float64) string {
		if math.IsInf(f, 0) {
			return "∞"
		}
		return strconv.FormatFloat(f, 'g', 10, 64)
	}
	after := ""
	if e.Decided > e.First && e.First != 0 {
		after = ", decided " + time.Duration(e.Decided-e.First).String() + " after the first test"
	}
	if e.Pooled && e.Class != ClassUndecided {
		return fmt.Sprintf("%s: decided on another stream of the same writer; here %s: c in [%s, %s] over %d tests, %d with both moving",
			e.Class, e.Part, num(e.Lo), num(e.Hi), e.Tests, e.Moves)
	}
	switch {
	case e.Class == ClassPeer && e.Part == "quiet":
		return fmt.Sprintf("peer: it sent nothing for %s while the elected writer went on (%s waited); a copy ends with its process's first reader (%d tests)",
			time.Duration(e.Lo*1e9).Round(time.Millisecond), time.Duration(e.Hi*1e9).Round(time.Millisecond), e.Tests)
	case e.Class == ClassPeer && e.Part == "count and sum":
		return fmt.Sprintf("peer: no count of the earlier writer's at the join (c in [%s, %s]) fits the later writer's count and sum together, the measurements between two points lying within their min and max (%d tests%s)",
			num(e.Lo), num(e.Hi), e.Tests, after)
	case e.Class == ClassPeer && (e.Part == "max" || e.Part == "min"):
		return fmt.Sprintf("peer: the later writer's %s %s lies outside the earlier writer's %s recorded after it: it measured what the earlier one did not (%d tests%s)",
			e.Part, num(e.Lo), num(e.Hi), e.Tests, after)
	case e.Class == ClassPeer:
		return fmt.Sprintf("peer: %s of the later writer is not the earlier one's less a constant: needs c ≥ %s and c ≤ %s (%d tests%s)",
			e.Part, num(e.Lo), num(e.Hi), e.Tests, after)
	case e.Class == ClassCopy:
		return fmt.Sprintf("copy: %s = the earlier writer's − c, c in [%s, %s] over %d tests, %d with both moving%s",
			e.Part, num(e.Lo), num(e.Hi), e.Tests, e.Moves, after)
	}
	return fmt.Sprintf("undecided: %d tests, %d of %d with both moving, c in [%s, %s]", e.Tests, e.Moves, CopyMoves, num(e.Lo), num(e.Hi))
}

// Class returns the pair's class.
func (p *Pair) Class() Class { return p.class }

// Starts returns the two writers' starts, the earlier first (0: unseen).
func (p *Pair) Starts() (earlier, later uint64) { return p.start[0], p.start[1] }

// Evidence returns the pair's state.
func (p *Pair) Evidence() Evidence {
	k := int(p.part)
	e := Evidence{
		Class: p.class, Points: int(p.points), Tests: int(p.tests + p.joint.tests), Moves: int(p.moves),
		Part: partName(p.shape, k, p.newest(0).n), First: p.first, Decided: p.decided,
		Earlier: p.start[0], Later: p.start[1], Lo: math.Inf(-1), Hi: math.Inf(1), Pooled: p.pooled,
	}
	if p.class == ClassPeer && !p.pooled {
		e.Lo, e.Hi = p.crossLo, p.crossHi
		return e
	}
	if p.shape.Monotonic() {
		e.Lo = 0
	}
	if p.bounded&(1<<k) != 0 {
		e.Lo, e.Hi = p.lo[k], p.hi[k]
	}
	return e
}

func partName(s Shape, k int, n uint8) string {
	switch {
	case k == 0 && s.Kind() == KindSum:
		return "value"
	case k == 0:
		return "count"
	case k == 1:
		return "sum"
	case k == partMax:
		return "max"
	case k == partMin:
		return "min"
	case k == partJoint:
		return "count and sum"
	case k == partQuiet:
		return "quiet"
	}
	return fmt.Sprintf("bucket group %d of %d", k-1, max(int(n)-2, 1))
}

// Judged says whether points of a stream of this shape are evidence: a
// cumulative monotonic stream (Sum, Histogram, ExponentialHistogram,
// Summary). UpDownCounters, deltas and gauges are not (docs/metrics.md).
func Judged(s Shape) bool { return s.Cumulative() && s.Monotonic() && s.Kind() != KindGauge }

// partsOf returns the values of p that a copy shares less a constant.
func partsOf(shape Shape, p *Point, v *[MaxParts]float64) uint8 {
	v[0] = p.Value
	if shape.Kind() == KindSum {
		return 1
	}
	if !p.HasSum {
		return 1
	}
	v[1] = p.Sum
	if !p.HasBuckets || shape.Kind() != KindHistogram {
		return 2
	}
	nb := p.Buckets.Len()
	if nb < 2 {
		return 2
	}
	g := min(nb, MaxParts-2)
	for k := range g {
		var s float64
		for i := k * nb / g; i < (k+1)*nb/g; i++ {
			s += float64(p.Buckets.At(i))
		}
		v[2+k] = s
	}
	return uint8(2 + g)
}

// Reset forgets the evidence and the writers.
func (p *Pair) Reset() { *p = Pair{} }

// Add feeds one point of either writer. A point of a third start, a point
// flagged "no recorded value", or a stream that is not Judged adds nothing
// (false). It returns the number of tests in which both writers had moved
// that the point added (0 or 1).
func (p *Pair) Add(shape Shape, pt Point) (moves int, ok bool) {
	return p.addInterval(shape, pt, interval{})
}

// addInterval is Add with a delta chain's point's own interval (DeltaPair).
func (p *Pair) addInterval(shape Shape, pt Point, iv interval) (moves int, ok bool) {
	if !Judged(shape) || pt.Start == 0 || pt.Time == 0 || pt.NoValue {
		return 0, false
	}
	var w int
	switch {
	case pt.Start == p.start[0]:
		w = 0
	case pt.Start == p.start[1]:
		w = 1
	case p.start[0] == 0:
		p.start[0], p.shape = pt.Start, shape
		w = 0
	case p.start[1] == 0:
		w = 1
		p.start[1] = pt.Start
		if pt.Start < p.start[0] { // keep [0] the earlier
			p.start[0], p.start[1] = p.start[1], p.start[0]
			p.pts[0], p.pts[1] = p.pts[1], p.pts[0]
			p.last[0], p.last[1] = p.last[1], p.last[0]
			w = 0
		}
	default:
		return 0, false
	}
	p.points++
	cur := sample{time: pt.Time, mm: pt.HasMinMax, mn: pt.Min, mx: pt.Max, iv: iv}
	cur.n = partsOf(shape, &pt, &cur.v)
	if cur.mm && !p.noMM {
		// A cumulative min never rises and a max never falls within one
		// start; an SDK that reports them per interval would make a copy
		// look like a peer, so such a pair's extremes are not compared.
		if prev := p.newest(w); prev.mm && prev.time < cur.time && (cur.mx < prev.mx || cur.mn > prev.mn) {
			p.noMM = true
		}
	}
	if cur.mm && cur.mn < 0 && !p.negSum {
		// A sum of measurements some of which are negative may fall, so
		// the bracketing bounds (which take the sum for a count) do not
		// hold for it: forget the sum's and compare it no more. The joint
		// test bounds the measurements by min and max instead, and stays.
		p.negSum = true
		p.bounded &^= 1 << 1
	}
	if cur.n > 2 {
		if p.layout == 0 {
			p.layout = pt.Layout | 1
		} else if p.layout != pt.Layout|1 {
			cur.n = 2 // the writers' buckets differ: compare count and sum only
		}
	}
	o := 1 - w
	if p.class != ClassPeer {
		// Against the other's newest point and the one before: when the
		// two writers export moments apart, the newest is too close in
		// time to order, the one before is not.
		for k := range History {
			if q := &p.pts[o][k]; q.time != 0 {
				if w == 0 {
					p.bound(&cur, q)
					p.jointTest(&cur, q)
				} else {
					p.bound(q, &cur)
					p.jointTest(q, &cur)
				}
				if p.class == ClassPeer {
					p.decided = pt.Time
					break
				}
			}
		}
		moves = p.move(w, &cur)
		if moves > 0 && p.class == ClassUndecided && p.moves >= CopyMoves {
			p.class, p.decided, p.pooled = ClassCopy, pt.Time, false
		}
	}
	// Keep the newest History points (in no order): the new one replaces
	// the oldest, unless it is older still or its time is there already.
	mine := &p.pts[w]
	oldest := 0
	for k := range History {
		if mine[k].time == pt.Time {
			return moves, true
		}
		if mine[k].time < mine[oldest].time {
			oldest = k
		}
	}
	if pt.Time > mine[oldest].time {
		mine[oldest] = cur
	}
	return moves, true
}

// bound bounds c with a point x of the earlier writer and y of the later.
func (p *Pair) bound(x, y *sample) {
	lower := x.time+TimeSlack <= y.time
	upper := x.time >= y.time+TimeSlack
	if !lower && !upper {
		return // too close in time to be ordered
	}
	if p.first == 0 {
		p.first = max(x.time, y.time)
	}
	p.tests++
	// A copy's measurements are some of the earlier writer's: what it had
	// recorded by ty lies within the earlier writer's min and max at a
	// later tx. Exact values, no tolerance: min and max are measurements.
	if upper && x.mm && y.mm && !p.noMM {
		switch {
		case y.mx > x.mx:
			p.class, p.part, p.pooled = ClassPeer, partMax, false
			p.crossLo, p.crossHi = y.mx, x.mx
			return
		case y.mn < x.mn:
			p.class, p.part, p.pooled = ClassPeer, partMin, false
			p.crossLo, p.crossHi = y.mn, x.mn
			return
		}
	}
	for k := range min(x.n, y.n) {
		if k == 1 && p.negSum {
			continue
		}
		d := x.v[k] - y.v[k]
		p.scale[k] = max(p.scale[k], math.Abs(x.v[k]), math.Abs(y.v[k]))
		bit := uint8(1) << k
		if p.bounded&bit == 0 {
			p.bounded |= bit
			p.lo[k], p.hi[k] = 0, math.Inf(1) // c ≥ 0: the later writer counts a suffix
			if p.noFloor {
				p.lo[k] = math.Inf(-1)
			}
		}
		if lower {
			p.lo[k] = max(p.lo[k], d)
		} else {
			p.hi[k] = min(p.hi[k], d)
		}
		if p.lo[k]-p.hi[k] > RelEpsilon*p.scale[k] {
			p.class, p.part, p.pooled = ClassPeer, uint8(k), false
			p.crossLo, p.crossHi = p.lo[k], p.hi[k]
			return
		}
	}
}

// newest returns writer w's newest retained point.
func (p *Pair) newest(w int) *sample {
	n := &p.pts[w][0]
	for k := 1; k < History; k++ {
		if p.pts[w][k].time > n.time {
			n = &p.pts[w][k]
		}
	}
	return n
}

// move says whether, since writer w's previous point, both writers'
// first values changed (a test that could have failed), and counts it.
func (p *Pair) move(w int, cur *sample) int {
	other := p.newest(1 - w)
	if other.time == 0 || p.bounded&1 == 0 || math.IsInf(p.hi[0], 1) {
		return 0 // no test yet that could fail
	}
	last := &p.last[w]
	moved := last[0] != 0 && cur.v[0] != last[0] && other.v[0] != last[1]
	last[0], last[1] = cur.v[0], other.v[0]
	if !moved {
		return 0
	}
	p.moves++
	return 1
}

// SetClass sets a class decided elsewhere (pooled over a writer's
// streams): Copy over Undecided, Peer over either; never back.
func (p *Pair) SetClass(c Class, t uint64) {
	if c > p.class {
		p.class, p.pooled = c, true
		if p.decided == 0 {
			p.decided = t
		}
	}
}
