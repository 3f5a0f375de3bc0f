package streams

import "math"

// The joint test of a histogram's count and sum (docs/metrics.md,
// "overlap: auto"). A copy counts a suffix of the earlier writer's
// measurements: for one integer v (the earlier writer's count at the join)
// and one real c2 (its sum then), every point x of E and y of L satisfy
//
//	E_count(ty) = y.count + v,   E_sum(ty) = y.sum + c2.
//
// So j = x.count − y.count − v is the number of E's measurements between
// the two reads (after y's when j ≥ 0, after x's when j < 0), and their
// sum x.sum − y.sum − c2 (negated when j < 0) lies within j times the
// measurements' extremes: those between y's read and x's are E's, within
// x's cumulative min and max; those between x's read and y's (j < 0, x
// read at or past the join: x.count ≥ v) are L's, within y's. A pair with
// j = 0 pins c2 exactly. Each candidate v keeps the intersection of its
// c2 ranges; a candidate whose range empties is not the join, and when no
// candidate is left the later writer is a peer.
//
// The test needs no time order (the counts say how many measurements lie
// between two reads), so it also compares points exported within
// TimeSlack of each other: peers that count alike on one beat, whose
// ordered bounds never cross, are told apart by their sums, which differ
// by the measurements' spread. It relies on an SDK reading a point's
// count, sum, min and max together (the Go SDK's hot and cold swap, the
// JS SDK's single thread, the Python SDK's lock), and on cumulative
// extremes (a pair with noMM is not tested).

// joint is a Pair's state of the joint test.
type joint struct {
	base   float64 // the first candidate count at the join
	scale  float64 // the largest magnitude compared
	lo, hi [JointCandidates]float64
	tests  uint32
	alive  uint16 // bit i: candidate base+i still fits
	on     bool
}

// jointTest applies the joint test to a point x of the earlier writer and
// y of the later, and sets the pair's class to peer when no join count is
// left.
func (p *Pair) jointTest(x, y *sample) {
	if p.class == ClassPeer || p.noMM || p.noFloor || !x.mm || !y.mm || x.n < 2 || y.n < 2 ||
		p.shape.Kind() == KindSum || p.bounded&1 == 0 || math.IsInf(p.hi[0], 1) {
		return
	}
	tol := RelEpsilon * p.scale[0]
	first, last := math.Ceil(max(p.lo[0], 0)-tol), math.Floor(p.hi[0]+tol)
	jt := &p.joint
	if !jt.on {
		if last-first >= JointCandidates || last < first {
			return // too many candidates yet (or none: the count test decides)
		}
		jt.on, jt.base = true, first
		for i := range JointCandidates {
			jt.lo[i], jt.hi[i] = math.Inf(-1), math.Inf(1)
		}
		jt.alive = uint16(1)<<uint(last-first+1) - 1
	}
	jt.tests++
	// Where the measurements between the two reads lie: within the
	// writer's extremes since its start, or, for delta chains, within
	// those of the intervals that hold them (within).
	xmn, xmx, ymn, ymx := x.mn, x.mx, y.mn, y.mx
	if x.iv.kind != ivNone {
		if mn, mx, ok := p.within(0, x, y.time); ok {
			xmn, xmx = mn, mx
		}
	}
	if y.iv.kind != ivNone {
		if mn, mx, ok := p.within(1, y, x.time); ok {
			ymn, ymx = mn, mx
		}
	}
	s := x.v[1] - y.v[1]
	jt.scale = max(jt.scale, math.Abs(x.v[1]), math.Abs(y.v[1]))
	for i := range JointCandidates {
		bit := uint16(1) << i
		if jt.alive&bit == 0 {
			continue
		}
		v := jt.base + float64(i)
		if v < first || v > last {
			jt.alive &^= bit // outside the count's bounds now
			continue
		}
		if x.v[0] < v {
			continue // x read before the join: what lies between is not all L's
		}
		j := x.v[0] - y.v[0] - v
		var l, h float64
		if j >= 0 {
			l, h = s-j*xmx, s-j*xmn
			jt.scale = max(jt.scale, j*math.Abs(xmx), j*math.Abs(xmn))
		} else {
			l, h = s-j*ymn, s-j*ymx
			jt.scale = max(jt.scale, -j*math.Abs(ymx), -j*math.Abs(ymn))
		}
		jt.lo[i], jt.hi[i] = max(jt.lo[i], l), min(jt.hi[i], h)
		if jt.lo[i]-jt.hi[i] > RelEpsilon*jt.scale {
			jt.alive &^= bit
		}
	}
	if jt.alive == 0 {
		p.class, p.part, p.pooled = ClassPeer, partJoint, false
		p.crossLo, p.crossHi = first, last
	}
}

// within returns the extremes of what writer w's delta chain measured
// after the other writer's read at time other, up to s's read: the union
// of the extremes of s's interval and of the chain's intervals before it
// that may end after that read (later than other − TimeSlack: an SDK
// stamps a read a little before it makes it). Only when the retained
// points hold every such interval, each linked to the one before (a gap
// breaks the link) or the chain's first: otherwise, or when none of them
// counted anything, ok is false and the running extremes bound them.
func (p *Pair) within(w int, s *sample, other uint64) (mn, mx float64, ok bool) {
	after := other - min(other, TimeSlack)
	mn, mx = math.Inf(1), math.Inf(-1)
	cur := s
	for range History {
		iv := &cur.iv
		if iv.kind == ivNone {
			return 0, 0, false
		}
		if !iv.empty {
			if !iv.mm {
				return 0, 0, false
			}
			mn, mx = min(mn, iv.mn), max(mx, iv.mx)
		}
		if iv.kind == ivFirst || iv.link <= after {
			return mn, mx, mn <= mx
		}
		var prev *sample
		for k := range History {
			if q := &p.pts[w][k]; q.time == iv.link {
				prev = q
			}
		}
		if prev == nil {
			return 0, 0, false
		}
		cur = prev
	}
	return 0, 0, false
}
