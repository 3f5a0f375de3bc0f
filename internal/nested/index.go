package nested

import (
	"math/bits"
	"unsafe"

	"github.com/doubletake/doubletake/internal/keyhash"
)

// index finds records by span key without a Go map: open addressing with
// linear probing over a table fixed at construction. It holds three kinds
// of entries: a held span by its key, and the lists of children (waiting
// for their parent, or SERVER siblings) by their parent's key. A span's own
// key and its parent's are each looked up at one home, whatever the kind,
// so that a span costs few cache lines.
//
// An entry is 8 bytes: a tag (30 bits of the key's hash, which give its
// home, and its kind) and a span's arrival number (Detector.seq): the
// span held under the key, or the newest span of the list. The key itself
// is compared in the record that number names (its own key, or for a list
// its parent key), all 24 bytes. An entry whose number is no longer held
// is stale: lookups pass over it as if it were another key's, and the
// detector's sweep, going round the table in order, removes it. So
// evicting a span touches neither its key's home nor its parent's: its
// entries go stale as it leaves the ring.
type index struct {
	e     []ientry
	mask  uint32
	used  int    // entries in use, live or stale
	high  int    // above this many in use, the sweep moves on burst entries per span added
	sweep uint32 // the next entry the sweep looks at
	debt  int    // entries the sweep is to move on by at the end of the chunk of spans
	// sweeps counts the sweep's passes: entries may have moved since a
	// position was found when it has changed.
	sweeps uint32
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

// home is where the entry's probe run starts.
func (x *index) home(tag uint32) uint32 { return tag >> 2 & x.mask }

// indexLen is the table size for a ring of n records: a power of two at
// least twice the most live entries (n held spans, and at most as many
// lists of each kind, since every list has a held span), so that the table
// is at most half full of live entries.
func indexLen(n int) int {
	return 1 << bits.Len(uint(2*int(kinds)*n-1))
}

// The sweep goes round the table in order. Stale entries, left alone,
// would fill the table just ahead of it (the part it has not seen for
// longest), so it must move on faster than they appear: by perStale
// entries for each entry that may have gone stale (an evicted span's own,
// and those of the lists it may have been the newest of), which keeps the
// table ahead of it at most about a quarter fuller than behind it; and,
// while more than half of the table is in use, by burst entries per span
// added as well, at once. Live entries take at most half of the table
// (see indexLen), and three go stale per span at most, so then the sweep
// removes more entries than go stale. It moves on at least perStale
// entries per span evicted, so a stale entry is removed long before its
// number could be held again (that takes 2^32 spans less MaxMaxSpans; the
// table has at most 2^27 entries).
const (
	perStale = 4
	burst    = 32
)

func newIndex(n int) index {
	l := indexLen(n)
	return index{e: make([]ientry, l), mask: uint32(l - 1), high: l / 2}
}

// add returns a new entry for tag, which the caller fills with its seq;
// the key must not be in the index with that kind (stale entries of it may
// be). It takes the first entry of the run from tag's home that is empty
// or stale (its number not held: seq-seq0 ≥ held): a stale entry carries
// nothing, and taking it saves the sweep a removal.
func (x *index) add(tag, seq0, held uint32) *ientry {
	for i := x.home(tag); ; i = (i + 1) & x.mask {
		e := &x.e[i]
		if e.tag == 0 {
			e.tag = tag
			x.used++
			return e
		}
		if e.seq-seq0 >= held {
			e.tag = tag
			return e
		}
	}
}

// removeAt empties entry i and shifts the entries after it back where that
// keeps them reachable from their homes, so that lookups never meet
// tombstones.
func (x *index) removeAt(i uint32) {
	x.used--
	for j := (i + 1) & x.mask; x.e[j].tag != 0; j = (j + 1) & x.mask {
		home := x.home(x.e[j].tag)
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.e[i] = x.e[j]
			i = j
		}
	}
	x.e[i] = ientry{}
}

// keyHash hashes span keys with the windows' keyed hash (internal/keyhash)
// and a secret seed (drawn per Detector, or in the dedup processor the span
// window's, whose hashes it takes), so that a client cannot choose keys
// that share a probe run.
type keyHash struct{ seed keyhash.Seed }

// of hashes *k in place: the detector's one call of its key hash.
func (s *keyHash) of(k *spanKey) uint64 { return s.seed.Hash24((*[24]byte)(k)) }
