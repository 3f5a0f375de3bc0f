package streams

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The classifier's part of a snapshot (format 3): its pairs, then its
// pooled writers, each a fixed-size record of little-endian words. The
// retained points' histogram min and max are not stored (a restored pair
// compares them again from its next points), nor are held points.
const (
	pairWords   = 4 + 8 + 2 + 2*History*(2+MaxParts) + 4 + 3*MaxParts + 6 + 4
	writerWords = 6
)

type enc struct{ b []byte }

func (e *enc) u(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) f(v float64) { e.u(math.Float64bits(v)) }

type dec struct{ b []byte }

func (d *dec) u() uint64 {
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}
func (d *dec) f() float64 { return math.Float64frombits(d.u()) }

func (j *judge) appendSnapshot(b []byte) []byte {
	e := enc{b}
	if j == nil {
		e.u(0)
		e.u(0)
		return e.b
	}
	np := 0
	for i := range j.pairs {
		if j.pairs[i].live && j.pairs[i].chains == nil {
			np++
		}
	}
	e.u(uint64(np))
	for i := range j.pairs {
		jp := &j.pairs[i]
		if !jp.live || jp.chains != nil {
			continue // delta chains are not in the snapshot: judged again
		}
		e.u(binary.LittleEndian.Uint64(jp.id[:8]))
		e.u(binary.LittleEndian.Uint64(jp.id[8:]))
		e.u(jp.ref)
		e.u(jp.other)
		e.u(jp.origin)
		e.u(uint64(jp.seen))
		e.u(jp.own.time)
		e.f(jp.own.value)
		e.f(jp.own.sum)
		e.u(jp.own.fp)
		e.u(jp.wk.origin)
		e.u(jp.wk.start)
		p := &jp.Pair
		e.u(p.start[0])
		e.u(p.start[1])
		for w := range 2 {
			for k := range History {
				q := &p.pts[w][k]
				e.u(q.time)
				e.u(uint64(q.n))
				for _, v := range q.v {
					e.f(v)
				}
			}
		}
		e.f(p.last[0][0])
		e.f(p.last[0][1])
		e.f(p.last[1][0])
		e.f(p.last[1][1])
		for k := range MaxParts {
			e.f(p.lo[k])
			e.f(p.hi[k])
			e.f(p.scale[k])
		}
		pooled, noMM := uint64(0), uint64(0)
		if p.pooled {
			pooled = 1
		}
		if p.noMM {
			noMM = 1
		}
		e.u(uint64(p.bounded) | uint64(p.shape)<<8 | uint64(p.class)<<16 | uint64(p.part)<<24 | pooled<<32 | noMM<<33)
		e.u(p.layout)
		e.u(uint64(p.tests) | uint64(p.moves)<<32)
		e.u(uint64(p.points))
		e.u(p.first)
		e.u(p.decided)
		e.f(p.crossLo)
		e.f(p.crossHi)
		e.u(jp.own.ref)
		e.u(jp.own.iv)
	}
	e.u(uint64(len(j.writers)))
	for k, w := range j.writers {
		e.u(k.origin)
		e.u(k.start)
		e.u(uint64(w.class))
		e.u(uint64(w.streams))
		e.u(uint64(w.seen))
		e.u(w.start)
	}
	return e.b
}

// checkJudgeSnapshot checks the section's sizes.
func checkJudgeSnapshot(b []byte) error {
	bad := fmt.Errorf("stream tracker snapshot: a classifier section of %d bytes", len(b))
	if len(b) < 8 {
		return bad
	}
	np := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if np > uint64(len(b))/(8*pairWords) {
		return bad
	}
	b = b[np*8*pairWords:]
	if len(b) < 8 {
		return bad
	}
	nw := binary.LittleEndian.Uint64(b)
	if nw > uint64(len(b)-8)/(8*writerWords) || uint64(len(b)-8) != nw*8*writerWords {
		return bad
	}
	return nil
}

// restore adds the section's pairs of streams that t tracks, and its
// writers, up to the limit. The section was checked.
func (j *judge) restore(b []byte, t *Tracker) {
	if j == nil {
		return
	}
	d := dec{b}
	np := d.u()
	for range np {
		var jp judged
		binary.LittleEndian.PutUint64(jp.id[:8], d.u())
		binary.LittleEndian.PutUint64(jp.id[8:], d.u())
		jp.ref, jp.other, jp.origin = d.u(), d.u(), d.u()
		jp.seen = int64(d.u())
		jp.own.time, jp.own.value, jp.own.sum, jp.own.fp = d.u(), d.f(), d.f(), d.u()
		jp.wk = writerKey{d.u(), d.u()}
		p := &jp.Pair
		p.start[0], p.start[1] = d.u(), d.u()
		for w := range 2 {
			for k := range History {
				q := &p.pts[w][k]
				q.time = d.u()
				q.n = uint8(min(d.u(), MaxParts))
				for i := range q.v {
					q.v[i] = d.f()
				}
			}
		}
		p.last[0][0], p.last[0][1], p.last[1][0], p.last[1][1] = d.f(), d.f(), d.f(), d.f()
		for k := range MaxParts {
			p.lo[k], p.hi[k], p.scale[k] = d.f(), d.f(), d.f()
		}
		flags := d.u()
		p.bounded, p.shape, p.class, p.part = uint8(flags), Shape(flags>>8), Class(min(flags>>16&0xff, NumClasses-1)), uint8(min(flags>>24&0xff, partLast))
		p.pooled = flags>>32&1 != 0
		p.noMM = flags>>33&1 != 0
		p.layout = d.u()
		tm := d.u()
		p.tests, p.moves = uint32(tm), uint32(tm>>32)
		p.points = uint32(d.u())
		p.first, p.decided = d.u(), d.u()
		p.crossLo, p.crossHi = d.f(), d.f()
		jp.own.ref, jp.own.iv = d.u(), d.u() // 0 in snapshots before them: no quiet rule until its next point
		if _, _, ok := t.index.find(&jp.id, t); !ok || len(j.byKey) >= j.max {
			continue
		}
		if _, ok := j.byKey[pairKey{jp.id, jp.other}]; ok {
			continue
		}
		i := j.alloc()
		jp.live = true
		if head, ok := j.byStream[jp.id]; ok {
			jp.next = head
		}
		j.pairs[i] = jp
		j.byStream[jp.id] = i + 1
		j.byKey[pairKey{jp.id, jp.other}] = i
	}
	nw := d.u()
	for range nw {
		k := writerKey{d.u(), d.u()}
		w := pooled{class: Class(min(d.u(), NumClasses-1)), streams: uint32(d.u()), seen: int64(d.u()), start: d.u()}
		if _, ok := j.writers[k]; ok || len(j.writers) >= j.max {
			continue
		}
		j.writers[k] = w
		j.counts[w.class]++
	}
}
