package streams

import (
	"math"
	"slices"
)

// Learning a shared start (shared.go): its points are kept in a ring until
// an export interval that their times repeat is found (intervals) and, by
// it, the chains of two or more writers (chains).

// sharedRing is how many points of a shared start are kept while its
// writers' export interval is sought (learning); sharedLearn the fewest
// before it is sought.
const (
	sharedRing  = 32
	sharedLearn = 8
)

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
	// The connections first, while the points name theirs and none has
	// carried two writers' (shared_conn.go): each writer's points are its
	// own from its second on. The export phase once the ring is full, or
	// without them.
	conns := p.Conn != 0 && !sh.conns.broken
	if conns && n >= connLearn {
		var ts [sharedRing]sharer
		copy(ts[:], sh.ring[:n])
		if iv, ok := sh.chainsByConn(ts[:n], s); ok {
			sh.iv, sh.split, sh.ring = iv, p.Time, nil
			t.judge.stats.SharedSplit++
			t.judge.scan = true
			return true
		}
	}
	// Every second point: while the ring fills, at its odd sizes; once
	// full (it slides, with connections), at every second point kept.
	attempt := n+1 >= sharedLearn && (n+1)%2 == 0
	if n == sharedRing {
		attempt = sh.kept%2 == 0
	}
	if attempt && (!conns || sh.kept+1 >= sharedRing) {
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
	if sh.kept >= sharedRing && !conns || sh.kept >= connRing {
		// No interval with two chains in a full ring; with connections,
		// the newest connRing points (the ring slides) told no writers
		// apart either.
		sh.gaveUp, sh.ring = true, nil
	}
	return false // while learning, a fall is not counted unsplit: it may be split yet
}

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
	var conns connEvidence
	n, breaks := 0, 0
	for _, q := range sorted {
		p := Point{Time: q.time, Value: q.value, Sum: q.sum, HasSum: !math.IsNaN(q.sum), Fingerprint: q.fp, Conn: q.conn}
		if k, ok, ambiguous := phaseFit(ch[:n], p, iv); ok {
			if !ambiguous {
				conns.noteConn(ch[:n], k, p)
			}
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
	sh.ch, sh.n, sh.conns = ch, uint8(m), conns
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
