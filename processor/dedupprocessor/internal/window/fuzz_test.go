package window

import (
	"testing"
)

// FuzzSet drives a small set with a sequence of operations read from the
// input (observe, forget, shrink; a weak hash when the input asks for one,
// so that keys collide on their home bucket and tag) and checks every
// answer, Len and the index's consistency against a model of the ring.
func FuzzSet(f *testing.F) {
	f.Add([]byte{7, 0, 1, 0, 2, 0, 3, 0, 1, 1, 2, 0, 9, 2, 3})
	f.Add([]byte{0x81, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 3, 2, 1, 0, 6, 0, 7, 0, 1})
	f.Add([]byte{0xbf, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 1, 5, 2, 9, 0, 9})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 4096 {
			return
		}
		capacity := int(in[0]&63) + 1
		hash := NewSeed().Hash24
		if in[0]&0x80 != 0 {
			// Four homes, one tag: long runs past the home bucket.
			hash = func(k *[24]byte) uint64 { return uint64(k[0]&3) << 62 }
		}
		s, err := New[[24]byte, uint64](capacity, 1<<60, hash)
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(capacity)
		ops := in[1:]
		for step := 0; step+1 < len(ops); step += 2 {
			op, k := ops[step]%8, key(uint64(ops[step+1]))
			switch op {
			case 0:
				m.shrink(t, step, s, int(ops[step+1]%8))
			case 1, 2:
				m.forget(t, step, s, k)
			default:
				m.observe(t, step, s, k, uint64(step)+1, int64(step))
			}
			m.checkLen(t, step, s)
		}
		checkIndex(t, s)
		for i := range uint64(256) {
			got, ok := s.Lookup(key(i))
			if want, h := m.held[key(i)]; ok != h || got != want {
				t.Fatalf("key %d: (%d, %v), want (%d, %v)", i, got, ok, want, h)
			}
		}
	})
}
