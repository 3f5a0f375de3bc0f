package streams

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Held restarts (Policy.Auto with held points). A writer of a cumulative
// stream whose start lies at or after the elected writer's newest point
// T0 has counted nothing that writer reported: a restart of it, or a
// second writer with fresh state whose first measurement came after T0 (a
// metric reader added to a running process, as FastAPI 0.142 adds one at
// startup). The two differ only in what the elected writer does next: a
// restarted writer sends nothing more, a live one sends its next point
// within its interval. So while the elected writer is not yet overdue (its
// observed interval is known and the point came sooner than its failover
// time after T0; while it has sent a single point, its interval is taken
// to be the time from its start to that point, at most RestartOneShot),
// such a point is dropped and held, twice: as an undecided
// second writer's (held.go, labelled, sent if it is found a peer) and here,
// unlabelled, every point of it in order. Then:
//
//   - the elected writer sends again: the held writer is a second writer;
//     its held restart is discarded (its labelled held point stands for
//     it, as for any undecided writer);
//   - the held writer sends a point the failover time or more after T0:
//     it is elected (restart) at that point, and its held points go out
//     before it (Tracker.TakeRestarts);
//   - neither: once the caller's clock passes the failover time after the
//     first point was held, TakeRestarts elects it and hands its points out
//     (at the caller's next request; the processor also at shutdown).
//
// A known copy's restart-looking point is dropped, not elected, while the
// elected writer is not overdue. The held points count against
// Policy.MaxHeldBytes with the others (refused past it); without room to
// judge the writer (MaxJudged) or to hold points (MaxHeldBytes 0), or
// when the elected writer's interval cannot be told (a single point with
// no start), a restart is elected at once.

// RestartOneShot bounds the interval a held restart assumes of an elected
// writer that has sent a single point: the time from its start to that
// point, at most this.
const RestartOneShot = time.Minute

// pendingRestart is a pair's held restart.
type pendingRestart struct {
	ref, t0 uint64 // the elected writer's start and newest time when it was first held
	due     int64  // the caller's clock from which it is released
	pts     []held // oldest first
}

// outPoint is a held restart's point to hand out; elect: the first of a
// restart elected by TakeRestarts.
type outPoint struct {
	held
	elect bool
}

// heldRestart says whether the restart-looking point p (gap after the
// elected writer's newest point c.time) is dropped rather than elected,
// because the elected writer is not yet overdue, or because it breaks the
// order of a held restart's points (own: the reason); hold: the point's
// writer is an undecided pair whose points may be held (then the restart
// is pending).
func (t *Tracker) heldRestart(s *stream, p Point, gap uint64, cls Class, own Reason, hold bool) bool {
	c := &s.cur
	if t.judge == nil {
		return false
	}
	if own != ReasonNone {
		// A repeat, late point or decrease of a held restart's writer is
		// dropped, whenever it comes: its held points went out of order.
		i, ok := t.judge.byKey[pairKey{s.id, p.Start}]
		return ok && t.judge.pairs[i].restart != nil
	}
	if !hold && cls != ClassCopy {
		return false
	}
	iv := c.interval
	if iv == 0 && c.start != 0 && c.time > c.start {
		// A single point so far: an SDK's first export comes one export
		// interval after it starts counting, or sooner.
		iv = min(c.time-c.start, uint64(RestartOneShot))
	}
	fo, ok := t.failoverAfter(iv)
	if !ok || gap >= fo {
		return false
	}
	if hold {
		j := t.judge
		if i, ok := j.byKey[pairKey{s.id, p.Start}]; ok {
			jp := &j.pairs[i]
			if jp.restart == nil || jp.restart.ref != c.start || jp.restart.t0 != c.time {
				j.cancelRestart(i)
				jp.restart = &pendingRestart{ref: c.start, t0: c.time, due: t.now + int64(fo)}
				j.restarts = append(j.restarts, i)
			}
		}
	}
	return true
}

// HoldRestart keeps md (one point of the stream's own series, unlabelled,
// with its resource, scope and metric; size its encoded size) as the
// newest held point of the pending restart of the writer that started at
// writer, after Observe said Decision.Restart. It returns false when it is
// not held: no such restart, or MaxHeldBytes would be exceeded (counted).
func (t *Tracker) HoldRestart(id ID, writer uint64, md pmetric.Metrics, size int) bool {
	j := t.judge
	if !j.holding() {
		return false
	}
	i, ok := j.byKey[pairKey{id, writer}]
	if !ok || j.pairs[i].restart == nil {
		return false
	}
	if j.heldBytes+size > j.maxHeld {
		j.stats.Held[HeldRefused]++
		return false
	}
	pr := j.pairs[i].restart
	pr.pts = append(pr.pts, held{md: md, size: size, ok: true})
	j.heldBytes += size
	return true
}

// keepRestart forgets the held restart of the writer that started at
// other, about to be elected over old, unless old is still the writer it
// was held against with the same newest point: only then are its held
// points the stream's next ones.
func (j *judge) keepRestart(id ID, other uint64, old *writer) {
	i, ok := j.byKey[pairKey{id, other}]
	if !ok {
		return
	}
	if pr := j.pairs[i].restart; pr != nil && (pr.ref != old.start || pr.t0 != old.time) {
		j.cancelRestart(i)
	}
}

// releaseRestart moves pair slot i's held restart points to the points to
// send (its writer was elected).
func (j *judge) releaseRestart(i uint32) {
	pr := j.pairs[i].restart
	if pr == nil {
		return
	}
	for _, h := range pr.pts {
		j.out = append(j.out, outPoint{held: h}) // still counted in heldBytes until handed out
	}
	pr.pts = nil
	j.cancelRestart(i)
}

// cancelRestart forgets pair slot i's held restart, if any: its writer is
// a second writer after all (its labelled held point stands for it), or it
// is forgotten.
func (j *judge) cancelRestart(i uint32) {
	jp := &j.pairs[i]
	if jp.restart == nil {
		return
	}
	for _, h := range jp.restart.pts {
		j.heldBytes -= h.size
	}
	jp.restart = nil
	for k, r := range j.restarts {
		if r == i {
			last := len(j.restarts) - 1
			j.restarts[k] = j.restarts[last]
			j.restarts = j.restarts[:last]
			break
		}
	}
}

// restartPoints is the number of held restart points.
func (j *judge) restartPoints() int {
	n := len(j.out)
	for _, i := range j.restarts {
		n += len(j.pairs[i].restart.pts)
	}
	return n
}

// TakeRestarts elects the held restarts whose elected writer stayed quiet
// until the caller's clock now passed their due time (every one still
// pending, with all: at shutdown), discards those whose elected writer
// sent again or changed, and calls fn with the points to send as their
// streams' own, oldest first per stream: those of restarts elected so, and
// of restarts elected by a point of their own since the last call (to be
// sent before that point). elected is set on the first point of each
// restart that TakeRestarts elected (the caller counts the election; one
// elected by a point was in that point's Decision). Cheap when no restart
// is held.
func (t *Tracker) TakeRestarts(now int64, all bool, fn func(md pmetric.Metrics, size int, elected bool)) {
	j := t.judge
	if j == nil || len(j.restarts) == 0 && len(j.out) == 0 {
		return
	}
	for k := 0; k < len(j.restarts); {
		i := j.restarts[k]
		jp := &j.pairs[i]
		pr := jp.restart
		if !all && now < pr.due {
			k++
			continue
		}
		// Both remove slot i from j.restarts (the one at k moves in).
		si, _, ok := t.index.find(&jp.id, t)
		if !ok {
			j.cancelRestart(i)
			continue
		}
		s := t.at(si)
		if s.cur.start != pr.ref || s.cur.time != pr.t0 || jp.other < s.cur.time || jp.own.time <= s.cur.time || len(pr.pts) == 0 {
			j.cancelRestart(i)
			continue
		}
		p := Point{Start: jp.other, Time: jp.own.time, Value: jp.own.value, Fingerprint: jp.own.fp}
		if !math.IsNaN(jp.own.sum) {
			p.Sum, p.HasSum = jp.own.sum, true
		}
		s.version = t.nextVersion() // a request in flight must not undo it
		n := len(j.out)
		t.elect(s, p, false, ElectionRestart, Decision{})
		if len(j.out) > n {
			j.out[n].elect = true
		}
	}
	out := j.out
	j.out = nil
	for _, h := range out {
		j.heldBytes -= h.size
		j.stats.Held[HeldReleased]++
		fn(h.md, h.size, h.elect)
	}
	clear(out)
	if j.out == nil {
		j.out = out[:0]
	}
}

// RestartRehold puts back a point that TakeRestarts handed out and that
// could not be delivered: it is handed out again by the next TakeRestarts
// (its writer was elected; the election stands).
func (t *Tracker) RestartRehold(md pmetric.Metrics, size int) {
	j := t.judge
	if j == nil {
		return
	}
	j.out = append(j.out, outPoint{held: held{md: md, size: size, ok: true}})
	j.heldBytes += size
	j.stats.Held[HeldReleased]--
}
