package streams

import "math"

// Delta streams under Policy.Auto (docs/metrics.md, "Delta writers"). A
// JudgedDelta stream's elected chain is s.cur; every other chain that
// overlaps it is a second writer: a pair keyed by its run start (the
// start of its first point), whose own point is the chain's newest (its
// time, fingerprint, and its start in sum's bits), and whose deltaChains
// turn both chains into running totals for the Pair (delta_classify.go).
// A peer's points are labelled with its run start, as a cumulative peer's
// with its start; a copy's are dropped; an undecided chain's are dropped
// and held, added up into one point (the caller merges them), released if
// it is found a peer. A chain broken by a lost export is a new chain.

// deltaAuto judges a point of a JudgedDelta stream that does not continue
// the elected chain; false: the delta rules judge it.
func (t *Tracker) deltaAuto(s *stream, p Point, d Decision) (Decision, bool) {
	j := t.judge
	c, a := &s.cur, &s.alt
	if i, dup, ok := j.chainOf(s.id, p); ok {
		d.Writer = j.pairs[i].other
		if dup {
			return dropped(d, ReasonDuplicate), true
		}
		return j.deltaOther(t, s, i, p, d, across{}), true
	}
	wasElected := s.flags&(flagAlt|flagWasElected) == flagAlt|flagWasElected && p.Time > a.time
	altGap := wasElected && p.Start > a.time && p.Time > c.start && j.altGap(s, p) // across intervals it sent nothing for (delta_gap.go)
	if wasElected && (p.Start == a.time || altGap) {
		if !altGap && p.Time == c.start && c.deltaStart() == c.start {
			// p ends where the run elected as a restart began, which has
			// sent one point: that point was this chain's next interval,
			// arrived before p (a process's final export overtaking its
			// cancelled periodic one: continued). One run, which keeps
			// the old chain's name. p's counts are the elected writer's,
			// but it is older than the point passed (the stream's times
			// would step back, and a backend that turns deltas into
			// running totals drops it): labelled as its own series, by
			// its run start. No second writer: no reason, no class (it
			// is counted as continued).
			s.flags &^= flagWasElected
			s.cur.start, s.cur.interval = a.start, a.interval
			d.Writer, d.Elected, d.Verdict = p.Start, a.start, Label
			j.stats.Continued++
			j.deltaElected(s, p, across{}) // evidence for the stream's pairs
			return d, true
		}
		// The chain elected before a restart goes on: two chains are live,
		// the restart was a second writer's first point. The old chain
		// takes the stream back, the other becomes a pair; unless this
		// point is not newer than the other's newest (the output's times
		// would step back): then the old chain is the pair.
		s.flags &^= flagWasElected
		gapEnd := uint64(0)
		if altGap {
			gapEnd = a.time
			j.stats.AcrossGap++
			s.flags |= flagSparse
		}
		if p.Time <= c.time {
			i, ok := j.newChain(s, a.start, Point{Start: a.deltaStart(), Time: a.time, Fingerprint: a.fp}, t.now, t.origin, writerKey{})
			if !ok {
				return d, false
			}
			if altGap {
				j.pairs[i].chains.gap = [2]uint64{a.time, p.Start}
			}
			d.Writer = a.start
			return j.deltaOther(t, s, i, p, d, across{end: gapEnd}), true
		}
		old := s.cur
		s.cur = s.alt
		if altGap {
			s.setDeltaGap(a.time, p.Start)
			s.cur.time = p.Start // its timer went on: the skipped intervals are not its interval
		}
		s.cur.acceptDelta(p)
		s.alt = old
		s.flags |= flagRunSince
		d.Writer, d.Election = s.cur.start, ElectionEarlierStart
		j.newChain(s, old.start, Point{Start: old.deltaStart(), Time: old.time, Fingerprint: old.fp}, t.now, t.origin, writerKey{})
		return d, true
	}
	if dd, ok := j.deltaFiller(t, s, p, d); ok {
		return dd, true
	}
	// A chain's next point after intervals its writer sent nothing for
	// (delta_gap.go): the same writer, its series and its evidence. Found
	// by its writer's exports linked back to the chain's newest point
	// (exports.go: exact, whatever the timers), else by its start on
	// exactly one chain's timer.
	if i, g, ok := j.linkedChain(s, p); ok {
		return j.acrossGap(t, s, p, d, i, g), true
	}
	if i, ok := j.gapOf(s, p); ok {
		var g across
		if i == noSlot {
			g = across{end: c.time, empty: j.emptyGap(s, c.start, c.deltaStart(), c.time, p)}
		} else {
			jp := &j.pairs[i]
			g = across{end: jp.own.time, empty: j.emptyGap(s, jp.other, math.Float64bits(jp.own.sum), jp.own.time, p)}
		}
		return j.acrossGap(t, s, p, d, i, g), true
	}
	// A chain whose first interval arrives after its second (an export
	// that waited, for a connection or a busy process, while the next
	// went on) is a chain of its own by its run start, pooled with the
	// writer of the chain it precedes: decided with it, its held point
	// released or dropped with that writer's, however late it comes.
	join := j.successor(s.id, p)
	// A point that starts before the run start of the stream's first run
	// is not that run's, nor a known chain's (covered): it is another
	// writer's interval, late (processes started together, their first
	// exports in any order on a busy machine). Taken as out of order, its
	// counts were lost. After another run (flagRunSince) it may be that
	// run's, passed then: out of order.
	early := p.Start < c.start && s.flags&flagRunSince == 0 && !j.covered(s.id, p)
	// One that starts within the elected run and ends before its newest
	// interval, not at a bound of that interval nor within a known chain,
	// may be a later writer's first interval, late (a process stalled
	// while the others went on), or a resent old point of the elected
	// chain: a chain of its own, pooled with no writer (judged on its
	// own, held undecided) until a point goes on from it, when it is
	// pooled as a new chain is. A resent point that nothing goes on from
	// expires held; resent points that go on count as the elected chain
	// did, a copy's values (never a peer).
	late := !early && join.origin == 0 && p.Start > c.start && p.Time < c.deltaStart() && !j.covered(s.id, p)
	if p.Time <= c.deltaStart() && join.origin == 0 && !early && !late {
		return d, false // out of order: the delta rules
	}
	_, known := j.byKey[pairKey{s.id, p.Start}]
	if iv := c.interval; !known && p.Start >= c.time && (iv == 0 && p.Start-c.time >= p.Time-p.Start || iv > 0 && p.Start >= c.time+iv) {
		// Started after the elected chain's newest point, and after its
		// next was due: a restart, elected at once by the delta rules.
		// Started before its next was due, it is a second writer (a
		// reader or process that joined in between). While the elected
		// chain has sent one point (its interval unknown), its next is
		// taken as due one interval of p's later: a process whose first
		// interval was late (a busy machine) sends its second one just
		// after the elected chain's first; elected, it hid its own first
		// interval as out of order (the elected chain's), its counts
		// lost. A restart so soon after one point is judged as a second
		// writer: the quiet rule keeps it when the old chain stays quiet.
		// Not when a known chain has p's run start (known): elected, p
		// took that chain's name, a labelled writer's points passed
		// unlabelled too; it is that chain's old point, or another chain
		// of that run start (below).
		return d, false
	}
	// A chain whose run start is the elected chain's (processes started
	// in one millisecond: JS SDKs stamp milliseconds) is another writer's
	// too: the elected chain's own points continue it or repeat it, and
	// this one overlaps its newest interval (p.Time > c.deltaStart()). It
	// is named by its run start plus one nanosecond (sameRun), so that its
	// name, and its label as a peer, is not the elected chain's.
	// So is one whose run start is a second chain's that has sent one
	// point, another: named one nanosecond after that chain.
	run := p.Start
	if run == c.start {
		run = sameRun(run)
	}
	for n := 0; ; n++ {
		k, ok := j.byKey[pairKey{s.id, run}]
		if !ok {
			break
		}
		if q := &j.pairs[k]; n == MaxSharers || q.chains == nil || math.Float64bits(q.own.sum) != p.Start || q.own.time == p.Time {
			d.Writer = run
			return dropped(d, ReasonOutOfOrder), true // an old point of a known chain's first interval
		}
		run = sameRun(run)
	}
	origin := t.origin
	if late {
		origin = 0 // pooled once it goes on (deltaOther)
	}
	i, ok := j.newChain(s, run, Point{}, t.now, origin, join)
	if !ok {
		if known {
			// Elected by the delta rules, it would take a known chain's
			// name: dropped as that chain's (counted).
			d.Writer = p.Start
			return dropped(d, ReasonOutOfOrder), true
		}
		return d, false // MaxJudged reached: the delta rules (counted)
	}
	j.pairs[i].late = late
	if late {
		j.pairs[i].origin = t.origin
	}
	d.Writer = run
	return j.deltaOther(t, s, i, p, d, across{}), true
}

// acrossGap judges p, the next point of the chain in pair slot i (noSlot:
// the elected chain) after intervals its writer sent nothing for, g. When
// they are known empty the chain goes on whole, and no interval can fill
// them (exports.go).
func (j *judge) acrossGap(t *Tracker, s *stream, p Point, d Decision, i uint32, g across) Decision {
	j.stats.AcrossGap++
	if g.empty {
		j.stats.EmptyIntervals++
	}
	s.flags |= flagSparse
	if i == noSlot {
		c := &s.cur
		if !g.empty {
			s.setDeltaGap(g.end, p.Start)
		}
		c.time = p.Start // its timer went on: the skipped intervals are not its interval
		c.acceptDelta(p)
		j.deltaElected(s, p, g)
		return d
	}
	d.Writer = j.pairs[i].other
	d = j.deltaOther(t, s, i, p, d, g)
	if !g.empty {
		j.pairs[i].chains.gap = [2]uint64{g.end, p.Start} // after deltaOther, which may begin the chains again
	}
	return d
}

// electedInterval is which of the elected chain's intervals since its
// newest point, at end, every iv, holds time x: 1 for (end, end+iv] (and
// before it); x itself when the interval is not known (every point its
// own). A point's measurements lie after its start: the interval of its
// start plus one nanosecond, to that of its time.
func electedInterval(end, iv, x uint64) uint64 {
	if iv == 0 {
		return x
	}
	if x <= end {
		return 1
	}
	return (x - end + iv - 1) / iv
}

// sameRun is the name of a second chain whose run start is the elected
// chain's: one nanosecond later (a chain that truly starts one nanosecond
// after the elected one would share the name, and be taken for it).
func sameRun(start uint64) uint64 { return start + 1 }

// deltaCollide judges p, a repeat of the elected chain's newest point,
// as the point of a second chain that p continues: two chains that ended
// in the same millisecond (JS SDKs stamp milliseconds) and count alike
// over the next interval send the same point, which is both chains' own.
// Taken as a repeat, the second chain's point was dropped and the chain
// broken for good (its next point continued nothing): its counts were
// lost. false: no chain continues with p (a repeat).
func (t *Tracker) deltaCollide(s *stream, p Point, d Decision) (Decision, bool) {
	j := t.judge
	i, dup, ok := j.chainOf(s.id, p)
	if !ok || dup {
		return d, false
	}
	d.Writer = j.pairs[i].other
	return j.deltaOther(t, s, i, p, d, across{}), true
}

// chainOf finds the pair of stream id whose chain p continues, or else
// whose newest point p repeats (dup): two second chains that ended in the
// same millisecond and count alike send the same point, the second of
// which continues the other chain (deltaCollide's case between two
// second chains); only a point that continues none is a repeat. Unless
// the connections say otherwise: a point that came on the connection of
// the chain it repeats, and not on that of the chain it would continue,
// is its sender's retry (two processes do not share a connection).
func (j *judge) chainOf(id ID, p Point) (slot uint32, dup, ok bool) {
	head, found := j.byStream[id]
	if !found {
		return 0, false, false
	}
	var cont, rep uint32
	for i := head; i != 0; i = j.pairs[i-1].next {
		jp := &j.pairs[i-1]
		if jp.chains == nil {
			continue
		}
		switch {
		case cont == 0 && p.Start == jp.own.time && p.Time > jp.own.time:
			cont = i
		case rep == 0 && p.Time == jp.own.time && p.Start == math.Float64bits(jp.own.sum) && p.Fingerprint == jp.own.fp:
			rep = i
		}
	}
	switch {
	case cont != 0 && (rep == 0 || !retried(p, &j.pairs[rep-1], &j.pairs[cont-1])):
		return cont - 1, false, true
	case rep != 0:
		return rep - 1, true, true
	}
	return 0, false, false
}

// retried says whether p, the same point as chain r's newest and going on
// from chain c's, is r's point resent: it came on r's newest point's
// connection, and c's newest came on another.
func retried(p Point, r, c *judged) bool {
	return p.Conn != 0 && r.own.conn == p.Conn && c.own.conn != 0 && c.own.conn != p.Conn
}

// covered says whether p lies within a known chain of stream id: from its
// run start to its newest point (an old point of that chain).
func (j *judge) covered(id ID, p Point) bool {
	head, ok := j.byStream[id]
	if !ok {
		return false
	}
	for i := head; i != 0; i = j.pairs[i-1].next {
		if jp := &j.pairs[i-1]; jp.chains != nil && jp.other <= p.Start && p.Time <= jp.own.time {
			return true
		}
	}
	return false
}

// successor returns the pooled writer of the chain of stream id that
// starts where p ends (p is its first interval, arriving late); the zero
// key when none.
func (j *judge) successor(id ID, p Point) writerKey {
	head, ok := j.byStream[id]
	if !ok {
		return writerKey{}
	}
	for i := head; i != 0; i = j.pairs[i-1].next {
		if jp := &j.pairs[i-1]; jp.chains != nil && jp.other == p.Time && jp.wk.origin != 0 {
			return jp.wk
		}
	}
	return writerKey{}
}

// newChain makes the pair of a second chain of stream s with run start
// run; last, when its Time is set, is the chain's newest point already
// seen (a chain that was elected). With an origin, the chain is pooled
// as a cumulative writer is (judge.other): by its origin and run start
// within PoolWindow, or with the other new chains of its ScopeMetrics
// (an SDK's instruments share their collection times, so one process's
// chains start together); what one stream proves applies to the others.
//
// join, when its origin is set, is the pooled writer the chain is the
// first interval of (successor).
func (j *judge) newChain(s *stream, run uint64, last Point, now int64, origin uint64, join writerKey) (uint32, bool) {
	if i, ok := j.byKey[pairKey{s.id, run}]; ok {
		return i, j.pairs[i].chains != nil // a chain of that run start is judged already
	}
	if len(j.byKey) >= j.max {
		j.stats.Refused++
		return 0, false
	}
	i := j.alloc()
	jp := &j.pairs[i]
	*jp = judged{id: s.id, ref: s.cur.start, other: run, origin: origin, live: true, seen: now, chains: &deltaChains{}, own: ownPoint{sum: math.Float64frombits(run)}}
	if last.Time != 0 {
		jp.own.time, jp.own.fp, jp.own.sum, jp.own.conn = last.Time, last.Fingerprint, math.Float64frombits(last.Start), last.Conn
	}
	if head, ok := j.byStream[s.id]; ok {
		jp.next = head
	}
	j.byStream[s.id] = i + 1
	j.byKey[pairKey{s.id, run}] = i
	j.poolChain(jp, origin, run, last.Time, now, join)
	s.flags |= flagAlt
	return i, true
}

// poolChain pools the chain of pair jp (run start run; its newest point's
// time last, 0: none) with its writer when it has an origin, as newChain
// says; else it is a writer of its own.
func (j *judge) poolChain(jp *judged, origin, run, last uint64, now int64, join writerKey) {
	if origin != 0 {
		wk := j.resolve(origin, run)
		switch {
		case join.origin == origin:
			wk = join
		case j.anchored && j.anchor.origin == origin:
			wk = j.anchor
		}
		if w, ok := j.pool(wk, run, now); ok {
			w.streams++
			j.writers[wk] = w
			jp.wk = wk
			jp.SetClass(w.class, last)
			if j.scoped && !j.anchored {
				j.anchor, j.anchored = wk, true
			}
		}
	}
	if jp.wk.origin == 0 {
		j.counts[ClassUndecided]++ // a writer of its own
	}
}

// across is how a point goes on from its chain: end, when set, is the
// chain's newest point's time, the point going on from it across
// intervals its writer sent nothing for (gapOf); empty, that it was one
// interval, known to have been empty (exports.go).
type across struct {
	end   uint64
	empty bool
}

// deltaOther judges the point p of the second chain in pair slot i; g, how
// it goes on from the chain.
func (j *judge) deltaOther(t *Tracker, s *stream, i uint32, p Point, d Decision, g across) Decision {
	jp := &j.pairs[i]
	if t.now > jp.seen {
		jp.seen = t.now
	}
	if jp.late && jp.own.time != 0 && p.Start == jp.own.time {
		// A late first interval that a point goes on from: a writer's
		// chain, pooled now (deltaAuto).
		jp.late = false
		if jp.wk.origin == 0 && jp.class == ClassUndecided && jp.origin != 0 {
			j.counts[ClassUndecided]--
			j.poolChain(jp, jp.origin, jp.other, jp.own.time, t.now, writerKey{})
		}
	}
	if jp.ref != s.cur.start {
		// Another elected chain (a restart): the evidence was against the
		// old one.
		cls, decided := jp.class, jp.decided
		jp.Pair, *jp.chains = Pair{}, deltaChains{}
		jp.class, jp.decided, jp.ref = cls, decided, s.cur.start
	}
	if jp.wk.origin != 0 && j.scoped && !j.anchored {
		// One export's points are one writer's, as for cumulative
		// writers (judge.other): a new chain met later in this
		// ScopeMetrics is this chain's writer's other instrument (its
		// run start another, when the first interval of that instrument
		// was named as the elected chain's and left to the delta rules).
		j.anchor, j.anchored = jp.wk, true
	}
	old := jp.own
	jp.own.time, jp.own.fp, jp.own.sum, jp.own.conn = p.Time, p.Fingerprint, math.Float64frombits(p.Start), p.Conn
	if t.journal != nil {
		t.journal.entries = append(t.journal.entries, journalEntry{pair: true, key: pairKey{s.id, jp.other}, pairBefore: old, pairAfter: jp.own})
	}
	before := jp.class
	if jp.class != ClassPeer {
		dc := jp.chains
		dc.add(&jp.Pair, s.shape, p, g)
		iv := s.cur.interval
		if iv == 0 {
			iv = s.cur.time - s.cur.deltaStart() // one point sent: its own interval
		}
		if p.Start >= s.cur.time && p.Value > 0 {
			if dc.since == 0 {
				dc.since, dc.counted, dc.lastHit = p.Time, 0, 0
			}
			// The elected chain's intervals since its newest point that
			// p's measurements may lie in: a copy's first reader lost
			// one of them at least. Counted when none already counted
			// is among them.
			from, to := electedInterval(s.cur.time, iv, p.Start+1), electedInterval(s.cur.time, iv, p.Time)
			if dc.counted == 0 || from > dc.lastHit {
				dc.counted++
				dc.lastHit = to
			}
		}
		if jp.class == ClassUndecided && dc.since != 0 && dc.counted >= QuietSparsePoints &&
			t.quiet(&writer{time: dc.since + iv, interval: iv}, p.Time) &&
			s.cur.time > 0 && !j.chainSince(s.id, s.cur.time, jp) && !j.exports.alive(j.identity, s.cur.time) {
			// The elected chain stopped, this one goes on, and no chain
			// began since (the elected writer going on under another run
			// start, its chain broken by a lost or late export): not a
			// copy (a copy cannot outlive its process's first reader).
			// Stopped: it sent nothing for the failover time after it
			// was due to send the measurements of this chain's first
			// point that counted some and started after the elected
			// chain's newest point (since, plus the elected chain's
			// interval): a copy's process's first reader would have. A
			// writer that sends no point for an interval without
			// measurements (the Python and Go SDKs) is quiet whenever it
			// has nothing to count, not stopped, and one lost export
			// would make it look stopped (before any chain is seen to go
			// on across such intervals too: a dense start proves
			// nothing), so this chain must have counted measurements
			// that QuietSparsePoints of the elected chain's intervals
			// since would have held, no two in one: as many of its
			// exports lost. Never while the elected chain's writer is
			// known to export still (exports.go: its reader has exported
			// since its newest point): it has not stopped, and the values
			// judge (its empty intervals known, their bounds kept).
			jp.class, jp.part, jp.decided = ClassPeer, partQuiet, p.Time
			jp.crossLo = float64(p.Time-s.cur.time) / 1e9
			fo, _ := t.failoverAfter(iv)
			jp.crossHi = float64(fo) / 1e9
			j.stats.Quiet++
		}
	}
	j.chainDecided(jp, before, p.Time)
	j.continued(s.id, i, p.Time) // after this point's decision, which the chain it continues takes
	d.Class = jp.class
	switch jp.class {
	case ClassPeer:
		j.scan = true // a point held before this one is released
		d.Verdict, d.Reason = Label, ReasonOverlap
	default:
		d = t.loser(d)
		d.Hold = jp.class == ClassUndecided && j.holding()
	}
	return d
}

// continued finds the chain of stream id that starts where the chain of
// pair slot from (noSlot: the elected chain) now ends, at end: that
// chain's first point arrived before the point it follows (a process's
// last periodic export, cancelled by its shutdown while it was on the
// wire, and the final export that went after it; exports reordered on a
// busy machine), and was taken for a new writer, undecided: its counts
// held, lost if nothing went on from it. It is the writer's own: pooled
// with the writer of the chain it continues, it is decided with it; the
// elected writer's continues its own series' count as a peer's (labelled
// by its run start), never dropped.
func (j *judge) continued(id ID, from uint32, end uint64) {
	head, ok := j.byStream[id]
	if !ok {
		return
	}
	for i := head; i != 0; i = j.pairs[i-1].next {
		y := i - 1
		jp := &j.pairs[y]
		if y == from || jp.chains == nil || jp.other != end || j.classOf(y) != ClassUndecided {
			continue
		}
		switch {
		case from == noSlot:
			jp.class, jp.part, jp.decided = ClassPeer, partQuiet, jp.own.time
			if jp.wk.origin == 0 {
				j.counts[ClassUndecided]--
				j.counts[ClassPeer]++
				j.stats.Decided[ClassPeer]++
			}
		case j.pairs[from].wk.origin != 0:
			j.repool(y, j.pairs[from].wk, jp.own.time)
		default:
			c := j.classOf(from)
			if c == ClassUndecided {
				continue
			}
			if jp.wk.origin == 0 {
				j.counts[jp.class]--
				j.counts[c]++
				j.stats.Decided[c]++
			}
			jp.class, jp.part, jp.decided = c, partQuiet, jp.own.time
		}
		j.stats.Continued++
		j.scan = true
		return
	}
}

// noSlot names the elected chain where a pair slot is expected.
const noSlot = ^uint32(0)

// repool moves the chain of pair slot i to the pooled writer wk, which
// decides it from now on.
func (j *judge) repool(i uint32, wk writerKey, t uint64) {
	jp := &j.pairs[i]
	w, ok := j.writers[wk]
	if !ok || jp.wk == wk {
		return
	}
	if jp.wk.origin == 0 {
		j.counts[jp.class]-- // a writer of its own (newChain)
	} else {
		j.unpool(jp.wk) // another writer than wk: w stays as read
	}
	w.streams++
	j.writers[wk] = w
	jp.wk = wk
	jp.SetClass(w.class, t)
}

// deltaElected feeds a point of the elected chain to the pairs of the
// stream, rebasing those judged against another elected chain; g as for
// deltaOther.
func (j *judge) deltaElected(s *stream, p Point, g across) {
	head, ok := j.byStream[s.id]
	if !ok {
		return
	}
	j.continued(s.id, noSlot, p.Time)
	for i := head; i != 0; i = j.pairs[i-1].next {
		jp := &j.pairs[i-1]
		if jp.chains == nil || jp.class == ClassPeer {
			continue
		}
		if jp.ref != s.cur.start {
			cls, decided := jp.class, jp.decided
			jp.Pair, *jp.chains = Pair{}, deltaChains{}
			jp.class, jp.decided, jp.ref = cls, decided, s.cur.start
		}
		before := jp.class
		jp.chains.add(&jp.Pair, s.shape, p, g)
		jp.chains.since, jp.chains.counted = 0, 0 // the elected chain went on
		j.chainDecided(jp, before, p.Time)
	}
}

// chainDecided books a chain's class: its pooled writer's, or its own
// count; a quiet decision is the chain's own, not pooled.
func (j *judge) chainDecided(jp *judged, before Class, t uint64) {
	if jp.wk.origin != 0 {
		if w, ok := j.writers[jp.wk]; ok {
			if jp.class != before && jp.part != partQuiet {
				j.setClass(&w, jp.class)
			}
			jp.SetClass(w.class, t)
			j.writers[jp.wk] = w
		}
	} else if jp.class != before {
		j.counts[before]--
		j.counts[jp.class]++
		j.stats.Decided[jp.class]++
	}
	if jp.class != before {
		j.scan = true
	}
}

// chainSince says whether a chain of stream id other than jp began at or
// after time t.
func (j *judge) chainSince(id ID, t uint64, jp *judged) bool {
	head, ok := j.byStream[id]
	if !ok {
		return false
	}
	for i := head; i != 0; i = j.pairs[i-1].next {
		if q := &j.pairs[i-1]; q != jp && q.chains != nil && q.other >= t {
			return true
		}
	}
	return false
}
