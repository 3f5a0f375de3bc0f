package analyze

import (
	"github.com/doubletake/doubletake/internal/pdataenc"
	"slices"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// enc builds the byte string a content hash is taken over: the shared
// canonical encoding (internal/pdataenc) and the hashes taken over it.
type enc struct{ pdataenc.Encoder }

func (e *enc) sum() uint64 { return xxh3.Hash(e.B) }
func (e *enc) sum128() xxh3.Uint128 {
	return xxh3.Hash128(e.B)
}

// sortedAttrs writes m with its keys sorted, for identities that must not
// depend on the order an SDK happened to store attributes in.
func (e *enc) sortedAttrs(m pcommon.Map) {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.U64(uint64(len(keys)))
	for _, k := range keys {
		v, _ := m.Get(k)
		e.Str(k)
		if v.Type() == pcommon.ValueTypeMap {
			e.U8(byte(pcommon.ValueTypeMap))
			e.sortedAttrs(v.Map())
			continue
		}
		e.Value(v)
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
	e.Reset()
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
	e.Reset()
	e.Str(s.Name())
	e.Str(s.Version())
	e.sortedAttrs(s.Attributes())
	return e.sum()
}
