package analyze

import (
	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/doubletake/doubletake/internal/pdataenc"
)

// enc builds the byte string a content hash is taken over: the shared
// canonical encoding (internal/pdataenc, attributes sorted by key, so an
// identity never depends on the order an SDK stored them in) and the hashes
// taken over it.
type enc struct{ pdataenc.Encoder }

func (e *enc) sum() uint64 { return xxh3.Hash(e.B) }
func (e *enc) sum128() xxh3.Uint128 {
	return xxh3.Hash128(e.B)
}

// resourceInfo is what the analysis keeps of a resource.
type resourceInfo struct {
	hash     uint64 // over the attributes
	service  string // service.name, "" when absent
	instance string // service.instance.id, "" when absent
	pid      string // process.pid as text, "" when absent
}

func describeResource(r pcommon.Resource, e *enc) resourceInfo {
	e.Reset()
	e.Attrs(r.Attributes())
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
	e.Attrs(s.Attributes())
	return e.sum()
}
