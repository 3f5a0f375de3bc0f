package window

import "testing"

// TestPopulateKeepsWhatTheSetHolds: Populate on a set that has had
// insertions changes nothing (it may write zeros, so it does nothing
// then); on a new set the keys inserted afterwards are found as usual.
func TestPopulateKeepsWhatTheSetHolds(t *testing.T) {
	seed := NewSeed()
	s, err := New[[24]byte, uint64](1<<16, 1e12, seed.Hash24)
	if err != nil {
		t.Fatal(err)
	}
	s.Populate()
	key := func(i int) [24]byte { return [24]byte{byte(i), byte(i >> 8), 1} }
	for i := range 1000 {
		if _, seen := s.Observe(key(i), uint64(i), 1); seen {
			t.Fatalf("key %d seen before it was inserted", i)
		}
	}
	s.Populate()
	for i := range 1000 {
		if v, ok := s.Lookup(key(i)); !ok || v != uint64(i) {
			t.Fatalf("key %d: %d, %v after Populate; want %d, true", i, v, ok, i)
		}
	}
	if s.Len() != 1000 {
		t.Fatalf("Len %d, want 1000", s.Len())
	}
}
