package window

import "testing"

// model is the reference the Set is checked against: the ring's arrival
// order and the keys it holds, each with the value it was stored with.
type model struct {
	capacity int
	order    [][24]byte // arrival order of the ring's entries
	held     map[[24]byte]uint64
}

func newModel(capacity int) *model {
	return &model{capacity: capacity, held: map[[24]byte]uint64{}}
}

// drop takes the oldest ring entry out; its key goes only if it was not
// forgotten and stored again since.
func (m *model) drop() {
	old := m.order[0]
	m.order = m.order[1:]
	if _, ok := m.held[old]; ok && !newerCopy(m.order, old) {
		delete(m.held, old)
	}
}

func newerCopy(order [][24]byte, k [24]byte) bool {
	for _, o := range order {
		if o == k {
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
		m.order = append(m.order, k)
		m.held[k] = v
	}
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

// checkLen checks that s holds as many keys as the model.
func (m *model) checkLen(t testing.TB, step int, s *Set[[24]byte, uint64]) {
	t.Helper()
	if s.Len() != len(m.held) {
		t.Fatalf("step %d: Len = %d, want %d", step, s.Len(), len(m.held))
	}
}
