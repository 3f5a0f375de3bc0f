package window

// Populate makes the set's ring and index resident now (on Linux; a no-op
// elsewhere). Their memory is fixed at construction but the kernel hands
// it over a page at a time, on first touch: without Populate the
// insertions that first reach each 4 KiB page pay a page fault, and the
// index is reached at random, so a fresh set's first few hundred thousand
// insertions pay about one fault each 16 keys at 2M capacity (a fresh
// process's span path). Populate costs about 20 ms per 2M entries at
// once, and the resident memory the full set would have anyway. It does
// nothing once the set has had an insertion (it may write zeros).
func (s *Set[K, V]) Populate() {
	if s.writes > 0 {
		return
	}
	populateMemory(s.ring)
	populateMemory(s.buckets)
	populateMemory(s.indexed)
}
