package streams

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// ID is a metric stream's identity: the seeded XXH3-128 digest of its
// canonical encoding. Two streams with the same identity get the same ID
// under the same seed; two different identities collide with probability
// 2^-128, and a client that does not know the seed cannot aim a collision.
type ID [16]byte

// String returns the ID in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Hasher computes stream IDs without allocating once its buffers have grown:
// call Resource once per ResourceMetrics, Scope once per ScopeMetrics,
// Metric once per Metric and Point once per data point. Each level's digest
// is kept, so a point costs one hash of its own attributes and the 16-byte
// digest above it. A Hasher is not safe for concurrent use.
type Hasher struct {
	seed   uint64
	buf    []byte
	kvs    []kv // attribute sort stack; nested maps push above their parent
	res    [16]byte
	scope  [16]byte
	metric [16]byte
}

type kv struct {
	k string
	v pcommon.Value
}

// NewHasher returns a Hasher keyed with seed. IDs are comparable only
// between hashers with the same seed: use a random seed in a long-running
// process (no client can then aim a collision) and a fixed one, such as 0,
// where IDs must be stable across processes.
func NewHasher(seed uint64) *Hasher {
	return &Hasher{seed: seed, buf: make([]byte, 0, 256), kvs: make([]kv, 0, 16)}
}

// Domain tags keep the encodings of the levels apart.
const (
	tagResource = 'R'
	tagScope    = 'S'
	tagMetric   = 'M'
	tagPoint    = 'P'
)

func (h *Hasher) sum() [16]byte { return xxh3.Hash128Seed(h.buf, h.seed).Bytes() }

// Resource starts a ResourceMetrics: its attributes are the first part of
// every stream's identity below it. Dropped-attribute counts and schema URLs
// are not part of the identity.
func (h *Hasher) Resource(r pcommon.Resource) {
	h.buf = append(h.buf[:0], tagResource)
	h.attrs(r.Attributes())
	h.res = h.sum()
}

// Scope starts a ScopeMetrics under the current resource: name, version and
// attributes.
func (h *Hasher) Scope(s pcommon.InstrumentationScope) {
	h.buf = append(h.buf[:0], tagScope)
	h.buf = append(h.buf, h.res[:]...)
	h.str(s.Name())
	h.str(s.Version())
	h.attrs(s.Attributes())
	h.scope = h.sum()
}

// Metric starts a Metric under the current scope: name, unit, type,
// monotonicity and temporality. It returns the stream's Shape, and false
// for a metric the Tracker does not judge (an empty type, or a Sum, Histogram
// or ExponentialHistogram with unspecified temporality).
func (h *Hasher) Metric(m pmetric.Metric) (Shape, bool) {
	shape, ok := ShapeOf(m)
	h.buf = append(h.buf[:0], tagMetric)
	h.buf = append(h.buf, h.scope[:]...)
	h.str(m.Name())
	h.str(m.Unit())
	var mono bool
	var temp pmetric.AggregationTemporality
	switch m.Type() {
	case pmetric.MetricTypeSum:
		mono, temp = m.Sum().IsMonotonic(), m.Sum().AggregationTemporality()
	case pmetric.MetricTypeHistogram:
		temp = m.Histogram().AggregationTemporality()
	case pmetric.MetricTypeExponentialHistogram:
		temp = m.ExponentialHistogram().AggregationTemporality()
	}
	h.buf = append(h.buf, byte(m.Type()), b2u8(mono), byte(temp))
	h.metric = h.sum()
	return shape, ok
}

// Point returns the ID of the stream that a point with attrs belongs to,
// under the current metric.
func (h *Hasher) Point(attrs pcommon.Map) ID {
	h.buf = append(h.buf[:0], tagPoint)
	h.buf = append(h.buf, h.metric[:]...)
	h.attrs(attrs)
	return h.sum()
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func (h *Hasher) u64(v uint64) { h.buf = binary.LittleEndian.AppendUint64(h.buf, v) }

func (h *Hasher) str(s string) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(s)))
	h.buf = append(h.buf, s...)
}

// attrs encodes a map sorted by key, so that two writers that put the same
// attributes in different orders write one stream. Keys are unique in a
// well-formed map; a malformed one with repeated keys keeps their order.
func (h *Hasher) attrs(m pcommon.Map) {
	n := m.Len()
	h.buf = binary.AppendUvarint(h.buf, uint64(n))
	if n == 0 {
		return
	}
	// Many SDKs (Go, Java, Prometheus' labels) send attributes sorted:
	// encode them as they come, and sort only when a key is out of order.
	mark, prev, sorted := len(h.buf), "", true
	for k, v := range m.All() {
		if k < prev {
			sorted = false
			break
		}
		h.str(k)
		h.value(v)
		prev = k
	}
	if sorted {
		return
	}
	h.buf = h.buf[:mark]
	base := len(h.kvs)
	for k, v := range m.All() {
		h.kvs = append(h.kvs, kv{k, v})
	}
	sortKVs(h.kvs[base:])
	for i := base; i < base+n; i++ {
		// h.kvs may grow (and move) while a nested map is encoded: index it
		// afresh each time.
		e := h.kvs[i]
		h.str(e.k)
		h.value(e.v)
	}
	clear(h.kvs[base:]) // let go of pdata references
	h.kvs = h.kvs[:base]
}

func sortKVs(s []kv) {
	if len(s) > 12 {
		slices.SortStableFunc(s, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		return
	}
	for i := 1; i < len(s); i++ { // insertion sort: a few keys, often sorted already
		for j := i; j > 0 && s[j].k < s[j-1].k; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// value writes a type tag and the value; strings, byte slices, maps and
// slices are length-prefixed, so no two values encode alike. Values keep
// their types: the string "1" and the integer 1 are different identities,
// as in the data model.
func (h *Hasher) value(v pcommon.Value) {
	t := v.Type()
	h.buf = append(h.buf, byte(t))
	switch t {
	case pcommon.ValueTypeStr:
		h.str(v.Str())
	case pcommon.ValueTypeInt:
		h.u64(uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		h.u64(math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		h.buf = append(h.buf, b2u8(v.Bool()))
	case pcommon.ValueTypeBytes:
		b := v.Bytes()
		h.buf = binary.AppendUvarint(h.buf, uint64(b.Len()))
		for i := 0; i < b.Len(); i++ {
			h.buf = append(h.buf, b.At(i))
		}
	case pcommon.ValueTypeMap:
		h.attrs(v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		h.buf = binary.AppendUvarint(h.buf, uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			h.value(s.At(i))
		}
	}
}
