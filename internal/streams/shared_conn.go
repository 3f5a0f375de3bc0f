package streams

import (
	"math"
	"slices"
)

// The connection a shared start's point came on (Point.Conn). Each process
// exports on its own connection, so once the connections have told a
// shared start's chains apart, a point goes to the chain whose connection
// it came on, whatever its phase says: a final flush off its writer's
// timer, a point whose phase lies within the tolerance of two writers',
// or one that arrived late onto another writer's phase. Nothing trusts a
// connection before it has shown itself one writer's: a sender behind a
// proxy or an agent collector shares its connections with others, and an
// HTTP receiver names the sender's address without its port (one for
// every process of a host). So the connections are trusted once
// connTrust points placed by their phase alone came on their chain's own
// connection, and no longer once the points whose connection and phase
// name two chains are two or more and a quarter as many as those that
// agree, or a value on a chain's connection falls below that chain's (a
// single writer's never does).

// connTrust is how many points placed by phase alone must agree with
// their chains' connections before a connection places a point.
const connTrust = 8

// connEvidence is what a shared start's connections have shown.
type connEvidence struct {
	// agree counts the points placed by phase that came on their chain's
	// connection, disagree those that came on another chain's (or that
	// their connection placed against their phase).
	agree, disagree uint32
	broken          bool   // too many disagreements: the connections are not the writers'
	placed          uint64 // points placed by their connection where the phase placed them elsewhere or nowhere
	split           bool   // the start was split by its connections (chainsByConn)
}

// trusted says whether the connections place points.
func (e *connEvidence) trusted() bool { return !e.broken && e.agree >= connTrust }

// disagreed counts a point whose connection and phase name two chains:
// rare when each connection is one writer's (a timer moved), one in two
// or more when a pool of connections carries every writer's exports.
func (e *connEvidence) disagreed() {
	e.disagree++
	if e.disagree >= 2 && 4*e.disagree >= e.agree {
		e.broken = true
	}
}

// owner returns the one chain of ch whose newest point came on conn, -1
// when none or more than one did.
func owner(ch []sharer, conn uint64) int {
	k := -1
	for i := range ch {
		if ch[i].conn == conn {
			if k >= 0 {
				return -1
			}
			k = i
		}
	}
	return k
}

// connChain returns the chain whose connection p came on, when the
// connections are trusted and p may be that chain's next point; -1
// otherwise. A later point below that chain's value breaks the trust.
func (sh *sharedStart) connChain(p Point) int {
	if p.Conn == 0 || !sh.conns.trusted() {
		return -1
	}
	k := owner(sh.ch[:sh.n], p.Conn)
	if k < 0 {
		return -1 // a connection no chain came on yet (a reconnect): by phase
	}
	if c := &sh.ch[k]; !c.continues(p) {
		if p.Time > c.time && !p.NoValue {
			sh.conns.broken = true // one connection, a value that fell: two writers
		}
		return -1
	}
	return k
}

// noteConn weighs a point that its phase alone placed on chain k (before
// the chain takes it): on k's connection, it agrees; on another chain's,
// it disagrees.
func (e *connEvidence) noteConn(ch []sharer, k int, p Point) {
	if p.Conn == 0 || e.broken {
		return
	}
	for i := range ch {
		if i != k && ch[i].conn == p.Conn {
			e.disagreed()
			return
		}
	}
	if ch[k].conn == p.Conn {
		e.agree++
	}
}

// connLearn is the fewest kept points from which a shared start is split
// by its connections: two chains of connPoints points. connRing is how many
// points learning takes with connections (the newest sharedRing of them
// kept) before it gives up.
const (
	connPoints = 3
	connLearn  = 2 * connPoints
	connRing   = 2 * sharedRing
)

// chainsByConn builds the chains of the kept points pts by the connection
// each came on, and says whether they are the writers: two or more chains,
// each of connPoints points or more, each connection's values never falling (one
// writer's), every two chains told apart by a point of one that a single
// writer could not have written after or before a point of the other
// (contradicts: a copy, a second reader with its own connection, never
// is), one of them holding the elected writer's newest point (chain 0,
// whose later points are not below it).
// Then it sets the chains and returns the
// export interval, the median gap between a chain's consecutive points
// (for the points that come on a connection no chain came on yet).
func (sh *sharedStart) chainsByConn(pts []sharer, s *stream) (uint64, bool) {
	var ts [sharedRing + 1]sharer
	copy(ts[:], pts)
	sorted := ts[:len(pts)]
	slices.SortFunc(sorted, func(a, b sharer) int { return cmpUint(a.time, b.time) })
	var ch [MaxSharers]sharer
	var of [sharedRing + 1]int8 // each sorted point's chain; -1: none
	n := 0
	for i, q := range sorted {
		of[i] = -1
		if q.conn == 0 {
			continue
		}
		k := owner(ch[:n], q.conn)
		switch {
		case k < 0 && n == MaxSharers:
			return 0, false
		case k < 0:
			k, ch[n] = n, q
			n++
		default:
			p := Point{Time: q.time, Value: q.value, Sum: q.sum, HasSum: !math.IsNaN(q.sum), Fingerprint: q.fp, Conn: q.conn}
			if !ch[k].continues(p) {
				sh.conns.broken = true // a connection whose value fell: not one writer's
				return 0, false
			}
			ch[k].accept(p)
		}
		of[i] = int8(k)
	}
	// Every connection's writer has shown itself connPoints times: a
	// writer met fewer times may not be placed yet, and two gaps each
	// show that its connection's exports repeat one interval.
	for k := range n {
		if ch[k].points < connPoints {
			return 0, false
		}
	}
	if n < 2 {
		return 0, false
	}
	var keep [MaxSharers]int8
	for k := range n {
		keep[k] = int8(k)
	}
	m := n
	var told [MaxSharers][MaxSharers]bool
	var last [MaxSharers]uint64
	var gapBuf [sharedRing]uint64
	gaps := gapBuf[:0]
	for i, a := range sorted {
		if of[i] < 0 || keep[of[i]] < 0 {
			continue
		}
		ka := keep[of[i]]
		if last[ka] != 0 {
			gaps = append(gaps, a.time-last[ka])
		}
		last[ka] = a.time
		pa := Point{Time: a.time, Value: a.value, Sum: a.sum, HasSum: !math.IsNaN(a.sum)}
		for j, b := range sorted {
			if of[j] < 0 || keep[of[j]] < 0 || keep[of[j]] == ka {
				continue
			}
			if b.contradicts(pa) {
				kb := keep[of[j]]
				told[ka][kb], told[kb][ka] = true, true
			}
		}
	}
	for a := range m {
		for b := a + 1; b < m; b++ {
			if !told[a][b] {
				return 0, false // two connections that may be one writer's readers
			}
		}
	}
	// Chain 0 passes unlabelled: the one that holds the elected writer's
	// newest point, whose later points cannot fall below it.
	found := false
	for i, a := range sorted {
		if of[i] >= 0 && a.time == s.cur.time && a.fp == s.cur.fp {
			k := keep[of[i]]
			ch[0], ch[k] = ch[k], ch[0]
			found = true
			break
		}
	}
	if !found {
		return 0, false
	}
	// One export interval: each chain's gaps whole intervals (one, or
	// two: a lost export), within the tolerance. Connections that carry
	// several writers' exports (a pool behind a proxy) interleave their
	// phases.
	var byLen [sharedRing]uint64
	sortedGaps := byLen[:len(gaps)]
	copy(sortedGaps, gaps)
	slices.Sort(sortedGaps)
	iv := sortedGaps[len(sortedGaps)/2]
	if iv < 2*TimeSlack {
		return 0, false
	}
	tol := phaseTolerance(iv)
	for _, g := range gaps {
		if m := (g + iv/2) / iv; m == 0 || m > 2 || max(g, m*iv)-min(g, m*iv) > tol {
			return 0, false
		}
	}
	// Trusted to place points only once connTrust points placed by
	// their phase came on their chains' connections.
	sh.ch, sh.n, sh.conns = ch, uint8(m), connEvidence{split: true}
	return iv, true
}
