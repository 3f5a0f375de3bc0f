package streams

import (
	"math"
	"strconv"
)

// Writers that share a start (docs/metrics.md, "Writers that share a
// start"). Processes that set their SDK up before a pre-fork server forks
// them, or JS SDKs that stamp one millisecond, give one start time to
// several writers of a cumulative stream: by start they are one writer.
// Their points still tell them apart: a single writer's cumulative value
// never falls without a new start, and each process exports on its own
// timer, so its points' times form their own sequence one interval apart
// (its export phase).
//
// Under Policy.Auto, a point of a Judged stream's elected start that a
// single writer could not have written (a value below one written at
// least TimeSlack earlier, or above one written at least TimeSlack later)
// begins learning: the start's points are kept (sharedRing) and judged as
// today, until an interval is found that the kept points' times repeat
// (interval) and, by it, two or more chains of two points or more each
// (chains). From then on every point of the start goes to the chain whose
// phase it fits (phaseFit; of two chains whose phases lie within the
// tolerance, the one whose newest value is nearest below it). Chain 0,
// which holds the elected writer's newest point, is passed as it is; every
// other chain is a peer's own series, labelled with the start and its
// number (SharerName). A point off every chain's phase is given to none
// and counted (an early export such as a flush at shutdown, or a writer
// not placed yet); its writer becomes a new chain at its next point one
// interval on.
//
// A copy (a second reader of one process) reads the same aggregation: its
// values are one non-decreasing function of time, so it never proves a
// second writer and is never split, whatever its timer. Writers whose
// exports come within TimeSlack of each other prove nothing, and a start
// whose kept points find no interval is not split: their falls are
// dropped as today and counted (JudgeStats.SharedUnsplit), as at the
// classifier's limit.

// MaxSharers is the most writers one start of a stream is split into.
const MaxSharers = 8

// SharerName is the split attribute's value for chain k (≥ 1) of a shared
// start: WriterName and the chain's number.
func SharerName(start uint64, k uint8) string {
	return WriterName(start) + "-" + strconv.Itoa(int(k))
}

// sharer is one chain of a shared start: its newest point.
type sharer struct {
	time       uint64
	value, sum float64 // sum: NaN when none
	fp         uint64
	points     uint64
	conn       uint64 // the connection its newest point came on; 0: none known
}

func (c *sharer) accept(p Point) {
	c.time, c.fp = p.Time, p.Fingerprint
	c.points++
	if p.Conn != 0 {
		c.conn = p.Conn
	}
	if p.NoValue {
		return
	}
	c.value, c.sum = p.Value, math.NaN()
	if p.HasSum {
		c.sum = p.Sum
	}
}

// continues says whether p may be chain c's next point.
func (c *sharer) continues(p Point) bool {
	return p.Time > c.time && (p.NoValue || !(p.Value < c.value) && !(p.HasSum && p.Sum < c.sum))
}

// contradicts says whether p is proof of a writer other than chain c: a
// value below c's newest at least TimeSlack later, or above it at least
// TimeSlack earlier (or the same time, another value: not ordered, no
// proof).
func (c *sharer) contradicts(p Point) bool {
	if p.NoValue {
		return false
	}
	below := p.Value < c.value || p.HasSum && p.Sum < c.sum
	above := p.Value > c.value || p.HasSum && p.Sum > c.sum
	return below && p.Time >= c.time+TimeSlack || above && p.Time+TimeSlack <= c.time
}

func sharerOf(p Point) sharer {
	q := sharer{time: p.Time, value: p.Value, sum: math.NaN(), fp: p.Fingerprint, points: 1, conn: p.Conn}
	if p.HasSum {
		q.sum = p.Sum
	}
	return q
}

// sharedStart is a stream whose elected start is shared by several
// writers: learning (iv 0: its points are kept in ring and judged as
// today) until the export interval that their times repeat is found, then
// split into chains.
type sharedStart struct {
	start   uint64
	iv      uint64 // the writers' export interval; 0 while learning
	n       uint8  // chains
	kept    uint32 // points kept in ring so far (the newest replaces the oldest when full)
	gaveUp  bool   // learning found no interval or one chain: cannot be split
	ch      [MaxSharers]sharer
	ring    *[sharedRing]sharer // while learning; nil once split or given up
	split   uint64              // point time of the split
	unsplit uint64              // points that could not be given to a chain
	phase   uint64              // points given to a chain by their export phase
	// ambiguous counts points that fit two chains' phases; orphan is the
	// newest point that fit none.
	ambiguous uint64
	orphan    sharer
	seen      int64
	// byValue counts the points on one chain's phase given to another
	// whose value they continue (flushOf: a final flush off its
	// writer's timer).
	byValue uint64
	conns   connEvidence // shared_conn.go
}

// sharedWriter begins learning a stream's shared start at a point of its
// elected start that breaks that writer's order (r: why) and proves
// another writer (contradicts). ok false: not a proof.
func (t *Tracker) sharedWriter(s *stream, p Point, r Reason) bool {
	c := &s.cur
	if r != ReasonDecrease && r != ReasonOutOfOrder {
		return false
	}
	first := sharer{time: c.time, value: c.value, sum: c.sum, fp: c.fp, points: 1}
	if !first.contradicts(p) {
		if r == ReasonDecrease {
			t.judge.stats.SharedUnsplit++ // a fall too close in time to be ordered
		}
		return false
	}
	return t.learnShared(s)
}

// sharedOf returns the shared start of a stream flagged so, or clears the
// flag when it is gone (forgotten, or the elected start changed).
func (t *Tracker) sharedOf(s *stream) *sharedStart {
	sh := t.judge.shared[s.id]
	if sh == nil || sh.start != s.cur.start {
		if sh != nil {
			delete(t.judge.shared, s.id)
		}
		s.flags &^= flagShared
		return nil
	}
	return sh
}

// shared judges a point of a split start: chain 0's pass as the elected
// writer's, the others' are labelled (Decision.Sharer).
func (t *Tracker) shared(s *stream, sh *sharedStart, p Point, d Decision) Decision {
	if t.now > sh.seen {
		sh.seen = t.now
	}
	k, dup, ok := sh.assign(p)
	// Chain 0 passes as the elected writer's series: a point that would
	// break that writer's order (below its newest value, or not after it)
	// is not passed under it, whatever its phase (chain 0 may hold an
	// older point than the elected writer's, elected since by a
	// failover).
	breaks := func(k int) bool { return k == 0 && s.cur.order(p, s.shape.Monotonic()) != ReasonNone }
	switch {
	case dup:
		d.Sharer = uint8(k)
		return dropped(d, ReasonDuplicate)
	case !ok && sh.orphan.time != 0 && orphanGoesOn(&sh.orphan, p, sh.iv) && sh.overdue(&sh.orphan) >= 0 && !breaks(sh.overdue(&sh.orphan)):
		// Off every chain's phase twice, one interval apart, and going on
		// from a chain that missed its exports since: that writer, its
		// phase moved (a busy scheduler delayed its timer).
		k = sh.overdue(&sh.orphan)
		t.journalShared(s.id, sh, k, sh.ch[k])
		sh.ch[k].accept(p)
		sh.orphan = sharer{}
	case !ok && sh.n < MaxSharers && sh.orphan.time != 0 && orphanGoesOn(&sh.orphan, p, sh.iv):
		// Off every chain's phase twice, one interval apart: a writer
		// whose phase was not among the chains.
		k = int(sh.n)
		t.journalShared(s.id, sh, k, sharer{})
		sh.ch[k] = sharerOf(p)
		sh.ch[k].points = 2
		sh.n++
		sh.orphan = sharer{}
	case !ok:
		if sh.late(p) {
			return dropped(d, ReasonOutOfOrder)
		}
		// Off every chain's phase, and not above all of them: an early
		// export (a flush at shutdown), or a writer not placed yet. Given
		// to no chain (a guess would mix two writers' series): counted.
		if sh.orphan.time == p.Time && sh.orphan.fp == p.Fingerprint {
			return dropped(d, ReasonDuplicate)
		}
		sh.orphan = sharerOf(p)
		sh.unsplit++
		t.judge.stats.SharedUnsplit++
		return dropped(d, ReasonOverlap)
	case ok && breaks(k):
		// Given to no chain, counted, as off every phase.
		sh.unsplit++
		t.judge.stats.SharedUnsplit++
		return dropped(d, ReasonOverlap)
	default:
		t.journalShared(s.id, sh, k, sh.ch[k])
		sh.ch[k].accept(p)
	}
	if t.journal != nil {
		t.journal.entries[len(t.journal.entries)-1].shared.after = sh.ch[k]
	}
	d.Class = ClassPeer
	if k == 0 {
		s.cur.accept(p)
		if s.flags&flagAlt != 0 {
			t.judge.elected(s, p, true)
		}
		return d
	}
	d.Sharer, d.Verdict, d.Reason = uint8(k), Label, ReasonOverlap
	return d
}
