package nested

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// index finds records by span key without a Go map: open addressing with
// linear probing over a table fixed at construction, at most half full.
// It holds three kinds of entries: a held span by its key, and the lists of
// children (waiting for their parent, or SERVER siblings) by their parent's
// key. A span's own key and its parent's are each looked up at one home,
// whatever the kind, so that a span costs few cache lines. An entry names
// a record slot; the key is compared in the record itself (its own key, or
// for a list the parent key of its first record), all 24 bytes.
type index struct {
	e    []ientry
	mask uint32
	n    [kinds]int // entries in use, by kind
}

// ikind is what an index entry stands for.
type ikind uint8

const (
	heldKind    ikind = iota // the span held under its key
	waitingKind              // the children that arrived before their parent
	sibsKind                 // the SERVER children of a parent
	kinds
)

// ientry is one table entry: a record slot, or the head, tail and length
// of a list of slots that share a parent.
type ientry struct {
	h       uint32 // the key's hash, whose low bits are the entry's home
	head    int32  // the record's slot + 1; 0 marks an empty entry
	tail, n int32  // lists only
	kind    ikind
}

// ientrySize is the size of an index entry.
const ientrySize = int(unsafe.Sizeof(ientry{}))

// indexLen is the table size for a ring of n records: a power of two at
// least twice the most entries (n held spans, and at most as many lists of
// each kind, since every list has a held span), so that the table is at
// most half full and its runs are short.
func indexLen(n int) int {
	return 1 << bits.Len(uint(2*int(kinds)*n-1))
}

func newIndex(n int) index {
	l := indexLen(n)
	return index{e: make([]ientry, l), mask: uint32(l - 1)}
}

func key(recs []rec, e *ientry) *spanKey {
	if e.kind != heldKind {
		return &recs[e.head-1].parent
	}
	return &recs[e.head-1].key
}

// find returns the entry of kind for k, whose hash is h, or nil.
func (x *index) find(recs []rec, kind ikind, k *spanKey, h uint32) *ientry {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		e := &x.e[i]
		if e.head == 0 {
			return nil
		}
		if e.h == h && e.kind == kind && *key(recs, e) == *k {
			return e
		}
	}
}

// add returns a new entry of kind for hash h, which the caller fills; the
// key must not be in the index with that kind.
func (x *index) add(kind ikind, h uint32) *ientry {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		if e := &x.e[i]; e.head == 0 {
			e.h, e.kind = h, kind
			x.n[kind]++
			return e
		}
	}
}

// remove empties entry e and shifts the entries after it back where that
// keeps them reachable from their homes, so that lookups never meet
// tombstones.
func (x *index) remove(e *ientry) {
	x.n[e.kind]--
	i := uint32((uintptr(unsafe.Pointer(e)) - uintptr(unsafe.Pointer(&x.e[0]))) / uintptr(ientrySize))
	for j := (i + 1) & x.mask; x.e[j].head != 0; j = (j + 1) & x.mask {
		home := x.e[j].h & x.mask
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.e[i] = x.e[j]
			i = j
		}
	}
	x.e[i] = ientry{}
}

// keyHash hashes span keys with a secret drawn per Detector, so that a
// client cannot choose keys that share a probe run.
type keyHash [4]uint64

func newKeyHash() keyHash {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	var s keyHash
	for i := range s {
		s[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return s
}

func hmix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// of hashes *k in place.
func (s *keyHash) of(k *spanKey) uint32 {
	a := binary.LittleEndian.Uint64(k[0:])
	b := binary.LittleEndian.Uint64(k[8:])
	c := binary.LittleEndian.Uint64(k[16:])
	return uint32(hmix(hmix(a^s[0], b^s[1])^c, s[2]^s[3]))
}
