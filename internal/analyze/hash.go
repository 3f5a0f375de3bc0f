package analyze

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// enc builds the byte string a content hash is taken over. Every field is
// written with a type tag and, for variable-length data, a length, so two
// different records never encode to the same bytes.
type enc struct{ b []byte }

func (e *enc) reset()      { e.b = e.b[:0] }
func (e *enc) sum() uint64 { return xxh3.Hash(e.b) }
func (e *enc) sum128() xxh3.Uint128 {
	return xxh3.Hash128(e.b)
}

func (e *enc) u8(v byte)    { e.b = append(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *enc) bytes(p []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}

// value writes v. Map keys are written in the order they are stored: copies
// of one record made by one SDK keep that order.
func (e *enc) value(v pcommon.Value) {
	e.u8(byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		e.str(v.Str())
	case pcommon.ValueTypeInt:
		e.u64(uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		e.u64(math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case pcommon.ValueTypeBytes:
		e.bytes(v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		e.u64(uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			e.value(s.At(i))
		}
	case pcommon.ValueTypeMap:
		e.attrs(v.Map())
	}
}

func (e *enc) attrs(m pcommon.Map) {
	e.u64(uint64(m.Len()))
	for k, v := range m.All() {
		e.str(k)
		e.value(v)
	}
}

// sortedAttrs writes m with its keys sorted, for identities that must not
// depend on the order an SDK happened to store attributes in.
func (e *enc) sortedAttrs(m pcommon.Map) {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.u64(uint64(len(keys)))
	for _, k := range keys {
		v, _ := m.Get(k)
		e.str(k)
		if v.Type() == pcommon.ValueTypeMap {
			e.u8(byte(pcommon.ValueTypeMap))
			e.sortedAttrs(v.Map())
			continue
		}
		e.value(v)
	}
}

// resourceInfo is what the analysis keeps of a resource.
type resourceInfo struct {
	hash     uint64 // over the sorted attributes
	service  string // service.name, "" when absent
	instance string // service.instance.id, "" when absent
	pid      string // process.pid as text, "" when absent
}

func describeResource(r pcommon.Resource, e *enc) resourceInfo {
	e.reset()
	e.sortedAttrs(r.Attributes())
	ri := resourceInfo{hash: e.sum()}
	if v, ok := r.Attributes().Get("service.name"); ok {
		ri.service = v.AsString()
	}
	if v, ok := r.Attributes().Get("service.instance.id"); ok {
		ri.instance = v.AsString()
	}
	if v, ok := r.Attributes().Get("process.pid"); ok {
		ri.pid = v.AsString()
	}
	return ri
}

// scopeHash identifies an instrumentation scope (name, version, attributes).
func scopeHash(s pcommon.InstrumentationScope, e *enc) uint64 {
	e.reset()
	e.str(s.Name())
	e.str(s.Version())
	e.sortedAttrs(s.Attributes())
	return e.sum()
}
