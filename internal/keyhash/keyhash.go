// Package keyhash is the keyed hash of the fixed-size keys the dedup
// windows index: a span's 24-byte identity and a 16-byte digest. It reads
// keys in place and is keyed by a Seed drawn per process, so that a client
// that cannot learn the seed cannot choose keys that collide.
package keyhash

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
)

// Seed is the secret that keys the hash. It is drawn per process: a client
// that cannot learn it cannot choose keys that share a probe run.
type Seed [4]uint64

// NewSeed draws a random Seed.
func NewSeed() Seed {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	var s Seed
	for i := range s {
		s[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return s
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// Hash24 hashes a 24-byte key (a trace id and a span id) with the seed. It
// reads the key in place: a copy through the stack would make the read wait
// for the copy's stores, which serialises a look-ahead over many keys.
func (s Seed) Hash24(k *[24]byte) uint64 {
	a := binary.LittleEndian.Uint64(k[0:])
	b := binary.LittleEndian.Uint64(k[8:])
	c := binary.LittleEndian.Uint64(k[16:])
	return mix(mix(a^s[0], b^s[1])^c, s[2]^24)
}

// Hash16 hashes a 16-byte key (a 128-bit digest) with the seed.
func (s Seed) Hash16(k *[16]byte) uint64 {
	a := binary.LittleEndian.Uint64(k[0:])
	b := binary.LittleEndian.Uint64(k[8:])
	return mix(a^s[0], b^s[1]^s[3])
}
