package streams

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/pdataenc"
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
// digest above it. Attributes are written by the project's canonical
// encoder (internal/pdataenc): sorted by key, nested maps too, so two
// writers that put the same attributes in different orders write one
// stream. A Hasher is not safe for concurrent use.
type Hasher struct {
	seed   uint64
	enc    pdataenc.Encoder
	res    [16]byte
	scope  [16]byte
	metric [16]byte
}

// NewHasher returns a Hasher keyed with seed. IDs are comparable only
// between hashers with the same seed: use a random seed in a long-running
// process (no client can then aim a collision) and a fixed one, such as 0,
// where IDs must be stable across processes.
func NewHasher(seed uint64) *Hasher {
	return &Hasher{seed: seed, enc: pdataenc.Encoder{B: make([]byte, 0, 256)}}
}

// Domain tags keep the encodings of the levels apart.
const (
	tagResource = 'R'
	tagScope    = 'S'
	tagMetric   = 'M'
	tagPoint    = 'P'
)

func (h *Hasher) sum() [16]byte { return xxh3.Hash128Seed(h.enc.B, h.seed).Bytes() }

// Resource starts a ResourceMetrics: its attributes are the first part of
// every stream's identity below it. Dropped-attribute counts and schema URLs
// are not part of the identity.
func (h *Hasher) Resource(r pcommon.Resource) {
	h.enc.B = append(h.enc.B[:0], tagResource)
	h.enc.Attrs(r.Attributes())
	h.res = h.sum()
}

// Scope starts a ScopeMetrics under the current resource: name, version and
// attributes.
func (h *Hasher) Scope(s pcommon.InstrumentationScope) {
	h.enc.B = append(h.enc.B[:0], tagScope)
	h.enc.B = append(h.enc.B, h.res[:]...)
	h.enc.Str(s.Name())
	h.enc.Str(s.Version())
	h.enc.Attrs(s.Attributes())
	h.scope = h.sum()
}

// Metric starts a Metric under the current scope: name, unit, type,
// monotonicity and temporality. It returns the stream's Shape, and false
// for a metric the Tracker does not judge (an empty type, or a Sum, Histogram
// or ExponentialHistogram with unspecified temporality).
func (h *Hasher) Metric(m pmetric.Metric) (Shape, bool) {
	shape, ok := ShapeOf(m)
	h.enc.B = append(h.enc.B[:0], tagMetric)
	h.enc.B = append(h.enc.B, h.scope[:]...)
	h.enc.Str(m.Name())
	h.enc.Str(m.Unit())
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
	h.enc.U8(byte(m.Type()))
	h.enc.Bool(mono)
	h.enc.U8(byte(temp))
	h.metric = h.sum()
	return shape, ok
}

// Origin identifies the current resource and scope: with a writer's start
// time, it groups the streams one writer sends (Tracker.ObserveFrom). Never
// 0 once Scope was called.
func (h *Hasher) Origin() uint64 {
	return binary.LittleEndian.Uint64(h.scope[:8]) | 1
}

// Identity is the current resource's hash, for Tracker.NewScope: the
// identity whose points at one time are one export.
func (h *Hasher) Identity() uint64 {
	return binary.LittleEndian.Uint64(h.res[:8]) | 1
}

// Point returns the ID of the stream that a point with attrs belongs to,
// under the current metric.
func (h *Hasher) Point(attrs pcommon.Map) ID {
	h.enc.B = append(h.enc.B[:0], tagPoint)
	h.enc.B = append(h.enc.B, h.metric[:]...)
	h.enc.Attrs(attrs)
	return h.sum()
}
