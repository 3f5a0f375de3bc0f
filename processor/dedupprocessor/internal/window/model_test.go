package window

import "testing"

// model is the reference the Set is checked against: the ring's arrival
// order and the keys it holds, each with the value it was stored with, and
// the arrival of the newest held entry that left before its window ended.
type model struct {
	capacity int
	order    []arrived // the ring's entries, oldest first
	held     map[[24]byte]uint64

	evicted     bool
	lastEvicted int64
	latest      int64 // the newest arrival time observed
}

type arrived struct {
	key [24]byte
	at  int64
}

func newModel(capacity int) *model {
	return &model{capacity: capacity, held: map[[24]byte]uint64{}}
}

// drop takes the oldest ring entry out; its key goes only if it was not
// forgotten and stored again since.
func (m *model) drop() {
	old := m.order[0]
	m.order = m.order[1:]
	if _, ok := m.held[old.key]; ok && !newerCopy(m.order, old.key) {
		delete(m.held, old.key)
		m.evicted, m.lastEvicted = true, max(m.lastEvicted, old.at)
	}
}

func newerCopy(order []arrived, k [24]byte) bool {
	for _, o := range order {
		if o.key == k {
			return true
		}
	}
	return false
}

// observe checks s.Observe(k, v, at) against the model and applies it.
func (m *model) observe(t testing.TB, step int, s *Set[[24]byte, uint64], k [24]byte, v uint64, at int64) {
	t.Helper()
	prev, seen := s.Observe(k, v, at)
	mv, want := m.held[k]
	if seen != want || (seen && prev != mv) {
		t.Fatalf("step %d: Observe = (%d, %v), want (%d, %v)", step, prev, seen, mv, want)
	}
	if !seen {
		if len(m.order) == m.capacity {
			m.drop()
		}
		m.order = append(m.order, arrived{k, at})
		m.held[k] = v
	}
	m.latest = max(m.latest, at)
}

// forget checks s.Forget(k) against the model and applies it.
func (m *model) forget(t testing.TB, step int, s *Set[[24]byte, uint64], k [24]byte) {
	t.Helper()
	_, want := m.held[k]
	if got := s.Forget(k); got != want {
		t.Fatalf("step %d: Forget = %v, want %v", step, got, want)
	}
	delete(m.held, k)
}

// shrink checks s.Shrink(n) against the model and applies it: the oldest
// entries leave the ring without being overwritten.
func (m *model) shrink(t testing.TB, step int, s *Set[[24]byte, uint64], n int) {
	t.Helper()
	if got := s.Shrink(n); got != min(n, len(m.order)) {
		t.Fatalf("step %d: Shrink(%d) = %d, want %d", step, n, got, min(n, len(m.order)))
	}
	for range min(n, len(m.order)) {
		m.drop()
	}
}

// checkLen checks that s holds as many keys as the model, and the times
// it reports against the arrivals: Oldest no later than the oldest ring
// entry's, LastEvicted no earlier than the newest evicted entry's (so that
// every key arrived after it is held) and no later than the newest arrival.
func (m *model) checkLen(t testing.TB, step int, s *Set[[24]byte, uint64]) {
	t.Helper()
	if s.Len() != len(m.held) {
		t.Fatalf("step %d: Len = %d, want %d", step, s.Len(), len(m.held))
	}
	if first, ok := s.Oldest(); ok != (len(m.order) > 0) || (ok && first > m.order[0].at) {
		t.Fatalf("step %d: Oldest = (%d, %v) with %d ring entries, want at most the oldest entry's arrival", step, first, ok, len(m.order))
	}
	if last, ok := s.LastEvicted(); ok != m.evicted || (ok && (last < m.lastEvicted || last > m.latest)) {
		t.Fatalf("step %d: LastEvicted = (%d, %v), want (between %d and %d, %v)", step, last, ok, m.lastEvicted, m.latest, m.evicted)
	}
}
