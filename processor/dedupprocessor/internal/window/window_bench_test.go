package window

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkObserve measures one Observe in steady state: the set is full, so
// every new key also evicts the oldest one.
func BenchmarkObserve(b *testing.B) {
	const capacity = 1 << 21
	for _, dup := range []struct {
		name  string
		every int // every n-th key repeats an earlier one; 0 for none
	}{{"dup=0%", 0}, {"dup=50%", 2}} {
		b.Run(dup.name, func(b *testing.B) {
			s := newSet(b, capacity, 1<<62)
			r := rand.New(rand.NewPCG(3, 4))
			keys := make([][24]byte, 1<<16)
			for i := range keys {
				for j := range keys[i] {
					keys[i][j] = byte(r.Uint32())
				}
			}
			next := uint64(0)
			fresh := func() [24]byte {
				next++
				k := keys[next&(1<<16-1)]
				k[0] ^= byte(next >> 16)
				k[1] ^= byte(next >> 24)
				k[2] ^= byte(next >> 32)
				return k
			}
			for range capacity + capacity/2 {
				s.Observe(fresh(), 0, 0)
			}
			var last [24]byte
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := fresh()
				if dup.every > 0 && i%dup.every == 1 {
					k = last
				}
				s.Observe(k, 0, 0)
				last = k
			}
			b.ReportMetric(float64(s.Bytes())/float64(s.Capacity()), "bytes/entry")
		})
	}
}

// BenchmarkMapFloor is the floor to compare with: a probe of Go's own map
// with a 24-byte key.
func BenchmarkMapFloor(b *testing.B) {
	m := make(map[[24]byte]uint32, 1<<21)
	for i := range uint64(1 << 21) {
		m[key(i)] = uint32(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var hits int
	for i := range b.N {
		if _, ok := m[key(uint64(i)*7919&(1<<22-1))]; ok {
			hits++
		}
	}
	_ = hits
}

// BenchmarkObserveBatch is the window's part of the span path alone, the
// way the processor drives it: batches of 1000 new keys, hashed first, then
// Prefetch of `ahead` keys at a time and ObserveHashed of each, into a full
// set of `capacity` keys (2M: the default, far larger than the cache; 16Ki:
// the processor benchmark's cached case).
func BenchmarkObserveBatch(b *testing.B) {
	const batch = 1000
	for _, bc := range []struct {
		name     string
		capacity int
		ahead    int
	}{
		{"full/ahead=1000", 2_000_000, 1000}, {"full/ahead=64", 2_000_000, 64}, {"full/ahead=0", 2_000_000, 0},
		{"cached/ahead=1000", 1 << 14, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newSet(b, bc.capacity, 1<<62)
			r := rand.New(rand.NewPCG(3, 4))
			keys := make([][24]byte, batch)
			hs := make([]uint64, batch)
			fill := func() {
				for i := range keys {
					for j := 0; j < 24; j += 8 {
						v := r.Uint64()
						for x := range 8 {
							keys[i][j+x] = byte(v >> (8 * x))
						}
					}
				}
			}
			for range bc.capacity/batch + 1 {
				fill()
				for i := range keys {
					s.Observe(keys[i], 0, 0)
				}
			}
			// The CPU time of this goroutine's thread beside the wall
			// time, as in the processor's benchmark: on a shared machine
			// it leaves out the time the thread waited for a core.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu int64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fill()
				b.StartTimer()
				c0 := threadCPU()
				for i := range keys {
					hs[i] = s.Hash(&keys[i])
				}
				for i := range keys {
					if bc.ahead > 0 && i%bc.ahead == 0 {
						s.Prefetch(hs[i:min(i+bc.ahead, batch)])
					}
					s.ObserveHashed(&keys[i], hs[i], 0, 0)
				}
				cpu += threadCPU() - c0
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
			if cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N*batch), "cpu-ns/key")
			}
		})
	}
}

// BenchmarkNewPopulate2M is what a 2M-span window (the default's) costs
// to make and make resident: part of a gateway's time to healthy.
func BenchmarkNewPopulate2M(b *testing.B) {
	for b.Loop() {
		s, err := New[[24]byte, uint64](2_000_000, 1e9, func(k *[24]byte) uint64 { return uint64(k[0]) })
		if err != nil || s.Capacity() != 2_000_000 {
			b.Fatal(err)
		}
		s.Populate()
	}
}
