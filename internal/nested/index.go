package nested

import (
	"math/bits"
	"unsafe"

	"github.com/doubletake/doubletake/internal/keyhash"
)

// index finds records by span key without a Go map: a table fixed at
// construction of buckets of seven entries, one cache line each. It holds
// three kinds of entries: a held span by its key, and the lists of
// children (waiting for their parent, or SERVER siblings) by their
// parent's key. A key's entries of every kind start at one home bucket,
// so that a span costs few cache lines.
//
// An entry is 8 bytes: a tag (30 bits of the key's hash, which give its
// home, and its kind) and a span's arrival number (Detector.seq): the
// span held under the key, or the newest span of the list. The key itself
// is compared in the record that number names (its own key, or for a list
// its parent key), all 24 bytes. An entry whose number is no longer held
// is stale: lookups pass over it as if it were another key's, and an
// insertion takes it as if it were empty. So evicting a span touches
// neither its key's home nor its parent's, and nothing is removed or
// shifted per span: its entries go stale as it leaves the ring, and are
// overwritten in place.
//
// An entry goes in the first bucket from its home with an entry empty or
// stale. A bucket counts the entries that passed it over (held in a later
// bucket, home here or before): a lookup that has not found its key in a
// bucket stops there when the count is zero. Overwriting or clearing an
// entry held past its home takes it off the counts it added.
//
// Stale entries are left in place until overwritten, except that a search
// going on into a bucket clears those held there past their home (which
// would send later searches on), and a slow sweep clears all, a bucket per
// sweepEvery spans added, so that no entry is still there when its number
// comes round again (after 2^32 spans less MaxMaxSpans; a pass of the sweep
// takes at most 2^29: sweepEvery times 2^24 buckets).
type index struct {
	b     []bucket
	mask  uint32 // len(b)-1
	used  int    // entries in use, live or stale
	sweep uint32 // the next bucket the sweep clears
	debt  int    // spans added since the sweep last moved on, less sweepEvery per bucket swept
}

// bucketLen is the number of entries of a bucket.
const bucketLen = 7

// bucket is one cache line of the table: its entries and the number of
// entries, in later buckets, whose home is this bucket or one before it
// on their way.
type bucket struct {
	e    [bucketLen]ientry
	over uint32
	next uint32 // the entry add tries first: the one after the last it filled
}

// ikind is what an index entry stands for.
type ikind uint8

const (
	heldKind    ikind = iota // the span held under its key
	waitingKind              // the children that arrived before their parent
	sibsKind                 // the SERVER children of a parent
	kinds
)

// ientry is one table entry; tag 0 marks an empty one.
type ientry struct {
	tag uint32 // hash bits 2..31: the home; bits 0..1: kind+1
	seq uint32 // the arrival number of the held span, or of a list's newest span
}

// ientrySize is the size of an index entry.
const ientrySize = int(unsafe.Sizeof(ientry{}))

// tagOf is the tag of kind for a key whose hash is h.
func tagOf(h uint64, kind ikind) uint32 {
	return uint32(h>>32)&^3 | uint32(kind) + 1
}

func (e *ientry) kind() ikind { return ikind(e.tag&3) - 1 }

// home is the bucket where the entry's search starts.
func (x *index) home(tag uint32) uint32 { return tag >> 2 & x.mask }

// pos is an entry's position: its bucket times 8 plus its place in it.
func pos(b uint32, j int) int32 { return int32(b<<3 | uint32(j)) }

// at is the entry at position p.
func (x *index) at(p int32) *ientry { return &x.b[p>>3].e[p&7] }

// indexLen is the table size, in 8-byte units, for a ring of n records:
// a power of two at least twice the most live entries (n held spans, and
// at most as many lists of each kind, since every list has a held span),
// so that, with a bucket's eighth unit its count, live entries fill at
// most 4/7 of it.
func indexLen(n int) int {
	return 1 << bits.Len(uint(2*int(kinds)*n-1))
}

// sweepEvery is how many spans added move the sweep on by a bucket.
const sweepEvery = 32

func newIndex(n int) index {
	l := max(indexLen(n)/8, 1)
	return index{b: make([]bucket, l), mask: uint32(l - 1)}
}

// add returns a new entry for tag, which the caller fills with its seq;
// the key must not be in the index with that kind (stale entries of it may
// be). It takes an entry from tag's home on that is empty or stale (its
// number not held: seq-seq0 ≥ held): a stale entry carries nothing. In the
// home bucket it tries first the entry after the one it filled last: the
// oldest there, since entries go stale mostly in the order they are filled
// (a held span's do), so nearly always one to take, without a branch that
// the pattern of stale and live entries would make mispredicted. Live
// entries take at most 4/7 of the table, so there is one.
func (x *index) add(tag, seq0, held uint32) int32 {
	b := x.home(tag)
	bk := &x.b[b]
	if j := bk.next; bk.e[j].tag == 0 || bk.e[j].seq-seq0 >= held {
		return x.fill(b, int(j), tag)
	}
	for {
		for j := range bk.e {
			if e := &bk.e[j]; e.tag == 0 || e.seq-seq0 >= held {
				return x.fill(b, j, tag)
			}
		}
		bk.over++
		b = (b + 1) & x.mask
		bk = &x.b[b]
	}
}

// fill gives entry j of bucket b, empty or stale, to tag.
func (x *index) fill(b uint32, j int, tag uint32) int32 {
	bk := &x.b[b]
	e := &bk.e[j]
	if e.tag == 0 {
		x.used++
	} else {
		x.unpass(e.tag, b)
	}
	e.tag = tag
	if bk.next = uint32(j) + 1; bk.next == bucketLen {
		bk.next = 0
	}
	return pos(b, j)
}

// mayHold reports whether an entry of bk has the hash bits of tag, of any
// kind: a test of the seven entries without a loop, since nearly always
// none has.
func (bk *bucket) mayHold(tag uint32) bool {
	e := &bk.e
	return e[0].tag^tag < 4 || e[1].tag^tag < 4 || e[2].tag^tag < 4 || e[3].tag^tag < 4 ||
		e[4].tag^tag < 4 || e[5].tag^tag < 4 || e[6].tag^tag < 4
}

// unpass takes an entry of tag held in bucket b off the counts of the
// buckets it passed over.
func (x *index) unpass(tag, b uint32) {
	for h := x.home(tag); h != b; h = (h + 1) & x.mask {
		x.b[h].over--
	}
}

// clear empties the entry at position p.
func (x *index) clear(p int32) {
	e := x.at(p)
	x.unpass(e.tag, uint32(p>>3))
	*e = ientry{}
	x.used--
}

// tidy clears the stale entries of bucket b held past their home, so that
// the buckets they passed over stop sending searches on: a search that
// goes on into b calls it.
func (x *index) tidy(b, seq0, held uint32) {
	bk := &x.b[b]
	for j := range bk.e {
		if e := bk.e[j]; e.tag != 0 && e.seq-seq0 >= held && x.home(e.tag) != b {
			x.clear(pos(b, j))
		}
	}
}

// sweepOn clears the stale entries of the next n buckets.
func (x *index) sweepOn(n int, seq0, held uint32) {
	for range n {
		b := x.sweep
		for j := range x.b[b].e {
			if e := x.b[b].e[j]; e.tag != 0 && e.seq-seq0 >= held {
				x.clear(pos(b, j))
			}
		}
		x.sweep = (b + 1) & x.mask
	}
}

// keyHash hashes span keys with the windows' keyed hash (internal/keyhash)
// and a secret seed (drawn per Detector, or in the dedup processor the span
// window's, whose hashes it takes), so that a client cannot choose keys
// that share a bucket.
type keyHash struct{ seed keyhash.Seed }

// of hashes *k in place: the detector's one call of its key hash.
func (s *keyHash) of(k *spanKey) uint64 { return s.seed.Hash24((*[24]byte)(k)) }
