package nested

import (
	"slices"
)

// find returns the position in the index of the live entry of kind for k,
// whose hash is h, or -1.
func (d *Detector) find(kind ikind, k *spanKey, h uint64) int32 {
	x := &d.idx
	tag := tagOf(h, kind)
	b := x.home(tag)
	for range x.b {
		bk := &x.b[b]
		if bk.mayHold(tag) {
			for j := range bk.e {
				e := bk.e[j]
				if e.tag != tag || !d.held(e.seq) {
					continue
				}
				r := &d.recs[d.slotOf(e.seq)]
				if kind == heldKind && r.key == *k ||
					kind != heldKind && [16]byte(r.key[:16]) == [16]byte(k[:16]) && r.psid == [8]byte(k[16:]) {
					return pos(b, j)
				}
			}
		}
		if bk.over == 0 {
			break
		}
		b = (b + 1) & x.mask
		x.tidy(b, d.seq0, uint32(d.n))
	}
	return -1
}

// findBoth is find(heldKind, k, h) and find(waitingKind, k, h) in one
// search.
func (d *Detector) findBoth(k *spanKey, h uint64) (held, waiting int32) {
	x := &d.idx
	th, tw := tagOf(h, heldKind), tagOf(h, waitingKind)
	held, waiting = -1, -1
	b := x.home(th)
	for range x.b {
		bk := &x.b[b]
		if bk.mayHold(th) {
			for j := range bk.e {
				e := bk.e[j]
				if e.tag != th && e.tag != tw || !d.held(e.seq) {
					continue
				}
				r := &d.recs[d.slotOf(e.seq)]
				if e.tag == th {
					if held < 0 && r.key == *k {
						held = pos(b, j)
					}
				} else if waiting < 0 && [16]byte(r.key[:16]) == [16]byte(k[:16]) && r.psid == [8]byte(k[16:]) {
					waiting = pos(b, j)
				}
			}
		}
		if bk.over == 0 {
			break
		}
		b = (b + 1) & x.mask
		x.tidy(b, d.seq0, uint32(d.n))
	}
	return held, waiting
}

// isList reports whether the entry at position p is the live list of kind
// under parent key k, whose hash is h.
func (d *Detector) isList(p int32, kind ikind, k *spanKey, h uint64) bool {
	e := *d.idx.at(p)
	if e.tag != tagOf(h, kind) || !d.held(e.seq) {
		return false
	}
	r := &d.recs[d.slotOf(e.seq)]
	return [16]byte(r.key[:16]) == [16]byte(k[:16]) && r.psid == [8]byte(k[16:])
}

// links says which list a record's prev field is for.
type links bool

const (
	waitingLinks links = false
	sibLinks     links = true
)

// push appends the span numbered seq, in slot, to the list of kind under
// its parent key pk, whose hash is hp.
func (d *Detector) push(kind ikind, pk *spanKey, hp uint64, slot int32, seq uint32) {
	r := &d.recs[slot]
	i := d.find(kind, pk, hp)
	var e *ientry
	if i < 0 {
		e = d.idx.at(d.idx.add(tagOf(hp, kind), d.seq0, uint32(d.n)))
	} else {
		e = d.idx.at(i)
	}
	if kind == sibsKind {
		r.prevSib, r.firstSib = e.seq, i < 0
	} else {
		r.prevWaiting, r.firstWaiting = e.seq, i < 0
	}
	e.seq = seq
}

// list returns the slots of the held spans of the list whose newest span
// is numbered last, oldest first, in d.scratch.
func (d *Detector) list(last uint32, l links) []int32 {
	out := d.scratch[:0]
	for seq := last; d.held(seq); {
		slot := d.slotOf(seq)
		out = append(out, slot)
		r := &d.recs[slot]
		if l == sibLinks {
			if r.firstSib {
				break
			}
			seq = r.prevSib
		} else {
			if r.firstWaiting {
				break
			}
			seq = r.prevWaiting
		}
	}
	slices.Reverse(out)
	d.scratch = out
	return out
}
