package audit

import (
	"cmp"
	"math"
	"slices"

	"github.com/doubletake/doubletake/internal/streams"
)

// maxDips bounds the reset markers drawn per chart; maxOtherChains the
// chains other than the dominant one drawn (the longest).
const (
	maxDips        = 400
	maxOtherChains = 8
)

// Chart is what is drawn for one series: its stored samples, the samples
// that were resets (the dips) and the dominant chain, each thinned to a
// bounded number of points.
type Chart struct {
	Series   string
	Class    Class
	Start    int64 // ms
	End      int64 // ms
	Stored   []Sample
	Dips     []Sample
	MoreDips int // dips not drawn
	Chain    []Sample
	Others   [][]Sample // other chains, longest first
	Max      float64    // the largest finite value
}

// newChart keeps at most points stored samples (the lowest and highest of
// each time bucket, so that dips stay visible), the dips, and the dominant
// chain.
func newChart(series string, a Analysis, samples []Sample, start, end int64, points int) *Chart {
	c := &Chart{Series: series, Class: a.Class, Start: start, End: end}
	var rc streams.ResetCounter // the dips are what resets() counts
	var chain []Sample
	// The other chains to draw: the longest ones.
	others := map[int32][]Sample{}
	for len(others) < maxOtherChains {
		best := int32(-1)
		for ci, ch := range a.Split.Chains {
			if _, taken := others[int32(ci)]; taken || ci == a.Split.Dominant || ch.Samples < 2 {
				continue
			}
			if best < 0 || ch.Samples > a.Split.Chains[best].Samples {
				best = int32(ci)
			}
		}
		if best < 0 {
			break
		}
		others[best] = nil
	}
	for i, s := range samples {
		if !math.IsNaN(s.V) && !math.IsInf(s.V, 0) && s.V > c.Max {
			c.Max = s.V
		}
		if rc.Add(s.V) {
			if len(c.Dips) < maxDips {
				c.Dips = append(c.Dips, s)
			} else {
				c.MoreDips++
			}
		}
		ci := a.Split.Assign[i]
		if a.Split.Dominant >= 0 && ci == int32(a.Split.Dominant) {
			chain = append(chain, s)
		} else if o, ok := others[ci]; ok {
			others[ci] = append(o, s)
		}
	}
	c.Stored = thin(samples, start, end, points)
	c.Chain = thin(chain, start, end, points)
	for _, o := range others {
		c.Others = append(c.Others, thin(o, start, end, max(points/4, 2)))
	}
	slices.SortFunc(c.Others, func(a, b []Sample) int { return cmp.Compare(a[0].T, b[0].T) })
	return c
}

// thin keeps at most n samples: with more, the lowest and the highest of
// each of n/2 equal time buckets, in time order. NaN samples are left out.
func thin(samples []Sample, start, end int64, n int) []Sample {
	finite := 0
	for _, s := range samples {
		if !math.IsNaN(s.V) {
			finite++
		}
	}
	if finite <= n {
		out := make([]Sample, 0, finite)
		for _, s := range samples {
			if !math.IsNaN(s.V) {
				out = append(out, s)
			}
		}
		return out
	}
	buckets := max(n/2, 1)
	width := float64(end-start) / float64(buckets)
	if width <= 0 {
		width = 1
	}
	out := make([]Sample, 0, n)
	cur := -1
	var lo, hi Sample
	flush := func() {
		if cur < 0 {
			return
		}
		if lo.T == hi.T {
			out = append(out, lo)
		} else if lo.T < hi.T {
			out = append(out, lo, hi)
		} else {
			out = append(out, hi, lo)
		}
	}
	for _, s := range samples {
		if math.IsNaN(s.V) {
			continue
		}
		b := min(int(float64(s.T-start)/width), buckets-1)
		if b != cur {
			flush()
			cur, lo, hi = b, s, s
			continue
		}
		if s.V < lo.V {
			lo = s
		}
		if s.V > hi.V {
			hi = s
		}
	}
	flush()
	return out
}
