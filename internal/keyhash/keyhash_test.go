package keyhash

import "testing"

// Every byte of a key and every seed word in use changes the hash, and the
// same key under the same seed always hashes the same.
func TestHashUsesEveryByteAndTheSeed(t *testing.T) {
	s := Seed{1, 2, 3, 4}
	var k24 [24]byte
	var k16 [16]byte
	h24, h16 := s.Hash24(&k24), s.Hash16(&k16)
	if s.Hash24(&k24) != h24 || s.Hash16(&k16) != h16 {
		t.Fatal("the same key hashed twice gave two hashes")
	}
	for i := range k24 {
		k := k24
		k[i] = 1
		if s.Hash24(&k) == h24 {
			t.Errorf("Hash24 ignores byte %d", i)
		}
	}
	for i := range k16 {
		k := k16
		k[i] = 1
		if s.Hash16(&k) == h16 {
			t.Errorf("Hash16 ignores byte %d", i)
		}
	}
	for i := range s {
		o := s
		o[i] ^= 1 << 40
		if i != 3 && o.Hash24(&k24) == h24 {
			t.Errorf("Hash24 ignores seed word %d", i)
		}
		if i != 2 && o.Hash16(&k16) == h16 {
			t.Errorf("Hash16 ignores seed word %d", i)
		}
	}
	if a, b := NewSeed(), NewSeed(); a == b {
		t.Error("two drawn seeds are equal")
	}
}
