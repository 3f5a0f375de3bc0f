package streams

import (
	"math"
	"time"
)

// Placing a point of a split shared start (shared.go) on a chain: by its
// export phase (phaseFit), by the value it continues when it came early to
// another chain (flushOf), or late; an orphan off every phase, and the
// chain it goes on from (overdue).

// phaseTolerance is how far from a whole number of intervals a point of
// a chain may lie: an SDK's timer drifts and its exports wait for a busy
// scheduler.
func phaseTolerance(iv uint64) uint64 { return iv/10 + uint64(10*time.Millisecond) }

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

// assign returns the chain p continues by the connection it came on once
// the connections are trusted (connChain), else by its export phase
// (phaseFit), or by its value when it came early to another chain
// (flushOf). dup: p repeats chain k's newest.
func (sh *sharedStart) assign(p Point) (k int, dup, ok bool) {
	for i := range int(sh.n) {
		if c := &sh.ch[i]; p.Time == c.time && p.Fingerprint == c.fp {
			return i, true, true
		}
	}
	k, ok, ambiguous := phaseFit(sh.ch[:sh.n], p, sh.iv)
	if c := sh.connChain(p); c >= 0 {
		// The connection it came on (shared_conn.go), unless that breaks
		// the trust in the connections.
		switch {
		case ok && !ambiguous && c == k:
			sh.conns.agree++
			sh.phase++
			return c, false, true
		case ok && !ambiguous:
			sh.conns.disagreed()
		}
		if !sh.conns.broken {
			sh.conns.placed++
			return c, false, true
		}
	}
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
		sh.conns.noteConn(sh.ch[:sh.n], k, p)
	}
	return k, false, ok
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

// orphanGoesOn says whether p is the next export of the writer of the
// orphan point o: its value not below, one interval later.
func orphanGoesOn(o *sharer, p Point, iv uint64) bool {
	_, ok, _ := phaseFit([]sharer{*o}, p, iv)
	return ok
}

// overdue returns the chain that the orphan point o continues (a later
// time, a value not below) whose next export was due more than the
// tolerance before o and did not come, the one whose value is nearest
// below o's; -1: none.
func (sh *sharedStart) overdue(o *sharer) int {
	best := -1
	tol := phaseTolerance(sh.iv)
	p := Point{Time: o.time, Value: o.value, Sum: o.sum, HasSum: !math.IsNaN(o.sum), Fingerprint: o.fp, Conn: o.conn}
	for k := range int(sh.n) {
		c := &sh.ch[k]
		if c.continues(p) && o.time > c.time+sh.iv+tol && (best < 0 || c.value > sh.ch[best].value) {
			best = k
		}
	}
	return best
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
