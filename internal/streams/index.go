package streams

import (
	"encoding/binary"
	"math/bits"
)

// index maps stream IDs to stream slots: open addressing with linear
// probing, 8 bytes a slot, at most half full. A slot holds the high 32 bits
// of the ID's hash (which also give its home position) and the stream's slot
// number plus one (0 is an empty slot), so probing, growing and deleting
// look at the streams themselves only to confirm a match. It costs 16 to 32
// bytes per stream, against 30 to 45 for a Go map of the same keys, and no
// hashing of the key beyond one multiply.
type index struct {
	slots []uint64
	mask  uint64
	n     int
}

const minIndexSlots = 1024

// hashID mixes an ID's two halves. IDs from a Hasher are uniform already;
// the mix keeps hand-made ones (tests, tools) from piling up.
func hashID(id *ID) uint32 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[0:8])^0x9e3779b97f4a7c15, binary.LittleEndian.Uint64(id[8:16])^0xc2b2ae3d27d4eb4f)
	return uint32((hi ^ lo) >> 32)
}

func newIndex() index {
	return index{slots: make([]uint64, minIndexSlots), mask: minIndexSlots - 1}
}

// find returns the slot number of id's stream in t, and its position in
// the index.
func (x *index) find(id *ID, t *Tracker) (uint32, uint64, bool) {
	h := hashID(id)
	for pos := uint64(h) & x.mask; ; pos = (pos + 1) & x.mask {
		s := x.slots[pos]
		if s == 0 {
			return 0, pos, false
		}
		if uint32(s>>32) == h && t.at(uint32(s)-1).id == *id {
			return uint32(s) - 1, pos, true
		}
	}
}

// insert adds id (known to be absent) for stream slot i.
func (x *index) insert(id *ID, i uint32) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	h := hashID(id)
	pos := uint64(h) & x.mask
	for x.slots[pos] != 0 {
		pos = (pos + 1) & x.mask
	}
	x.slots[pos] = uint64(h)<<32 | uint64(i+1)
	x.n++
}

func (x *index) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	x.mask = uint64(len(x.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		pos := (s >> 32) & x.mask
		for x.slots[pos] != 0 {
			pos = (pos + 1) & x.mask
		}
		x.slots[pos] = s
	}
}

// remove empties position pos and shifts back the entries of its probe run
// that would otherwise no longer be found (no tombstones).
func (x *index) remove(pos uint64) {
	x.n--
	for {
		x.slots[pos] = 0
		next := pos
		for {
			next = (next + 1) & x.mask
			s := x.slots[next]
			if s == 0 {
				return
			}
			home := (s >> 32) & x.mask
			// The entry at next may move to pos unless its home lies
			// cyclically in (pos, next].
			if (next-home)&x.mask >= (next-pos)&x.mask {
				x.slots[pos] = s
				pos = next
				break
			}
		}
	}
}
