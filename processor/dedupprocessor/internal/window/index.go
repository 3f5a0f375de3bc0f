package window

import "math/bits"

// This file is the Set's index over its ring: the 64-byte buckets, their
// tags and overflow counts, the words' laps that tell a stale slot, and
// the sweep (see the package comment).

// bucketSlots is the number of slots in a bucket: 12 tag bytes and an
// overflow count in two words, and 12 words of ring positions, 64 bytes.
const bucketSlots = 12

// dispBits is the width of a slot's displacement: how many buckets past its
// home bucket its key sits. A key that finds no free slot within maxDisp
// buckets of its home is not indexed, which is counted as an eviction,
// never as a wrong answer (at the load used here it does not happen unless
// keys collide on purpose: the hash is seeded per process).
const (
	dispBits = 5
	maxDisp  = 1<<dispBits - 1
)

// lapBits is the width of the lap kept in each word: the number of times
// the ring had wrapped when the slot's entry was written, modulo
// 1<<lapBits. A slot is current when its lap is that of the last write at
// its position (and that position is still in the ring). A stale slot
// would look current again 1<<lapBits-1 laps after its entry was
// overwritten; the sweep visits every bucket at least once in two laps
// (once a lap from about 60 entries up, see sweepEvery) and empties it
// long before.
const (
	lapBits = 3
	lapMask = 1<<lapBits - 1
)

// sweepEvery is how many insertions pass between two buckets swept; the
// sweep also visits one when the ring's head wraps round, so that a small
// set sweeps its whole index in at most two laps. With the load below there
// are at most capacity/6+2 buckets, visited in 0.84 of a lap.
const sweepEvery = 5

// loadNum/loadDen is the number of slots relative to capacity: 2, so the
// index is at most half full of current slots. It costs 10.7 bytes per
// entry, and buys the most of the window's speed: at 1.4 slots per entry
// (7.5 bytes) half of the buckets of a full set had a key past them and an
// insertion mostly had to look for a stale slot; the span path measured
// 0.63 of that layout's CPU per span at a full 2M window (docs/benchmarks.md).
const (
	loadNum = 2
	loadDen = 1
)

// The tag bytes and the overflow count, in a bucket's ctrl words.
const (
	lo7      = 0x7f7f7f7f7f7f7f7f
	bytes01  = 0x0101010101010101
	hi1Mask  = 0x80808080 // the tag bytes of slots 8-11, in ctrl[1]
	ovfShift = 32         // the overflow count, in ctrl[1]
	ovfMax   = 255
)

// bucket is one 64-byte line of the index. Slot i is empty when its tag
// byte is 0 (its word is then 0 too); otherwise its word is
// disp<<dispShift | lap<<posBits | (ring position + 1).
type bucket struct {
	// Tag bytes of slots 0-7; tag bytes of slots 8-11, then the
	// overflow count: how many keys placed past this bucket have it on
	// their way from their home (saturating at ovfMax, then kept).
	ctrl  [2]uint64
	words [bucketSlots]uint32
}

// home maps a hash to its home bucket (Lemire's multiply-shift range
// reduction, so the number of buckets need not be a power of two) and its
// tag: the low byte of the hash, which the range reduction barely uses,
// with 0 (an empty slot) taken as 1.
func (s *Set[K, V]) home(h uint64) (uint64, uint64) {
	b, _ := bits.Mul64(h, s.nbuckets)
	t := h & 0xff
	return b, t + (t-1)>>63
}

func (s *Set[K, V]) next(b uint64) uint64 {
	b++
	if b == s.nbuckets {
		return 0
	}
	return b
}

// zeroBytes has the top bit of each byte of x that is 0 set, and no other.
func zeroBytes(x uint64) uint64 { return ^((x&lo7 + lo7) | x | lo7) }

// slotBits gathers the top bit of each byte of m (as zeroBytes gives) into
// the low 8 bits.
func slotBits(m uint64) uint32 { return uint32((m >> 7) * 0x0102040810204080 >> 56) }

// match returns a bit per slot of b whose tag is t.
func (b *bucket) match(t uint64) uint32 {
	tt := t * bytes01
	return slotBits(zeroBytes(b.ctrl[0]^tt)) | slotBits(zeroBytes(b.ctrl[1]^tt)&hi1Mask)<<8
}

// empty returns a bit per empty slot of b.
func (b *bucket) empty() uint32 {
	return slotBits(zeroBytes(b.ctrl[0])) | slotBits(zeroBytes(b.ctrl[1])&hi1Mask)<<8
}

func (b *bucket) overflow() uint64 { return b.ctrl[1] >> ovfShift & ovfMax }

func (b *bucket) setTag(i int, t uint64) {
	sh := uint(i&7) * 8
	b.ctrl[i>>3] = b.ctrl[i>>3]&^(0xff<<sh) | t<<sh
}

// pos is the ring position word w points at.
func (s *Set[K, V]) pos(w uint32) int { return int(w&s.posMask) - 1 }

// stamps recomputes the interval of current stamps after head, n or lap
// changed.
func (s *Set[K, V]) stamps() {
	if start := s.head - s.n; start >= 0 {
		s.lo, s.span = (s.lap<<s.posBits+uint32(start)+1)&s.stampMask, uint32(s.n)
	} else {
		s.lo = ((s.lap-1)<<s.posBits + uint32(start+len(s.ring)) + 1) & s.stampMask
		s.span = (s.lap<<s.posBits + uint32(s.head) + 1 - s.lo) & s.stampMask
	}
}

// current reports whether the word w of a taken slot belongs to the entry
// now at its ring position: written in the lap the word records, and still
// in the ring. (The word 0 of an empty slot may look current: callers look
// at taken slots only.)
func (s *Set[K, V]) current(w uint32) bool {
	return (w&s.stampMask-s.lo)&s.stampMask < s.span
}

// stale returns a bit per slot of b that is taken but not current. It is
// current for two words at a time, in the halves of a uint64: a guard bit
// above each half's stamp takes the borrow of its subtractions, so that
// the halves do not spill into each other.
func (s *Set[K, V]) stale(b *bucket) uint32 {
	const (
		both  = 1 | 1<<32
		guard = 1<<31 | 1<<63
		low31 = 0x7fffffff7fffffff
	)
	mask := uint64(s.stampMask) * both
	lo, span := uint64(s.lo)*both, uint64(s.span)*both
	var m uint32
	for i := 0; i < bucketSlots; i += 2 {
		x := uint64(b.words[i]) | uint64(b.words[i+1])<<32
		st := x & mask
		// Guard bit set: not below span (so not in the interval).
		out := ((st|guard)-lo)&mask | guard - span
		taken := (x&low31 + low31) | x // guard bit set: the word is not 0
		v := out & taken & guard
		m |= uint32(v>>31&1|v>>62) << i
	}
	return m
}

func (s *Set[K, V]) setIndexed(p int)   { s.indexed[p>>6] |= 1 << (p & 63) }
func (s *Set[K, V]) clearIndexed(p int) { s.indexed[p>>6] &^= 1 << (p & 63) }

// find returns the bucket and slot holding k. A lookup goes on past a
// bucket only while the bucket's overflow count says some key was placed
// beyond it; stale slots are passed over, never an answer.
func (s *Set[K, V]) find(k *K, h uint64) (uint64, int, bool) {
	bi, t := s.home(h)
	for d := uint64(0); ; d++ {
		b := &s.buckets[bi]
		for m := b.match(t); m != 0; m &= m - 1 {
			i := bits.TrailingZeros32(m)
			if w := b.words[i]; s.current(w) && s.ring[s.pos(w)].key == *k {
				return bi, i, true
			}
		}
		if b.overflow() == 0 || d == s.maxDisp {
			return 0, 0, false
		}
		bi = s.next(bi)
	}
}

// clear empties slot i of bucket b, the bi-th, and takes its key off the
// overflow counts of the buckets it passed.
func (s *Set[K, V]) clear(b *bucket, bi uint64, i int) {
	d := uint64(b.words[i] >> s.dispShift)
	b.setTag(i, 0)
	b.words[i] = 0
	s.unpass(bi, d)
}

// unpass takes one key placed d buckets past its home off the overflow
// counts of the d buckets before bucket bi.
func (s *Set[K, V]) unpass(bi, d uint64) {
	for ; d > 0; d-- {
		if bi == 0 {
			bi = s.nbuckets
		}
		bi--
		p := &s.buckets[bi].ctrl[1]
		if c := *p >> ovfShift & ovfMax; c != ovfMax {
			*p -= 1 << ovfShift
		}
	}
}

// insert indexes ring position pos, written in lap lap, under hash h: in the
// first free slot (empty, or stale and overwritten in place) of its home
// bucket or of the next maxDisp ones. It reports false when there is none;
// the entry is then left out of the index.
func (s *Set[K, V]) insert(pos int, h uint64, lap uint32) bool {
	bi, t := s.home(h)
	stamp := (lap<<s.posBits | uint32(pos+1)) & s.stampMask
	for d := uint64(0); ; d++ {
		b := &s.buckets[bi]
		free := b.empty()
		if free == 0 {
			free = s.stale(b)
		}
		if free != 0 {
			i := bits.TrailingZeros32(free)
			if b.words[i] != 0 {
				s.clear(b, bi, i)
			}
			b.setTag(i, t)
			b.words[i] = uint32(d)<<s.dispShift | stamp
			// Count the key on the buckets it passed.
			for j, e := bi, d; e > 0; e-- {
				if j == 0 {
					j = s.nbuckets
				}
				j--
				p := &s.buckets[j].ctrl[1]
				if c := *p >> ovfShift & ovfMax; c != ovfMax {
					*p += 1 << ovfShift
				}
			}
			return true
		}
		if d == s.maxDisp {
			s.clearIndexed(pos)
			return false
		}
		bi = s.next(bi)
	}
}

// sweepBucket empties the stale slots of the next bucket in index order.
func (s *Set[K, V]) sweepBucket() {
	bi := s.sweep
	b := &s.buckets[bi]
	for m := s.stale(b); m != 0; m &= m - 1 {
		s.clear(b, bi, bits.TrailingZeros32(m))
	}
	s.sweep = s.next(bi)
}
