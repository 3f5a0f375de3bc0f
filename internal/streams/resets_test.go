package streams

import (
	"math"
	"testing"
)

func TestResets(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		values []float64
		want   int
	}{
		{nil, 0},
		{[]float64{5}, 0},
		{[]float64{1, 2, 2, 3}, 0},
		{[]float64{3, 2}, 1},
		// The seed: two writers interleaved.
		{[]float64{29, 9, 40, 15, 40, 15}, 3},
		{[]float64{10, 9.999, 10, 0}, 2},
		{[]float64{1, nan, 0}, 0}, // a NaN is never below, nothing is below a NaN
		{[]float64{math.Inf(1), 5}, 1},
		{[]float64{-1, -2}, 1},
	}
	for _, c := range cases {
		if got := Resets(c.values); got != c.want {
			t.Errorf("Resets(%v) = %d, want %d", c.values, got, c.want)
		}
	}
	var r ResetCounter
	if r.Add(3) || !r.Add(1) || r.Add(1) || r.Resets() != 1 {
		t.Errorf("ResetCounter: %d", r.Resets())
	}
}
