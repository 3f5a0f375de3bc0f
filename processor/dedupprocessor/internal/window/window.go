// Package window is a bounded, exact set of recently seen keys.
//
// A Set remembers up to Capacity keys for at least Window, first in, first
// out. Keys are compared exactly (never by a hash alone), so two different
// keys can never be taken for one another. Its memory is fixed at
// construction: a ring of entries in arrival order and an open-addressing
// index of 32-bit slots over it, about (sizeof(K)+sizeof(V)) + 6 bytes per
// entry of capacity. A Set is not safe for concurrent use.
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
// probe distance and a few bits of hash tag share one 32-bit index slot.
const MaxCapacity = 1<<24 - 1

// distBits is the width of the probe distance kept in each slot. Robin Hood
// probing keeps distances short (a few at the load used here); a key that
// would need more than maxDist is not indexed, which is counted as an
// eviction, never as a wrong answer.
const (
	distBits = 5
	maxDist  = 1<<distBits - 1
)

// loadNum/loadDen is the index size relative to capacity: 3/2, so the index
// is never more than two-thirds full.
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

	slots    []uint32 // 0 empty; else tag | dist<<posBits | (ring position + 1)
	nslots   uint64
	posBits  uint
	posMask  uint32
	distMask uint32 // the dist field, in place
	tagMask  uint32 // the tag field, in place

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
	blocks := (capacity + 1<<blockShift - 1) >> blockShift
	return &Set[K, V]{
		hash:       hash,
		window:     window,
		ring:       make([]entry[K, V], capacity),
		slots:      make([]uint32, nslots),
		nslots:     nslots,
		posBits:    posBits,
		posMask:    1<<posBits - 1,
		distMask:   maxDist << posBits,
		tagMask:    ^uint32(0) << (posBits + distBits),
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
	return len(s.ring)*sizeOf(e) + len(s.slots)*4 + 2*8*len(s.blockFirst)
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

func (s *Set[K, V]) dist(v uint32) uint32 { return (v & s.distMask) >> s.posBits }

// find returns the slot holding k. Robin Hood order lets a miss stop at the
// first slot whose resident is closer to its home than k would be.
func (s *Set[K, V]) find(k *K, h uint64) (uint64, bool) {
	i, tag := s.home(h)
	for d := uint32(0); d <= maxDist; d++ {
		v := s.slots[i]
		if v == 0 || s.dist(v) < d {
			return 0, false
		}
		if s.dist(v) == d && v&s.tagMask == tag && s.ring[v&s.posMask-1].key == *k {
			return i, true
		}
		i = s.next(i)
	}
	return 0, false
}

// findPos returns the slot that points at ring position pos, found from the
// home of hash h without reading the ring.
func (s *Set[K, V]) findPos(pos int, h uint64) (uint64, bool) {
	i, _ := s.home(h)
	want := uint32(pos + 1)
	for d := uint32(0); d <= maxDist; d++ {
		v := s.slots[i]
		if v == 0 || s.dist(v) < d {
			return 0, false
		}
		if v&s.posMask == want {
			return i, true
		}
		i = s.next(i)
	}
	return 0, false
}

// insert indexes ring position pos under hash h, Robin Hood style: an entry
// farther from its home takes the slot of one nearer to its own. It reports
// false when some entry would have to sit beyond maxDist; that entry is then
// left out of the index.
func (s *Set[K, V]) insert(pos int, h uint64) bool {
	i, tag := s.home(h)
	cur := tag | uint32(pos+1)
	for {
		v := s.slots[i]
		if v == 0 {
			s.slots[i] = cur
			return true
		}
		if s.dist(v) < s.dist(cur) {
			s.slots[i], cur = cur, v
		}
		i = s.next(i)
		if s.dist(cur) == maxDist {
			return false
		}
		cur += 1 << s.posBits
	}
}

// Lookup reports the value stored with k, if k is held.
func (s *Set[K, V]) Lookup(k K) (V, bool) {
	i, ok := s.find(&k, s.hash(&k))
	if !ok {
		var zero V
		return zero, false
	}
	return s.ring[s.slots[i]&s.posMask-1].val, true
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
// read: each key's home slot (and the ring entry its tag points at, which a
// duplicate is compared with), and, where the set would overflow, the home
// slots of the entries those insertions evict. The loads do not depend on
// each other, so their cache misses overlap; observed one by one, each key
// would wait for the misses of the one before.
func (s *Set[K, V]) Prefetch(hs []uint64) {
	var sink uint32
	for _, h := range hs {
		i, tag := s.home(h)
		v := s.slots[i]
		sink += v
		if v != 0 && v&s.tagMask == tag {
			// A likely hit: find compares the key in the ring.
			sink += uint32(firstByte(&s.ring[v&s.posMask-1]))
		}
	}
	// The entries the insertions would evict, oldest first (when some of
	// the keys are duplicates, fewer are evicted: the extra loads are
	// harmless). The ring is read in order, which the hardware prefetches.
	over := s.n + len(hs) - len(s.ring)
	t := s.tail()
	for range min(over, s.n) {
		i, _ := s.home(s.hash(&s.ring[t].key))
		sink += s.slots[i]
		if t++; t == len(s.ring) {
			t = 0
		}
	}
	s.sink += sink
}

// ObserveHashed is Observe for the key *k whose Hash is h; it reads *k in
// place.
func (s *Set[K, V]) ObserveHashed(k *K, h uint64, v V, now int64) (V, bool) {
	if i, ok := s.find(k, h); ok {
		return s.ring[s.slots[i]&s.posMask-1].val, true
	}
	if s.n == len(s.ring) {
		s.evictTail()
		s.stats.Evicted++
	}
	pos := s.head
	s.ring[pos] = entry[K, V]{key: *k, val: v}
	b := pos >> blockShift
	if pos&(1<<blockShift-1) == 0 || s.n == 0 {
		s.blockFirst[b] = now
	}
	s.blockLast[b] = now
	s.head++
	if s.head == len(s.ring) {
		s.head = 0
	}
	s.n++
	s.live++
	if !s.insert(pos, h) {
		// The index had no room near some key's home: one key (not
		// necessarily k) is no longer indexed. It is as if it were evicted.
		s.live--
		s.stats.Evicted++
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
	s.deleteSlot(i)
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
			s.evictTail()
			s.stats.Expired++
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
		s.evictTail()
		removed++
	}
	s.stats.Shrunk += uint64(removed)
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

// evictTail drops the oldest ring entry and, unless it was forgotten (or
// forgotten and stored again elsewhere in the ring), its index slot.
func (s *Set[K, V]) evictTail() {
	t := s.tail()
	if i, ok := s.findPos(t, s.hash(&s.ring[t].key)); ok {
		s.deleteSlot(i)
	}
	var zero entry[K, V]
	s.ring[t] = zero
	s.n--
}

// deleteSlot empties slot i and shifts the rest of its probe run back one
// slot each, so that lookups never meet tombstones.
func (s *Set[K, V]) deleteSlot(i uint64) {
	s.live--
	for {
		j := s.next(i)
		v := s.slots[j]
		if v == 0 || s.dist(v) == 0 {
			break
		}
		s.slots[i] = v - 1<<s.posBits
		i = j
	}
	s.slots[i] = 0
}
