// Package pdataenc writes pdata values into bytes in the project's one
// canonical, unambiguous form, for content digests and identities: every
// value is tagged with its type, and every string, byte slice, map and slice
// is prefixed with its length, so two different values never encode alike.
// Maps are written with their keys sorted, nested maps too, as the data
// model's maps have no order: two copies of a record or a stream whose
// attributes were stored in different orders encode alike. A map whose keys
// arrive sorted is written as it comes, in exactly the bytes earlier
// versions wrote for it.
//
// With InOrder set, maps are written in their stored order instead: the
// dedup processor's log digests use it, since the copies a re-send or a
// second export of one SDK's record makes keep its order byte for byte, and
// sorting would only cost time (about a fifth of the log path when keys
// arrive unsorted) and change the digests journals already hold.
//
// Used by the dedup processor's log digests, the metric stream identities
// (internal/streams) and the analysis of verify and audit (internal/analyze).
package pdataenc

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Encoder appends to B; reuse one to encode without allocating once its
// buffers have grown. An Encoder is not safe for concurrent use.
type Encoder struct {
	B []byte

	// InOrder writes map entries in their stored order, not sorted by
	// key: a reordered map then encodes apart (never as a false match).
	InOrder bool

	kvs []kv // sort stack of Attrs; a nested map pushes above its parent
}

type kv struct {
	k string
	v pcommon.Value
}

// Reset empties the buffer, keeping its memory.
func (e *Encoder) Reset() { e.B = e.B[:0] }

// U8 writes one byte.
func (e *Encoder) U8(v byte) { e.B = append(e.B, v) }

// Bool writes one byte, 1 for true.
func (e *Encoder) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
		return
	}
	e.B = append(e.B, 0)
}

// U64 writes 8 bytes, little-endian.
func (e *Encoder) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }

// Len writes a length or count as a uvarint.
func (e *Encoder) Len(n int) { e.B = binary.AppendUvarint(e.B, uint64(n)) }

// Str writes a length-prefixed string.
func (e *Encoder) Str(s string) {
	e.Len(len(s))
	e.B = append(e.B, s...)
}

// Bytes writes a length-prefixed byte slice.
func (e *Encoder) Bytes(p []byte) {
	e.Len(len(p))
	e.B = append(e.B, p...)
}

// Value writes a type tag and the value. Values keep their types: the
// string "1", the integer 1 and the double 1 encode differently, as they
// differ in the data model; an empty value is its tag alone.
func (e *Encoder) Value(v pcommon.Value) {
	t := v.Type()
	e.B = append(e.B, byte(t))
	switch t {
	case pcommon.ValueTypeStr:
		e.Str(v.Str())
	case pcommon.ValueTypeInt:
		e.U64(uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		e.U64(math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		e.Bool(v.Bool())
	case pcommon.ValueTypeBytes:
		b := v.Bytes() // AsRaw would copy
		n := b.Len()
		e.Len(n)
		e.B = slices.Grow(e.B, n)
		for i := range n {
			e.B = append(e.B, b.At(i))
		}
	case pcommon.ValueTypeMap:
		e.Attrs(v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		e.Len(s.Len())
		for i := 0; i < s.Len(); i++ {
			e.Value(s.At(i))
		}
	}
}

// Attrs writes a map: its length, then each key and value, sorted by key
// (in stored order with InOrder).
// Keys are unique in a well-formed map; a malformed one with a repeated key
// keeps those entries in their stored order, so it still encodes apart from
// the map with the two values swapped.
func (e *Encoder) Attrs(m pcommon.Map) {
	n := m.Len()
	e.Len(n)
	if n == 0 {
		return
	}
	if e.InOrder {
		for k, v := range m.All() {
			e.Str(k)
			e.Value(v)
		}
		return
	}
	// Many SDKs (Go's attribute sets, Java, Prometheus' labels) send
	// attributes sorted: write them as they come, and sort only when a key
	// is out of order.
	mark, prev, sorted := len(e.B), "", true
	for k, v := range m.All() {
		if k < prev {
			sorted = false
			break
		}
		e.Str(k)
		e.Value(v)
		prev = k
	}
	if sorted {
		return
	}
	e.B = e.B[:mark]
	base := len(e.kvs)
	for k, v := range m.All() {
		e.kvs = append(e.kvs, kv{k, v})
	}
	sortKVs(e.kvs[base:])
	for i := base; i < base+n; i++ {
		// e.kvs may grow (and move) while a nested map is written: index it
		// afresh each time.
		x := e.kvs[i]
		e.Str(x.k)
		e.Value(x.v)
	}
	clear(e.kvs[base:]) // let go of pdata references
	e.kvs = e.kvs[:base]
}

// sortKVs sorts by key, stably.
func sortKVs(s []kv) {
	if len(s) > 12 {
		slices.SortStableFunc(s, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		return
	}
	for i := 1; i < len(s); i++ { // insertion sort: a few keys, often nearly sorted
		for j := i; j > 0 && s[j].k < s[j-1].k; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Resource writes a resource's attributes and dropped count.
func (e *Encoder) Resource(r pcommon.Resource) {
	e.Attrs(r.Attributes())
	e.U64(uint64(r.DroppedAttributesCount()))
}

// Scope writes an instrumentation scope: name, version, attributes and
// dropped count.
func (e *Encoder) Scope(s pcommon.InstrumentationScope) {
	e.Str(s.Name())
	e.Str(s.Version())
	e.Attrs(s.Attributes())
	e.U64(uint64(s.DroppedAttributesCount()))
}
