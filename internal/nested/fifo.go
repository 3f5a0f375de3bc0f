package nested

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// spanKey is a trace id and a span id: 24 bytes compared exactly.
type spanKey [24]byte

func keyOf(t pcommon.TraceID, s pcommon.SpanID) spanKey {
	var k spanKey
	copy(k[:16], t[:])
	copy(k[16:], s[:])
	return k
}

func (k spanKey) traceID() pcommon.TraceID {
	var t pcommon.TraceID
	copy(t[:], k[:16])
	return t
}

func (k spanKey) spanID() pcommon.SpanID {
	var s pcommon.SpanID
	copy(s[:], k[16:])
	return s
}

// fifo is a map bounded to max entries: when full, the oldest insertion
// goes first (re-putting a key neither moves nor duplicates it).
type fifo[K comparable, V any] struct {
	max     int
	m       map[K]V
	ring    []K
	head    int // the oldest entry once the ring is full
	evicted uint64
}

func newFIFO[K comparable, V any](max int) *fifo[K, V] {
	if max < 1 {
		max = 1
	}
	return &fifo[K, V]{max: max, m: make(map[K]V)}
}

func (f *fifo[K, V]) get(k K) (V, bool) {
	v, ok := f.m[k]
	return v, ok
}

// put stores v under k and reports whether k is new.
func (f *fifo[K, V]) put(k K, v V) bool {
	if _, ok := f.m[k]; ok {
		f.m[k] = v
		return false
	}
	if len(f.ring) < f.max {
		f.ring = append(f.ring, k)
	} else {
		delete(f.m, f.ring[f.head])
		f.evicted++
		f.ring[f.head] = k
		f.head = (f.head + 1) % f.max
	}
	f.m[k] = v
	return true
}

func (f *fifo[K, V]) len() int { return len(f.m) }
