package streams

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
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

// sharedRing is how many points of a shared start are kept while its
// writers' export interval is sought (learning); sharedLearn the fewest
// before it is sought.
const (
	sharedRing  = 32
	sharedLearn = 8
)

// sharer is one chain of a shared start: its newest point.
type sharer struct {
	time       uint64
	value, sum float64 // sum: NaN when none
	fp         uint64
	points     uint64
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
}

// overdue returns the chain that the orphan point o continues (a later
// time, a value not below) whose next export was due more than the
// tolerance before o and did not come, the one whose value is nearest
// below o's; -1: none.
func (sh *sharedStart) overdue(o *sharer) int {
	best := -1
	tol := phaseTolerance(sh.iv)
	p := Point{Time: o.time, Value: o.value, Sum: o.sum, HasSum: !math.IsNaN(o.sum), Fingerprint: o.fp}
	for k := range int(sh.n) {
		c := &sh.ch[k]
		if c.continues(p) && o.time > c.time+sh.iv+tol && (best < 0 || c.value > sh.ch[best].value) {
			best = k
		}
	}
	return best
}

// orphanGoesOn says whether p is the next export of the writer of the
// orphan point o: its value not below, one interval later.
func orphanGoesOn(o *sharer, p Point, iv uint64) bool {
	_, ok, _ := phaseFit([]sharer{*o}, p, iv)
	return ok
}

// sharedUndo is what a shared point changed, for Journal/Undo.
type sharedUndo struct {
	id            ID
	k             uint8
	n             uint8 // chains before
	before, after sharer
}

// SharedEvidence is what a Tracker knows of a stream's shared start.
type SharedEvidence struct {
	Start   uint64 // the start the writers share
	Writers int    // chains: writers told apart
	Unsplit uint64 // points that could not be given to a writer
	Phase   uint64 // points given by their export phase
	// Ambiguous: points that fit two writers' phases (given by value).
	Ambiguous uint64
	// ByValue: points on one writer's phase that continue another's
	// value (a final flush off its writer's timer), given to that one.
	ByValue uint64
	Split   uint64 // point time of the split
	// Interval is the export interval the writers' times repeat.
	Interval uint64
}

// String is the evidence in one line, as the status page, verify and
// audit name it.
func (e SharedEvidence) String() string {
	if e.Writers < 2 {
		return fmt.Sprintf("writers sharing one start: could not be split (a value fell without a new start, but their times repeat no export interval by which two writers' phases are told apart); %d falls dropped", e.Unsplit)
	}
	s := fmt.Sprintf("writers sharing one start: split by export phase (every %s) into %d writers, each its own series (a value fell without a new start; %d points placed by phase)",
		time.Duration(e.Interval), e.Writers, e.Phase)
	if e.Ambiguous > 0 {
		s += fmt.Sprintf("; %d points fit two writers' phases, placed by value", e.Ambiguous)
	}
	if e.ByValue > 0 {
		s += fmt.Sprintf("; %d points early for their writer (a flush at shutdown) on another's phase, placed by the value they continue", e.ByValue)
	}
	if e.Unsplit > 0 {
		s += fmt.Sprintf("; %d points off every writer's phase could not be placed", e.Unsplit)
	}
	return s
}

// SharerName is the split attribute's value for chain k (≥ 1) of a shared
// start: WriterName and the chain's number.
func SharerName(start uint64, k uint8) string {
	return WriterName(start) + "-" + strconv.Itoa(int(k))
}

func (c *sharer) accept(p Point) {
	c.time, c.fp = p.Time, p.Fingerprint
	c.points++
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

func (t *Tracker) learnShared(s *stream) bool {
	j := t.judge
	if len(j.shared) >= j.max {
		j.stats.Refused++
		j.stats.SharedUnsplit++
		return false
	}
	c := &s.cur
	sh := &sharedStart{start: c.start, seen: t.now}
	sh.keep(sharer{time: c.time, value: c.value, sum: c.sum, fp: c.fp, points: 1})
	j.shared[s.id] = sh
	s.flags |= flagShared
	return true
}

// keep adds a point to the ring.
func (sh *sharedStart) keep(q sharer) {
	if sh.ring == nil {
		sh.ring = new([sharedRing]sharer)
	}
	for k := range min(int(sh.kept), sharedRing) {
		if sh.ring[k].time == q.time && sh.ring[k].fp == q.fp {
			return
		}
	}
	sh.ring[sh.kept%sharedRing] = q
	sh.kept++
}

// learn keeps p while learning and says whether the stream is split now
// (p is then judged by shared). r is what today's rules make of p.
func (t *Tracker) learn(s *stream, sh *sharedStart, p Point, r Reason) bool {
	if sh.gaveUp || sh.ring == nil {
		if r == ReasonDecrease {
			sh.unsplit++
			t.judge.stats.SharedUnsplit++
		}
		return false
	}
	if r == ReasonDuplicate {
		return false
	}
	n := min(int(sh.kept), sharedRing)
	if n+1 >= sharedLearn && (n+1)%2 == 0 {
		var ts [sharedRing + 1]sharer
		copy(ts[:], sh.ring[:n])
		ts[n] = sharerOf(p)
		var cands [4]uint64
		for _, iv := range cands[:intervals(ts[:n+1], &cands)] {
			if sh.chains(ts[:n], iv, s) {
				sh.iv, sh.split, sh.ring = iv, p.Time, nil
				t.judge.stats.SharedSplit++
				t.judge.scan = true
				return true
			}
		}
	}
	sh.keep(sharerOf(p))
	if sh.kept >= sharedRing { // a full ring, and no interval with two chains
		sh.gaveUp, sh.ring = true, nil
	}
	return false // while learning, a fall is not counted unsplit: it may be split yet
}

func sharerOf(p Point) sharer {
	q := sharer{time: p.Time, value: p.Value, sum: math.NaN(), fp: p.Fingerprint, points: 1}
	if p.HasSum {
		q.sum = p.Sum
	}
	return q
}

// phaseTolerance is how far from a whole number of intervals a point of
// a chain may lie: an SDK's timer drifts and its exports wait for a busy
// scheduler.
func phaseTolerance(iv uint64) uint64 { return iv/10 + uint64(10*time.Millisecond) }

// intervals puts into out the export intervals that the times of pts may
// repeat, best first, and returns how many: the gaps d of at least 2
// TimeSlack between them such that at most one in eight of the points at
// least d older than the newest (four or more) lacks a point d later
// (within phaseTolerance; a lost export), by the share that has one, the
// shorter of equal shares first (a multiple of the interval repeats as
// well), gaps within the tolerance of a better one left out. A gap that
// is a fraction of the interval repeats too when the writers' phases
// divide it evenly; chains tells them apart by the values.
func intervals(pts []sharer, out *[4]uint64) int {
	var ts [sharedRing + 1]uint64
	for k := range pts {
		ts[k] = pts[k].time
	}
	t := ts[:len(pts)]
	slices.Sort(t)
	newest := t[len(t)-1]
	type cand struct {
		d     uint64
		share float64
	}
	var cs []cand
	for i := range t {
		for j := i + 1; j < len(t); j++ {
			d := t[j] - t[i]
			if d < 2*TimeSlack {
				continue
			}
			tol := phaseTolerance(d)
			eligible, support := 0, 0
			for _, x := range t {
				if x+d > newest+tol {
					break
				}
				eligible++
				k, _ := slices.BinarySearch(t, x+d-tol)
				if k < len(t) && t[k] <= x+d+tol {
					support++
				}
			}
			if eligible < 4 || (eligible-support)*8 > eligible {
				continue
			}
			cs = append(cs, cand{d, float64(support) / float64(eligible)})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.share != b.share:
			if a.share > b.share {
				return -1
			}
			return 1
		}
		return cmpUint(a.d, b.d)
	})
	n := 0
next:
	for _, c := range cs {
		for _, d := range out[:n] {
			if max(c.d, d)-min(c.d, d) <= phaseTolerance(d) {
				continue next
			}
		}
		out[n] = c.d
		if n++; n == len(out) {
			break
		}
	}
	return n
}

// chains builds the chains of the kept points pts by their export phase
// (interval iv), and says whether two or more writers have two points or
// more each, one of them holding the elected writer's newest point, and
// no more than one point in eight fell below the chain whose phase it was
// on: then they are the chains, the one holding the elected writer's
// newest point first.
func (sh *sharedStart) chains(pts []sharer, iv uint64, s *stream) bool {
	var ts [sharedRing]sharer
	copy(ts[:], pts)
	sorted := ts[:len(pts)]
	slices.SortFunc(sorted, func(a, b sharer) int { return cmpUint(a.time, b.time) })
	var ch [MaxSharers]sharer
	n, breaks := 0, 0
	for _, q := range sorted {
		p := Point{Time: q.time, Value: q.value, Sum: q.sum, HasSum: !math.IsNaN(q.sum), Fingerprint: q.fp}
		if k, ok, _ := phaseFit(ch[:n], p, iv); ok {
			ch[k].accept(p)
			continue
		}
		if onPhase(ch[:n], p, iv) {
			// On a chain's phase one interval on, but below its value: a
			// second writer on that phase. iv is a fraction of the
			// interval (the writers' phases divide it evenly) unless this
			// is rare.
			if breaks++; breaks*8 > len(pts) {
				return false
			}
		}
		if n < MaxSharers {
			ch[n] = q
			n++
		}
	}
	m := 0
	for k := range n {
		if ch[k].points >= 2 {
			ch[m] = ch[k]
			m++
		}
	}
	if m < 2 {
		return false
	}
	found := false
	for k := range m {
		if ch[k].time == s.cur.time && ch[k].fp == s.cur.fp {
			ch[0], ch[k] = ch[k], ch[0]
			found = true
			break
		}
	}
	if !found {
		// The elected writer's newest point is on no chain of two points
		// or more: chain 0, which passes unlabelled, would be another
		// writer's, below the values passed.
		return false
	}
	sh.ch, sh.n = ch, uint8(m)
	return true
}

// onPhase says whether p lies one interval iv after some chain's newest
// point, whatever its value.
func onPhase(ch []sharer, p Point, iv uint64) bool {
	tol := phaseTolerance(iv)
	for k := range ch {
		if c := &ch[k]; p.Time > c.time {
			gap := p.Time - c.time
			if max(gap, iv)-min(gap, iv) <= tol {
				return true
			}
		}
	}
	return false
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// phaseFit returns the chain that p continues (a later time, a value not
// below) whose newest point lies nearest a whole number of intervals iv
// before p, within phaseTolerance, fewer intervals first; ambiguous: a
// second chain fits one interval before too (two writers' phases within
// the tolerance): then the one whose newest value is nearest below p's,
// as the values alone tell them apart.
func phaseFit(ch []sharer, p Point, iv uint64) (int, bool, bool) {
	best, bestScore, fits, tight := -1, uint64(math.MaxUint64), 0, -1
	tol := phaseTolerance(iv)
	for k := range ch {
		c := &ch[k]
		if !c.continues(p) {
			continue
		}
		gap := p.Time - c.time
		m := (gap + iv/2) / iv
		if m == 0 || m > 2 {
			continue // a chain that missed more than one export is not matched by phase
		}
		e := max(gap, m*iv) - min(gap, m*iv)
		if e > tol {
			continue
		}
		if m == 1 {
			fits++
			if tight < 0 || c.value > ch[tight].value {
				tight = k
			}
		}
		if score := e + (m-1)*iv; score < bestScore {
			best, bestScore = k, score
		}
	}
	if fits > 1 {
		return tight, true, true // the nearest value below: two monotone series kept apart
	}
	return best, best >= 0, false
}

// shared judges a point of a split start: chain 0's pass as the elected
// writer's, the others' are labelled (Decision.Sharer).
func (t *Tracker) shared(s *stream, sh *sharedStart, p Point, d Decision) Decision {
	if t.now > sh.seen {
		sh.seen = t.now
	}
	k, dup, ok := sh.assign(p)
	switch {
	case dup:
		d.Sharer = uint8(k)
		return dropped(d, ReasonDuplicate)
	case !ok && sh.orphan.time != 0 && orphanGoesOn(&sh.orphan, p, sh.iv) && sh.overdue(&sh.orphan) >= 0:
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

func (t *Tracker) journalShared(id ID, sh *sharedStart, k int, before sharer) {
	if t.journal == nil {
		return
	}
	t.journal.entries = append(t.journal.entries, journalEntry{shared: &sharedUndo{id: id, k: uint8(k), n: sh.n, before: before}})
}

// undoShared takes back a shared point's change unless the chain moved on.
func (j *judge) undoShared(u *sharedUndo) bool {
	sh := j.shared[u.id]
	if sh == nil || int(u.k) >= int(sh.n) || !sh.ch[u.k].same(&u.after) {
		return false
	}
	if u.n == u.k && int(u.k) == int(sh.n)-1 {
		sh.n-- // the chain it started
		sh.ch[u.k] = sharer{}
		return true
	}
	sh.ch[u.k] = u.before
	return true
}

// same compares two chain states (a NaN sum equal to a NaN sum).
func (c *sharer) same(o *sharer) bool {
	return c.time == o.time && c.fp == o.fp && c.points == o.points &&
		math.Float64bits(c.value) == math.Float64bits(o.value) && math.Float64bits(c.sum) == math.Float64bits(o.sum)
}

// late says whether p may be a late point of some chain: not after its
// newest, and not above it (out of order, no proof of another writer).
func (sh *sharedStart) late(p Point) bool {
	for k := range sh.n {
		c := &sh.ch[k]
		if p.Time <= c.time && (p.NoValue || !(p.Value > c.value) && !(p.HasSum && p.Sum > c.sum)) {
			return true
		}
	}
	return false
}

// assign returns the chain p continues by its export phase (phaseFit),
// or by its value when it came early to another chain (flushOf). dup: p
// repeats chain k's newest.
func (sh *sharedStart) assign(p Point) (k int, dup, ok bool) {
	for i := range int(sh.n) {
		if c := &sh.ch[i]; p.Time == c.time && p.Fingerprint == c.fp {
			return i, true, true
		}
	}
	k, ok, ambiguous := phaseFit(sh.ch[:sh.n], p, sh.iv)
	if ok {
		if j := sh.flushOf(p, k); j >= 0 {
			// On chain k's phase, but continuing chain j's value, to
			// which it came early: j's writer's final flush.
			sh.byValue++
			return j, false, true
		}
	}
	switch {
	case ambiguous:
		sh.ambiguous++
	case ok:
		sh.phase++
	}
	return k, false, ok
}

// Shared returns what the Tracker knows of stream id's shared start, with
// Policy.Auto; false when its start is not shared.
func (t *Tracker) Shared(id ID) (SharedEvidence, bool) {
	if t.judge == nil {
		return SharedEvidence{}, false
	}
	sh := t.judge.shared[id]
	if sh == nil {
		return SharedEvidence{}, false
	}
	if sh.iv == 0 && !sh.gaveUp {
		return SharedEvidence{}, false // learning
	}
	return SharedEvidence{Start: sh.start, Writers: int(sh.n), Unsplit: sh.unsplit, Phase: sh.phase, Split: sh.split, Interval: sh.iv, Ambiguous: sh.ambiguous, ByValue: sh.byValue}, true
}

// flushRise is how many intervals' worth of a chain's average rise a
// point may add to it and still be its regular export (flushOf).
const flushRise = 3

// flushOf returns the chain other than k (the one whose phase p is on)
// that p came early to (within an interval of its newest point, off its
// phase: an export such as a flush at shutdown) and whose value p goes on
// from plausibly, when p's rise over chain k's is not: a writer's value
// rises from its own newest by about its average rate (its value over
// the time since the start the chains share), so a rise of more than
// flushRise intervals' worth of it in one export is another writer's
// value, and one of at most that much over chain j's is j's; -1: none.
func (sh *sharedStart) flushOf(p Point, k int) int {
	if p.NoValue || sh.iv == 0 {
		return -1
	}
	if sh.plausible(k, p) {
		return -1
	}
	tol := phaseTolerance(sh.iv)
	best := -1
	for j := range int(sh.n) {
		c := &sh.ch[j]
		if j == k || !c.continues(p) || p.Time-c.time+tol >= sh.iv || !sh.plausible(j, p) {
			continue
		}
		if best < 0 || c.value > sh.ch[best].value {
			best = j // the nearest below
		}
	}
	return best
}

// plausible says whether p's rise over chain k's newest value is at most
// flushRise intervals' worth of the chain's average rise (and at least
// as much for its sum, when it has one).
func (sh *sharedStart) plausible(k int, p Point) bool {
	c := &sh.ch[k]
	if c.time <= sh.start {
		return true // no average yet
	}
	el := float64(c.time - sh.start)
	limit := func(v float64) float64 { return flushRise * math.Abs(v) * float64(sh.iv) / el }
	if p.Value-c.value > limit(c.value) {
		return false
	}
	return !p.HasSum || math.IsNaN(c.sum) || p.Sum-c.sum <= limit(c.sum)
}
