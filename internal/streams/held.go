package streams

import "go.opentelemetry.io/collector/pdata/pmetric"

// Held points. An undecided second writer's points are dropped (as with
// keep_one), which loses nothing while it goes on sending: its first point
// after it is found a peer carries its whole running total. A peer decided
// only after its last point (its process ended; the deciding evidence came
// in the same request on another of its streams, or with the elected
// writer's next point) would lose what it counted. So the caller keeps
// the newest dropped point of each undecided (stream, writer) pair (Hold),
// and TakeReleased hands it back once the writer is found a peer. A newer
// point of the writer that passes supersedes it; a copy's is discarded; a
// pair forgotten while still undecided takes its held point with it
// (HeldExpired: the one case in which a peer's counts can be lost). A
// writer that goes quiet while its elected writer goes on is decided a
// peer (judge.quietPeer), so a peer is lost only when every writer of its
// stream stopped. The
// held points are bounded by Policy.MaxHeldBytes, as the caller sizes them.

// HeldOutcome says what became of a held point.
type HeldOutcome uint8

const (
	// HeldReleased: its writer was found a peer; the point was handed back.
	HeldReleased HeldOutcome = iota
	// HeldExpired: its writer was forgotten (MaxStale after its newest
	// point, or with its stream) before it was decided.
	HeldExpired
	// HeldRefused: not held, Policy.MaxHeldBytes were held already.
	HeldRefused

	// NumHeldOutcomes is the number of outcomes.
	NumHeldOutcomes = iota
)

var heldOutcomeNames = [...]string{"released", "expired", "refused"}

func (o HeldOutcome) String() string { return nameOf(heldOutcomeNames[:], o) }

// held is a pair's held point.
type held struct {
	md   pmetric.Metrics
	size int
	ok   bool
}

// holding says whether points of undecided writers are held.
func (j *judge) holding() bool { return j != nil && j.maxHeld > 0 }

// Hold keeps md (one point, labelled as its writer's own series, with its
// resource, scope and metric; size its encoded size) for the pair of
// stream id and the writer that started at writer, in place of any point
// held for it before, after Observe said Decision.Hold. It returns false
// when the point is not held: no such pair, or MaxHeldBytes would be
// exceeded (counted; a point held before stays).
func (t *Tracker) Hold(id ID, writer uint64, md pmetric.Metrics, size int) bool {
	j := t.judge
	if !j.holding() {
		return false
	}
	i, ok := j.byKey[pairKey{id, writer}]
	if !ok {
		return false
	}
	jp := &j.pairs[i]
	if jp.held.ok && j.heldBytes-jp.held.size+size <= j.maxHeld || !jp.held.ok && j.heldBytes+size <= j.maxHeld {
		if !jp.held.ok {
			j.holders = append(j.holders, i)
		} else {
			j.heldBytes -= jp.held.size
		}
		jp.held = held{md: md, size: size, ok: true}
		j.heldBytes += size
		return true
	}
	j.stats.Held[HeldRefused]++
	return false
}

// Held returns the point held for the pair of stream id and writer and
// its size, for the caller to overwrite with the writer's newer point (and
// Hold again) rather than build a new one.
func (t *Tracker) Held(id ID, writer uint64) (pmetric.Metrics, int, bool) {
	j := t.judge
	if !j.holding() {
		return pmetric.Metrics{}, 0, false
	}
	i, ok := j.byKey[pairKey{id, writer}]
	if !ok || !j.pairs[i].held.ok {
		return pmetric.Metrics{}, 0, false
	}
	return j.pairs[i].held.md, j.pairs[i].held.size, true
}

// HeldExpired returns how many held points have expired so far (cheap: for
// the caller to warn when it grows).
func (t *Tracker) HeldExpired() uint64 {
	if t.judge == nil {
		return 0
	}
	return t.judge.stats.Held[HeldExpired]
}

// Rehold puts back a point that TakeReleased handed out and that could not
// be delivered, unless the pair is gone or holds a point again; the next
// TakeReleased hands it out again.
func (t *Tracker) Rehold(id ID, writer uint64, md pmetric.Metrics, size int) {
	j := t.judge
	if !j.holding() {
		return
	}
	i, ok := j.byKey[pairKey{id, writer}]
	if !ok || j.pairs[i].held.ok {
		return
	}
	j.holders = append(j.holders, i)
	j.pairs[i].held = held{md: md, size: size, ok: true}
	j.heldBytes += size
	j.stats.Held[HeldReleased]--
	j.scan = true
}

// unhold drops pair slot i's held point, counting it as o unless o is
// NumHeldOutcomes (superseded or discarded: nothing lost).
func (j *judge) unhold(i uint32, o HeldOutcome) {
	jp := &j.pairs[i]
	if !jp.held.ok {
		return
	}
	j.heldBytes -= jp.held.size
	jp.held = held{}
	if o < NumHeldOutcomes {
		j.stats.Held[o]++
	}
	for k, h := range j.holders {
		if h == i {
			last := len(j.holders) - 1
			j.holders[k] = j.holders[last]
			j.holders = j.holders[:last]
			break
		}
	}
}

// classOf is pair slot i's class, with its pooled writer's.
func (j *judge) classOf(i uint32) Class {
	jp := &j.pairs[i]
	c := jp.class
	if jp.wk.origin != 0 {
		if w, ok := j.writers[jp.wk]; ok && w.class > c {
			c = w.class
		}
	}
	return c
}

// DropHeld forgets the points still held for undecided writers, each
// counted HeldExpired, and returns how many: for the caller's shutdown,
// since held points live in memory only. Points of writers decided since
// they were held are not counted (TakeReleased hands a peer's out, and
// a copy's is no loss).
func (t *Tracker) DropHeld() int {
	j := t.judge
	if !j.holding() {
		return 0
	}
	n := 0
	for len(j.holders) > 0 {
		i := j.holders[len(j.holders)-1]
		o := HeldOutcome(NumHeldOutcomes)
		if j.classOf(i) == ClassUndecided {
			o = HeldExpired
			n++
		}
		j.unhold(i, o)
	}
	return n
}

// TakeReleased calls fn with the held points of writers found peers since
// the last call (stream id, writer start, the point and its size), and
// drops those of writers found copies. Cheap when nothing was decided.
func (t *Tracker) TakeReleased(fn func(id ID, writer uint64, md pmetric.Metrics, size int)) {
	j := t.judge
	if !j.holding() || !j.scan {
		return
	}
	j.scan = false
	for k := 0; k < len(j.holders); {
		i := j.holders[k]
		switch j.classOf(i) {
		case ClassPeer:
			jp := &j.pairs[i]
			h := jp.held
			j.unhold(i, HeldReleased)
			fn(jp.id, jp.other, h.md, h.size)
		case ClassCopy:
			j.unhold(i, NumHeldOutcomes)
		default:
			k++
		}
	}
}
