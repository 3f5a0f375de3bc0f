// Package window is a bounded, exact set of recently seen keys.
//
// A Set remembers up to Capacity keys for at least Window, first in, first
// out. Keys are compared exactly (never by a hash alone), so two different
// keys can never be taken for one another. Its memory is fixed at
// construction: a ring of entries in arrival order, an open-addressing
// index of 32-bit slots over it and a bit per entry, about
// (sizeof(K)+sizeof(V)) + 6.2 bytes per entry of capacity. A Set is not safe
// for concurrent use.
//
// An entry that leaves the ring (evicted, expired or shrunk) is not looked
// up in the index: its slot carries the lap of the ring in which the entry
// was written, so that a slot whose entry has been overwritten or has left
// the ring is recognised as stale by arithmetic alone. Stale slots are
// reused by insertions that meet them and removed by a sweep that walks the
// index in order, a few slots per insertion, so that a removal costs a
// sequential read instead of a second random probe.
package window

import (
	"errors"
	"math/bits"
)

// blockShift sets how many consecutive ring entries share one time stamp:
// entries are expired by the block, so a key may outlive Window by the time
// it takes to fill one block of 1<<blockShift entries.
const blockShift = 8

// MaxCapacity is the largest capacity a Set accepts: a ring position, its
// probe distance, its lap and a bit of hash tag share one 32-bit index slot.
const MaxCapacity = 1<<24 - 1

// distBits is the width of the probe distance kept in each slot. Robin Hood
// probing keeps distances short (a few at the load used here); a key that
// would need more than maxDist is not indexed, which is counted as an
// eviction, never as a wrong answer.
const (
	distBits = 5
	maxDist  = 1<<distBits - 1
)

// lapBits is the width of the lap kept in each slot: the number of times the
// ring had wrapped when the slot's entry was written, modulo 1<<lapBits. A
// slot is current when its lap is that of the last write at its position
// (and that position is still in the ring). The sweep visits every slot at
// least once per nslots/sweepPerInsert insertions (0.375 of a lap; a Forget
// can take it back one slot; a set smaller than sweepEvery sweeps its whole
// index once a lap), so a stale slot is gone long before its position's lap
// comes round to the same bits again, 1<<lapBits laps after it was written.
const (
	lapBits = 2
	lapMask = 1<<lapBits - 1
)

// sweepPerInsert is how many index slots the sweep visits per insertion, in
// runs of sweepEvery insertions' worth. A stale slot lives at most
// nslots/sweepPerInsert insertions (0.375 of the capacity) unless an
// insertion reuses it first: a full set in steady state keeps its index
// about 0.78 full (0.67 of it current), measured at 64Ki and 2M entries.
const (
	sweepPerInsert = 4
	sweepEvery     = 16
)

// loadNum/loadDen is the index size relative to capacity: 3/2, so the index
// is never more than two-thirds full of current slots.
const (
	loadNum = 3
	loadDen = 2
)

var (
	errCapacity = errors.New("capacity must be between 1 and 16777215")
	errWindow   = errors.New("window must be positive")
)

type entry[K comparable, V any] struct {
	key K
	val V
}

// Stats counts what a Set did with its entries since it was made.
type Stats struct {
	Evicted uint64 // entries removed before Window because the set was full
	Expired uint64 // entries removed because they were older than Window
	Shrunk  uint64 // entries removed by Shrink
}

// Set is a bounded FIFO set with exact keys. V is a value stored with each
// key (a content fingerprint, say); use struct{} for none.
type Set[K comparable, V any] struct {
	hash   func(*K) uint64
	window int64

	ring []entry[K, V] // arrival order; the live part is the n entries before head
	head int           // where the next entry is written
	n    int           // entries in the ring, including forgotten ones
	lap  uint32        // how many times head has wrapped round to 0

	// indexed has a bit per ring position, set while its entry has a
	// current slot (not forgotten, not left out of the index).
	indexed []uint64

	// slots: 0 empty; else tag | lap<<lapShift | (ring position + 1)<<distBits | dist
	slots    []uint32
	nslots   uint64
	posMask  uint32 // the ring position + 1, shifted down by distBits
	lapShift uint
	tagMask  uint32 // the tag field, in place
	sweep    uint64 // the next slot the sweep visits

	// A slot's stamp is lap<<posBits | (ring position + 1), its bits
	// above dist. The stamps of current slots are two intervals (modulo
	// stampMask+1): [lo1, lo1+len1) for the entries written before head
	// last wrapped, [lo2, lo2+len2) for those written since.
	stampMask            uint32
	lo1, len1, lo2, len2 uint32

	blockFirst []int64 // arrival time of the first entry written into each block
	blockLast  []int64 // arrival time of the last entry written into each block

	live  int // keys in the index
	stats Stats
	sink  uint32 // what Prefetch loaded, kept so that its loads stay
}

// New returns a Set that holds up to capacity keys for window nanoseconds.
// hash must spread keys evenly over 64 bits; seed it per process so that
// hostile clients cannot choose colliding keys. It reads the key in place.
func New[K comparable, V any](capacity int, window int64, hash func(*K) uint64) (*Set[K, V], error) {
	if capacity < 1 || capacity > MaxCapacity {
		return nil, errCapacity
	}
	if window <= 0 {
		return nil, errWindow
	}
	nslots := uint64(capacity)*loadNum/loadDen + 1
	posBits := uint(bits.Len32(uint32(capacity)))
	lapShift := distBits + posBits
	blocks := (capacity + 1<<blockShift - 1) >> blockShift
	return &Set[K, V]{
		hash:       hash,
		window:     window,
		ring:       make([]entry[K, V], capacity),
		indexed:    make([]uint64, (capacity+63)/64),
		slots:      make([]uint32, nslots),
		nslots:     nslots,
		posMask:    1<<posBits - 1,
		lapShift:   lapShift,
		tagMask:    ^uint32(0) << (lapShift + lapBits),
		stampMask:  1<<(posBits+lapBits) - 1,
		blockFirst: make([]int64, blocks),
		blockLast:  make([]int64, blocks),
	}, nil
}

// Capacity is the most keys the set holds.
func (s *Set[K, V]) Capacity() int { return len(s.ring) }

// Len is the number of keys the set holds now.
func (s *Set[K, V]) Len() int { return s.live }

// Stats returns the counters of evicted and expired entries.
func (s *Set[K, V]) Stats() Stats { return s.stats }

// Bytes is the memory the set holds, fixed at construction.
func (s *Set[K, V]) Bytes() int {
	var e entry[K, V]
	return len(s.ring)*sizeOf(e) + len(s.slots)*4 + len(s.indexed)*8 + 2*8*len(s.blockFirst)
}

// Oldest returns the arrival time of the oldest block still held, and false
// when the set is empty. now-Oldest is the window the set covers at the
// moment: when the set is full before Window has passed, it is shorter.
func (s *Set[K, V]) Oldest() (int64, bool) {
	if s.n == 0 {
		return 0, false
	}
	return s.blockFirst[s.tail()>>blockShift], true
}

func (s *Set[K, V]) tail() int {
	t := s.head - s.n
	if t < 0 {
		t += len(s.ring)
	}
	return t
}

// home maps a hash to its first slot (Lemire's multiply-shift range
// reduction, so the index size need not be a power of two) and its tag, the
// low bits of the hash, which the range reduction barely uses.
func (s *Set[K, V]) home(h uint64) (uint64, uint32) {
	i, _ := bits.Mul64(h, s.nslots)
	return i, uint32(h) & s.tagMask
}

func (s *Set[K, V]) next(i uint64) uint64 {
	i++
	if i == s.nslots {
		return 0
	}
	return i
}

func dist(v uint32) uint32 { return v & maxDist }

// pos is the ring position slot v points at.
func (s *Set[K, V]) pos(v uint32) int { return int(v>>distBits&s.posMask) - 1 }

// stamps recomputes the intervals of current stamps after head, n or lap
// changed.
func (s *Set[K, V]) stamps() {
	posBits := s.lapShift - distBits
	if start := s.head - s.n; start >= 0 {
		s.lo1, s.len1 = 0, 0
		s.lo2, s.len2 = (s.lap<<posBits+uint32(start)+1)&s.stampMask, uint32(s.n)
	} else {
		s.lo1, s.len1 = ((s.lap-1)<<posBits+uint32(start+len(s.ring))+1)&s.stampMask, uint32(-start)
		s.lo2, s.len2 = (s.lap<<posBits+1)&s.stampMask, uint32(s.head)
	}
}

// current reports whether slot v belongs to the entry now at its ring
// position: written in the lap the slot records, and still in the ring.
// Stamps and lengths are below 1<<29, so x < len is the sign of x-len,
// which takes no branch.
func (s *Set[K, V]) current(v uint32) bool {
	st := v >> distBits & s.stampMask
	return (((st-s.lo1)&s.stampMask-s.len1)|((st-s.lo2)&s.stampMask-s.len2))>>31 != 0
}

func (s *Set[K, V]) setIndexed(p int)   { s.indexed[p>>6] |= 1 << (p & 63) }
func (s *Set[K, V]) clearIndexed(p int) { s.indexed[p>>6] &^= 1 << (p & 63) }

// find returns the slot holding k. Robin Hood order lets a miss stop at the
// first slot whose resident is closer to its home than k would be. Stale
// slots are residents like any other, but never an answer.
func (s *Set[K, V]) find(k *K, h uint64) (uint64, bool) {
	i, _, ok := s.probe(k, h)
	return i, ok
}

// probe is find that, when k is not held, returns where an insertion of k
// would start: the slot where the lookup stopped and k's distance from its
// home there (maxDist+1 when k cannot be indexed).
func (s *Set[K, V]) probe(k *K, h uint64) (uint64, uint32, bool) {
	i, tag := s.home(h)
	d := uint32(0)
	for ; d <= maxDist; d++ {
		v := s.slots[i]
		if v == 0 || dist(v) < d {
			return i, d, false
		}
		if dist(v) == d && v&s.tagMask == tag && s.current(v) && s.ring[s.pos(v)].key == *k {
			return i, d, true
		}
		i = s.next(i)
	}
	return i, d, false
}

// insert indexes ring position pos, written in lap lap, under hash h, Robin
// Hood style: an entry farther from its home takes the slot of one nearer to
// its own. A stale slot that would be passed over or moved on is overwritten
// instead, which ends the insertion. It reports false when some current
// entry would have to sit beyond maxDist; that entry is then left out of the
// index. It starts at slot i, d slots from the home of h, where probe left
// off: every slot before it holds an entry at least as far from its home.
func (s *Set[K, V]) insert(pos int, h uint64, lap uint32, i uint64, d uint32) bool {
	if d > maxDist {
		s.clearIndexed(pos)
		return false
	}
	cur := uint32(h)&s.tagMask | (lap<<(s.lapShift-distBits)|uint32(pos+1))&s.stampMask<<distBits + d
	for {
		v := s.slots[i]
		if v == 0 {
			s.slots[i] = cur
			return true
		}
		if dist(v) <= dist(cur) {
			if !s.current(v) {
				// Every lookup that passes this slot saw a distance of
				// dist(v) or less here; cur's is no less.
				s.slots[i] = cur
				return true
			}
			if dist(v) < dist(cur) {
				s.slots[i], cur = cur, v
			}
		}
		i = s.next(i)
		if dist(cur) == maxDist {
			s.clearIndexed(s.pos(cur))
			return false
		}
		cur++
	}
}

// sweepSlots visits the next m slots in index order and removes the stale
// ones.
func (s *Set[K, V]) sweepSlots(m int) {
	slots, i := s.slots, s.sweep
	mask, lo1, len1, lo2, len2 := s.stampMask, s.lo1, s.len1, s.lo2, s.len2
	for ; m > 0; m-- {
		v := slots[i]
		st := v >> distBits & mask
		// Bit 31 of cur is set when the slot is current, of v|-v when
		// it is not empty: one branch, rarely taken.
		cur := ((st-lo1)&mask - len1) | ((st-lo2)&mask - len2)
		if (^cur&(v|-v))>>31 != 0 {
			s.sweep = i
			s.deleteSlot(i) // the slot after it moves here: visit i again
			continue
		}
		if i++; i == s.nslots {
			i = 0
		}
	}
	s.sweep = i
}

// Lookup reports the value stored with k, if k is held.
func (s *Set[K, V]) Lookup(k K) (V, bool) {
	i, ok := s.find(&k, s.hash(&k))
	if !ok {
		var zero V
		return zero, false
	}
	return s.ring[s.pos(s.slots[i])].val, true
}

// Observe looks k up. When k is held it returns the value stored with it and
// true, and changes nothing. Otherwise it stores k with v, arriving at now,
// evicting the oldest entry when the set is full, and returns false.
func (s *Set[K, V]) Observe(k K, v V, now int64) (V, bool) {
	return s.ObserveHashed(&k, s.hash(&k), v, now)
}

// Hash is the index hash of *k, which ObserveHashed and Prefetch take.
func (s *Set[K, V]) Hash(k *K) uint64 { return s.hash(k) }

// Prefetch loads, without changing anything, the index lines that observing
// keys with the hashes hs (in this order, nothing else in between) will
// read: each key's home slot and the ring entry its tag points at, which a
// duplicate is compared with. The loads do not depend on each other, so
// their cache misses overlap; observed one by one, each key would wait for
// the misses of the one before. It also loads the index lines the sweep will
// visit while these keys are stored, which are in order. (An eviction reads
// no random line: see the package comment.)
func (s *Set[K, V]) Prefetch(hs []uint64) {
	var sink uint32
	for _, h := range hs {
		i, tag := s.home(h)
		v := s.slots[i]
		sink += v
		if v != 0 && v&s.tagMask == tag {
			// A likely hit: find compares the key in the ring.
			sink += uint32(firstByte(&s.ring[s.pos(v)]))
		}
	}
	// One load per 64-byte line of 16 slots, from where the sweep is
	// now, for as many slots as storing every key would sweep.
	i := s.sweep &^ 15
	for range min(uint64(len(hs)+sweepEvery)*sweepPerInsert/16+1, s.nslots/16) {
		sink += s.slots[i]
		if i += 16; i >= s.nslots {
			i = 0
		}
	}
	s.sink += sink
}

// ObserveHashed is Observe for the key *k whose Hash is h; it reads *k in
// place.
func (s *Set[K, V]) ObserveHashed(k *K, h uint64, v V, now int64) (V, bool) {
	i, d, ok := s.probe(k, h)
	if ok {
		return s.ring[s.pos(s.slots[i])].val, true
	}
	if s.n == len(s.ring) && s.dropTail() {
		s.stats.Evicted++
	}
	pos := s.head
	e := &s.ring[pos]
	e.key, e.val = *k, v
	b := pos >> blockShift
	if pos&(1<<blockShift-1) == 0 || s.n == 0 {
		s.blockFirst[b] = now
	}
	s.blockLast[b] = now
	lap := s.lap
	s.head++
	if s.head == len(s.ring) {
		s.head = 0
		s.lap++
	}
	s.n++
	s.stamps()
	s.live++
	s.setIndexed(pos)
	if !s.insert(pos, h, lap, i, d) {
		// The index had no room near some key's home: one key (not
		// necessarily k) is no longer indexed. It is as if it were evicted.
		s.live--
		s.stats.Evicted++
	}
	if s.head%sweepEvery == 0 {
		s.sweepSlots(sweepEvery * sweepPerInsert)
	}
	var zero V
	return zero, false
}

// Forget removes k, so that its next arrival is taken as new. It is how a
// caller takes back keys whose data was not delivered. It reports whether k
// was held.
func (s *Set[K, V]) Forget(k K) bool {
	i, ok := s.find(&k, s.hash(&k))
	if !ok {
		return false
	}
	s.clearIndexed(s.pos(s.slots[i]))
	s.deleteSlot(i)
	s.live--
	return true
}

// Expire removes every block of entries that arrived before now-Window.
func (s *Set[K, V]) Expire(now int64) {
	cutoff := now - s.window
	for s.n > 0 {
		t := s.tail()
		b := t >> blockShift
		if s.blockLast[b] >= cutoff {
			return
		}
		// Remove the tail up to the end of its block (or the head).
		end := (b + 1) << blockShift
		if end > len(s.ring) {
			end = len(s.ring)
		}
		for t < end && s.n > 0 {
			if s.evictTail() {
				s.stats.Expired++
			}
			t++
		}
	}
}

// Shrink removes up to n of the oldest entries and gives the memory of the
// emptied part of the ring back to the operating system (on Linux), to
// relieve memory pressure early; it returns how many it removed. The pages
// come back, zeroed, as new entries fill the ring again.
func (s *Set[K, V]) Shrink(n int) int {
	removed := 0
	for removed < n && s.n > 0 {
		if s.evictTail() {
			s.stats.Shrunk++
		}
		removed++
	}
	if removed > 0 {
		// The free part of the ring runs from head to tail.
		t := s.tail()
		switch {
		case s.n == 0:
			releaseMemory(s.ring)
		case s.head <= t:
			releaseMemory(s.ring[s.head:t])
		default:
			releaseMemory(s.ring[s.head:])
			releaseMemory(s.ring[:t])
		}
	}
	return removed
}

// dropTail drops the oldest ring entry, which is about to be overwritten.
// Its index slot, if it has one, becomes stale by leaving the ring: it is
// not looked for. The caller updates the stamps. It reports whether the
// entry was held: an entry forgotten, or left out of the index (counted
// as evicted then), is not counted again.
func (s *Set[K, V]) dropTail() bool {
	t := s.tail()
	s.n--
	if s.indexed[t>>6]&(1<<(t&63)) != 0 {
		s.clearIndexed(t)
		s.live--
		return true
	}
	return false
}

// evictTail drops the oldest ring entry and clears it; it reports whether
// the entry was held (see dropTail).
func (s *Set[K, V]) evictTail() bool {
	t := s.tail()
	held := s.dropTail()
	s.stamps()
	var zero entry[K, V]
	s.ring[t] = zero
	return held
}

// deleteSlot empties slot i and shifts the rest of its probe run back one
// slot each, so that lookups never meet tombstones. A slot shifted back over
// the sweep's position takes the sweep back with it, so that the sweep does
// not miss it.
func (s *Set[K, V]) deleteSlot(i uint64) {
	for {
		j := s.next(i)
		v := s.slots[j]
		if v == 0 || dist(v) == 0 {
			break
		}
		s.slots[i] = v - 1
		if j == s.sweep {
			s.sweep = i
		}
		i = j
	}
	s.slots[i] = 0
}
