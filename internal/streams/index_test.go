package streams

import (
	"math/rand/v2"
	"testing"
)

// TestIndexAgainstMap drives the index through inserts, deletes (with
// backward shifts across the end of the table) and growth, and checks it
// against a Go map after every step.
func TestIndexAgainstMap(t *testing.T) {
	tr := newTracker(t, func(p *Policy) { p.MaxStreams = 1 << 20 })
	r := rand.New(rand.NewPCG(3, 4))
	oracle := map[ID]bool{}
	p := Point{Start: 1, Time: 10}
	check := func(step int) {
		if tr.Len() != len(oracle) {
			t.Fatalf("step %d: %d streams, want %d", step, tr.Len(), len(oracle))
		}
		for id := range oracle {
			if i, _, ok := tr.index.find(&id, tr); !ok || tr.at(i).id != id {
				t.Fatalf("step %d: %v lost", step, id)
			}
		}
	}
	for step := range 40_000 {
		k := r.IntN(3000)
		id := ID{byte(k), byte(k >> 8), 7}
		if oracle[id] {
			if r.IntN(2) == 0 {
				i, _, _ := tr.index.find(&id, tr)
				tr.remove(i, tr.at(i))
				delete(oracle, id)
				if _, _, ok := tr.index.find(&id, tr); ok {
					t.Fatalf("step %d: %v still found", step, id)
				}
			}
		} else {
			tr.Observe(id, monoSum, p, 0)
			oracle[id] = true
		}
		if step%1000 == 0 {
			check(step)
		}
	}
	check(-1)
	if len(tr.index.slots) < 2*tr.Len() {
		t.Fatalf("index %d slots for %d streams: more than half full", len(tr.index.slots), tr.Len())
	}
}
