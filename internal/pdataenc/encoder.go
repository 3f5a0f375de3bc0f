// Package pdataenc writes pdata values into bytes in a canonical,
// unambiguous form, for content digests: every value is tagged with its
// type and every string, byte slice, map and slice is prefixed with its
// length, so two different values never encode alike. Map entries keep
// their stored order: copies of one record made by one SDK keep it too, and
// a reordered map counts as different (never as a false duplicate). The
// dedup processor's log digests and verify's content hashes both use it.
package pdataenc

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Encoder appends to B; reuse one to encode without allocating.
type Encoder struct{ B []byte }

// Reset empties the buffer, keeping its memory.
func (e *Encoder) Reset() { e.B = e.B[:0] }

// U8 writes one byte.
func (e *Encoder) U8(v byte) { e.B = append(e.B, v) }

// U64 writes 8 bytes, little-endian.
func (e *Encoder) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }

// Str writes a length-prefixed string.
func (e *Encoder) Str(s string) {
	e.B = binary.AppendUvarint(e.B, uint64(len(s)))
	e.B = append(e.B, s...)
}

// Bytes writes a length-prefixed byte slice.
func (e *Encoder) Bytes(p []byte) {
	e.B = binary.AppendUvarint(e.B, uint64(len(p)))
	e.B = append(e.B, p...)
}

// Value writes a type-tagged value.
func (e *Encoder) Value(v pcommon.Value) {
	e.B = append(e.B, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		e.Str(v.Str())
	case pcommon.ValueTypeInt:
		e.U64(uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		e.U64(math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			e.U8(1)
		} else {
			e.U8(0)
		}
	case pcommon.ValueTypeBytes:
		e.Bytes(v.Bytes().AsRaw())
	case pcommon.ValueTypeMap:
		e.Attrs(v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		e.B = binary.AppendUvarint(e.B, uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			e.Value(s.At(i))
		}
	}
}

// Attrs writes a map, its entries in stored order.
func (e *Encoder) Attrs(m pcommon.Map) {
	e.B = binary.AppendUvarint(e.B, uint64(m.Len()))
	for k, v := range m.All() {
		e.Str(k)
		e.Value(v)
	}
}

// Resource writes a resource's attributes and dropped count.
func (e *Encoder) Resource(r pcommon.Resource) {
	e.Attrs(r.Attributes())
	e.U64(uint64(r.DroppedAttributesCount()))
}

// Scope writes an instrumentation scope.
func (e *Encoder) Scope(s pcommon.InstrumentationScope) {
	e.Str(s.Name())
	e.Str(s.Version())
	e.Attrs(s.Attributes())
	e.U64(uint64(s.DroppedAttributesCount()))
}
