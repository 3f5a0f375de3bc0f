// Package window is a bounded, exact set of recently seen keys.
//
// A Set remembers up to Capacity keys for at least Window, first in, first
// out. Keys are compared exactly (never by a hash alone), so two different
// keys can never be taken for one another. Its memory is fixed at
// construction: a ring of entries in arrival order, a bucketed index over
// it and a bit per entry, about (sizeof(K)+sizeof(V)) + 10.9 bytes per entry
// of capacity. A Set is not safe for concurrent use.
//
// The index is a table of 64-byte buckets (Swiss-table style): each holds
// twelve one-byte tags, compared twelve at a time by word arithmetic, and
// twelve 32-bit words pointing into the ring. A key lives in its home
// bucket, or when that is full of current entries in one of the next few;
// each bucket counts the keys placed past it, and a lookup reads on only
// while that count is not 0 (in a full set, about 7 buckets in a hundred). An entry that leaves the ring
// (evicted, expired or shrunk) is not looked up in the index: its word
// carries the lap of the ring in which the entry was written, so that a
// slot whose entry has been overwritten or has left the ring is recognised
// as stale by arithmetic alone, and an insertion into its bucket
// overwrites it in place, with no shift. A slow sweep (a bucket every 5
// insertions, the whole index in less than a lap) empties the stale slots
// that no insertion met, so that none lives long enough for its lap to
// come round again.
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
// lap and its bucket displacement share one 32-bit word.
const MaxCapacity = 1<<24 - 1

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

	buckets   []bucket
	nbuckets  uint64
	maxDisp   uint64 // maxDisp, or fewer when there are fewer buckets
	posBits   uint
	posMask   uint32 // the ring position + 1, in a word
	dispShift uint
	sweep     uint64 // the next bucket the sweep visits
	toSweep   int    // insertions until the sweep visits a bucket

	// A slot's stamp is lap<<posBits | (ring position + 1), its word's
	// bits below the displacement. The stamps of current slots are those
	// in [lo, lo+span) (modulo stampMask+1), from the tail's to the
	// head's: when the ring has wrapped the interval also holds the
	// stamps between the last position of one lap and the first of the
	// next (position + 1 above capacity, or 0), which no word has.
	stampMask uint32
	lo, span  uint32

	blockFirst []int64 // arrival time of the first entry written into each block
	blockLast  []int64 // arrival time of the last entry written into each block
	// headFirst and headLast are blockFirst and blockLast of the head's
	// block as they were before the head entered it in its current lap:
	// the times of the entries of the previous lap still held after the
	// head in that block (see arrival).
	headFirst, headLast int64

	// lastEvicted is at least the arrival time of the newest entry evicted
	// (capacity) or shrunk so far; evicted says whether there was one.
	lastEvicted int64
	evicted     bool

	live   int    // keys in the index
	writes uint64 // entries written so far: the next entry's sequence number
	stats  Stats
	sink   uint32 // what Prefetch loaded, kept so that its loads stay
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
	nbuckets := (uint64(capacity)*loadNum/loadDen + bucketSlots) / bucketSlots
	posBits := uint(bits.Len32(uint32(capacity)))
	blocks := (capacity + 1<<blockShift - 1) >> blockShift
	return &Set[K, V]{
		hash:       hash,
		window:     window,
		ring:       make([]entry[K, V], capacity),
		indexed:    make([]uint64, (capacity+63)/64),
		buckets:    make([]bucket, nbuckets),
		nbuckets:   nbuckets,
		maxDisp:    min(maxDisp, nbuckets-1),
		posBits:    posBits,
		posMask:    1<<posBits - 1,
		dispShift:  posBits + lapBits,
		toSweep:    sweepEvery,
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
	var b bucket
	return len(s.ring)*sizeOf(e) + len(s.buckets)*sizeOf(b) + len(s.indexed)*8 + 2*8*len(s.blockFirst)
}

// Oldest returns the arrival time of the oldest block still held (at most
// the oldest entry's), and false when the set is empty.
func (s *Set[K, V]) Oldest() (int64, bool) {
	if s.n == 0 {
		return 0, false
	}
	first, _ := s.arrival(s.tail())
	return first, true
}

// LastEvicted returns a time no earlier than the arrival of the newest
// entry that left the set before its window ended, evicted because the set
// was full or removed by Shrink, and false when none has. Every key that
// arrived after it is still held (unless forgotten): the set reaches back
// to it. Entries are timed by the block, so it may be later than that
// arrival by the time one block took to fill. A key left out of the index
// (counted as evicted) does not move it.
func (s *Set[K, V]) LastEvicted() (int64, bool) { return s.lastEvicted, s.evicted }

// arrival returns the arrival times of the block of ring position p, a
// live entry: the first and last written into it. Once the head has
// entered a block in a new lap, that block's entries after the head are
// of the previous lap, whose times the head saved.
func (s *Set[K, V]) arrival(p int) (first, last int64) {
	b := p >> blockShift
	if p >= s.head && b == s.head>>blockShift && s.head&(1<<blockShift-1) != 0 {
		return s.headFirst, s.headLast
	}
	return s.blockFirst[b], s.blockLast[b]
}

// noteEvicted records that the live entry at ring position p leaves the
// set before its window ended.
func (s *Set[K, V]) noteEvicted(p int) {
	if _, last := s.arrival(p); !s.evicted || last > s.lastEvicted {
		s.lastEvicted = last
	}
	s.evicted = true
}

func (s *Set[K, V]) tail() int {
	t := s.head - s.n
	if t < 0 {
		t += len(s.ring)
	}
	return t
}

// Lookup reports the value stored with k, if k is held.
func (s *Set[K, V]) Lookup(k K) (V, bool) {
	bi, i, ok := s.find(&k, s.hash(&k))
	if !ok {
		var zero V
		return zero, false
	}
	return s.ring[s.pos(s.buckets[bi].words[i])].val, true
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
// read first: each key's home bucket. The loads do not depend on each other
// and nothing waits for them here, so their cache misses overlap; observed
// one by one, each key would wait for the misses of the one before. (An
// eviction reads no random line, and the sweep reads the index in order:
// see the package comment. Loading also the ring entries that the buckets'
// tags point at, and the next bucket of an overflowing one, measured
// slower: it waits for the buckets to arrive.)
func (s *Set[K, V]) Prefetch(hs []uint64) {
	var sink uint64
	for _, h := range hs {
		bi, _ := s.home(h)
		sink += s.buckets[bi].ctrl[0]
	}
	s.sink += uint32(sink)
}

// ObserveHashed is Observe for the key *k whose Hash is h; it reads *k in
// place.
func (s *Set[K, V]) ObserveHashed(k *K, h uint64, v V, now int64) (V, bool) {
	prev, seen, _ := s.ObserveSeq(k, h, v, now)
	return prev, seen
}

// Written is the number of entries written into the set since it was
// made: the sequence number the next new key will get. The keys one caller
// stores between two calls of Written, with nothing else stored in
// between, have the sequence numbers between the two.
func (s *Set[K, V]) Written() uint64 { return s.writes }

// ObserveSeq is ObserveHashed that also returns, when k is held, the
// sequence number its entry got when it was stored (see Written): which
// caller's insertions it belongs to.
func (s *Set[K, V]) ObserveSeq(k *K, h uint64, v V, now int64) (V, bool, uint64) {
	if bi, i, ok := s.find(k, h); ok {
		p := s.pos(s.buckets[bi].words[i])
		// A live entry is at most len(ring) writes back from the head.
		back := s.head - p
		if back <= 0 {
			back += len(s.ring)
		}
		return s.ring[p].val, true, s.writes - uint64(back)
	}
	if s.n == len(s.ring) {
		if t := s.head; s.dropTail() { // full: the tail is at the head
			s.stats.Evicted++
			s.noteEvicted(t)
		}
	}
	pos := s.head
	e := &s.ring[pos]
	e.key, e.val = *k, v
	b := pos >> blockShift
	if pos&(1<<blockShift-1) == 0 || s.n == 0 {
		s.headFirst, s.headLast = s.blockFirst[b], s.blockLast[b]
		s.blockFirst[b] = now
	}
	s.blockLast[b] = now
	lap := s.lap
	s.head++
	wrapped := s.head == len(s.ring)
	if wrapped {
		s.head = 0
		s.lap++
	}
	s.n++
	s.writes++
	s.stamps()
	s.live++
	s.setIndexed(pos)
	if !s.insert(pos, h, lap) {
		// No free slot near k's home: k is not indexed. It is as if it
		// were evicted at once.
		s.live--
		s.stats.Evicted++
	}
	if s.toSweep--; s.toSweep == 0 || wrapped {
		s.toSweep = sweepEvery
		s.sweepBucket()
	}
	var zero V
	return zero, false, 0
}

// Forget removes k, so that its next arrival is taken as new. It is how a
// caller takes back keys whose data was not delivered. It reports whether k
// was held.
func (s *Set[K, V]) Forget(k K) bool {
	bi, i, ok := s.find(&k, s.hash(&k))
	if !ok {
		return false
	}
	b := &s.buckets[bi]
	s.clearIndexed(s.pos(b.words[i]))
	s.clear(b, bi, i)
	s.live--
	return true
}

// Expire removes every block of entries that arrived before now-Window.
func (s *Set[K, V]) Expire(now int64) {
	cutoff := now - s.window
	for s.n > 0 {
		t := s.tail()
		b := t >> blockShift
		if _, last := s.arrival(t); last >= cutoff {
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
		if t := s.tail(); s.evictTail() {
			s.stats.Shrunk++
			s.noteEvicted(t)
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
