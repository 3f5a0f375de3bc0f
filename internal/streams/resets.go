package streams

// Resets counts counter resets in a series of samples in time order exactly
// as PromQL's resets() does for float samples: every sample below the one
// before it is a reset, whatever its size. A NaN is never below anything,
// and nothing is below a NaN.
//
// (Prometheus releases newer than 2.x also count a reset where a sample's
// created/start timestamp moves past the previous sample; Resets is the
// classic, value-only rule that every Prometheus version applies.)
func Resets(values []float64) int {
	var r ResetCounter
	for _, v := range values {
		r.Add(v)
	}
	return r.Resets()
}

// ResetCounter counts resets one sample at a time, for series too long to
// hold: the zero value is ready to use.
type ResetCounter struct {
	prev    float64
	n       int
	started bool
}

// Add takes the next sample and reports whether it was a reset.
func (r *ResetCounter) Add(v float64) bool {
	reset := r.started && v < r.prev
	if reset {
		r.n++
	}
	r.prev, r.started = v, true
	return reset
}

// Resets returns the resets counted so far.
func (r *ResetCounter) Resets() int { return r.n }
