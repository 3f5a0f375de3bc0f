package loadgen

import (
	"math"
	"sync/atomic"
	"time"
)

// latHist counts request latencies (send to answer) in logarithmic buckets,
// 4% apart from 10 µs to about 1 min, so that percentiles cost no memory
// per request and can be taken between two snapshots.
type latHist struct {
	b [latBuckets]atomic.Uint64
}

const (
	latMin     = 10 * time.Microsecond
	latGrowth  = 1.04
	latBuckets = 400
)

var latLogGrowth = math.Log(latGrowth)

func latBucket(d time.Duration) int {
	if d <= latMin {
		return 0
	}
	i := 1 + int(math.Log(float64(d)/float64(latMin))/latLogGrowth)
	return min(i, latBuckets-1)
}

// latUpper is the upper bound of bucket i.
func latUpper(i int) time.Duration {
	return time.Duration(float64(latMin) * math.Pow(latGrowth, float64(i)))
}

func (h *latHist) add(d time.Duration) { h.b[latBucket(d)].Add(1) }

func (h *latHist) snapshot() []uint64 {
	s := make([]uint64, latBuckets)
	for i := range s {
		s[i] = h.b[i].Load()
	}
	return s
}

// LatQuantiles returns the q-quantiles of the requests counted between
// snapshots a and b (upper bucket bounds, so within 4% above), and how many
// there were; zero durations when there were none.
func LatQuantiles(a, b []uint64, qs ...float64) ([]time.Duration, uint64) {
	out := make([]time.Duration, len(qs))
	var n uint64
	for i := range b {
		n += b[i] - a[i]
	}
	if n == 0 {
		return out, 0
	}
	for k, q := range qs {
		rank := uint64(math.Ceil(q * float64(n)))
		rank = max(rank, 1)
		var c uint64
		for i := range b {
			c += b[i] - a[i]
			if c >= rank {
				out[k] = latUpper(i)
				break
			}
		}
	}
	return out, n
}
