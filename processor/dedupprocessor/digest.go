package dedupprocessor

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// encoder writes pdata values into a byte buffer in a canonical,
// unambiguous form: every value is tagged with its type and every string,
// byte slice, map and slice is prefixed with its length, so two different
// values never encode alike. Map entries keep their order: the same record
// exported twice keeps it too, and a reordered map counts as new (never as a
// false duplicate).
type encoder struct{ b []byte }

func (e *encoder) reset() { e.b = e.b[:0] }

func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) bytes(p []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *encoder) value(v pcommon.Value) {
	e.b = append(e.b, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		e.str(v.Str())
	case pcommon.ValueTypeInt:
		e.u64(uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		e.u64(math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case pcommon.ValueTypeBytes:
		e.bytes(v.Bytes().AsRaw())
	case pcommon.ValueTypeMap:
		e.attrs(v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		e.b = binary.AppendUvarint(e.b, uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			e.value(s.At(i))
		}
	}
}

func (e *encoder) attrs(m pcommon.Map) {
	e.b = binary.AppendUvarint(e.b, uint64(m.Len()))
	for k, v := range m.All() {
		e.str(k)
		e.value(v)
	}
}

func (e *encoder) resource(r pcommon.Resource) {
	e.attrs(r.Attributes())
	e.u64(uint64(r.DroppedAttributesCount()))
}

func (e *encoder) scope(s pcommon.InstrumentationScope) {
	e.str(s.Name())
	e.str(s.Version())
	e.attrs(s.Attributes())
	e.u64(uint64(s.DroppedAttributesCount()))
}
