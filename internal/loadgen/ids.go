package loadgen

import "encoding/binary"

// Span ids are a bijection of a sequence number, so that the sink can tell,
// without a map, which spans arrived and how many of them were distinct:
//
//	span_id  = mix(seq)            (8 bytes, big endian; seq ≥ 1, so never zero)
//	trace_id = nonce ‖ mix(seq/spansPerTrace + 1)
//
// mix is the splitmix64 finaliser, invertible on uint64; the ids look random
// to the dedup processor's hash, as real SDK ids do. The nonce (nonzero)
// tells this run's spans from any others.

const (
	mixC1 = 0xbf58476d1ce4e5b9
	mixC2 = 0x94d049bb133111eb
)

var invC1, invC2 = inverse(mixC1), inverse(mixC2)

// inverse is the multiplicative inverse of an odd c modulo 2^64 (Newton).
func inverse(c uint64) uint64 {
	x := c // correct to 3 bits for odd c
	for range 6 {
		x *= 2 - c*x
	}
	return x
}

func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= mixC1
	z ^= z >> 27
	z *= mixC2
	z ^= z >> 31
	return z
}

func unmix(z uint64) uint64 {
	z ^= z>>31 ^ z>>62
	z *= invC2
	z ^= z>>27 ^ z>>54
	z *= invC1
	z ^= z>>30 ^ z>>60
	return z
}

// spansPerTrace is how many consecutive sequence numbers share a trace id.
const spansPerTrace = 8

// putIDs writes the trace and span id of sequence number seq.
func putIDs(traceID *[16]byte, spanID *[8]byte, nonce, seq uint64) {
	binary.BigEndian.PutUint64(traceID[0:8], nonce)
	binary.BigEndian.PutUint64(traceID[8:16], mix(seq/spansPerTrace+1))
	binary.BigEndian.PutUint64(spanID[:], mix(seq))
}

// seqOf returns the sequence number of a span of run nonce, or false for a
// span of another run.
func seqOf(traceID [16]byte, spanID [8]byte, nonce uint64) (uint64, bool) {
	if binary.BigEndian.Uint64(traceID[0:8]) != nonce {
		return 0, false
	}
	return unmix(binary.BigEndian.Uint64(spanID[:])), true
}
