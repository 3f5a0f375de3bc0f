package streams

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// FuzzPairCopyNeverPeer: a copy made of the fuzzer's measurements (its
// values multiples of 1/16, so that every sum is exact) and reads, the
// later writer joining after any of them, its points fed in any order,
// is never called a peer by any test of Pair (the joint test of count and
// sum included). Then the same Pair takes arbitrary histogram points
// (NaN, infinities, min above max) without panicking.
func FuzzPairCopyNeverPeer(f *testing.F) {
	f.Add([]byte{3, 20, 22, 21, 20, 23, 20, 22, 0x80, 0x7f, 1, 9, 2, 11, 4, 12, 6, 8, 7, 5})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		n := min(int(data[1])%48+1, len(data)-2)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(int8(data[2+i])) / 16
		}
		ops := data[2+n:]
		join := int(data[0]) % n // L counts vals[join:]
		const ms = uint64(time.Millisecond)
		startE, startL := uint64(time.Second), uint64(time.Second)+uint64(join)*10*ms+ms
		read := func(w, upto int) (Point, bool) {
			from := 0
			if w == 1 {
				from = join
			}
			if upto <= from {
				return Point{}, false
			}
			p := Point{Start: startE, Time: startE + uint64(upto)*10*ms + 5*ms, HasSum: true, HasMinMax: true, Min: math.Inf(1), Max: math.Inf(-1)}
			if w == 1 {
				p.Start = startL
			}
			for _, v := range vals[from:upto] {
				p.Value++
				p.Sum += v
				p.Min, p.Max = min(p.Min, v), max(p.Max, v)
			}
			return p, true
		}
		var p Pair
		for i := 0; i+1 < len(ops); i += 2 {
			pt, ok := read(int(ops[i]&1), int(ops[i+1])%(n+1))
			if !ok {
				continue
			}
			p.Add(histogram, pt)
			if p.Class() == ClassPeer {
				t.Fatalf("a copy (join after %d of %v) called a peer at point %d: %v", join, vals, i/2, p.Evidence())
			}
		}
		// Hostile points: any bits in count, sum, min and max.
		for i := 0; i+33 <= len(data); i += 33 {
			b := data[i : i+33]
			f := func(k int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[1+8*k:])) }
			pt := Point{Start: startE, Time: startE + uint64(b[0])*ms, Value: math.Abs(f(0)), Sum: f(1), HasSum: true, Min: f(2), Max: f(3), HasMinMax: true}
			if b[0]&1 != 0 {
				pt.Start = startL
			}
			p.Add(histogram, pt)
			_ = p.Evidence().String()
		}
	})
}
