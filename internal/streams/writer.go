package streams

import "math"

// writer is what the Tracker remembers of one writer of a stream.
type writer struct {
	// start is the writer's identity: its StartTimeUnixNano (deltas: the
	// start of its unbroken run).
	start uint64
	// time is the TimeUnixNano of its newest point.
	time uint64
	// value and sum are its newest monotone values (cumulative) or value
	// (gauges); for deltas, sum holds the newest point's start (deltaStart).
	value, sum float64
	// fp fingerprints its newest point's value.
	fp uint64
	// interval is its observed interval in point time: a decaying maximum
	// of the gaps between its consecutive points (it rises to a longer gap
	// at once and falls by an eighth of the difference per shorter gap).
	interval uint64
}

func newWriter(p Point) writer {
	w := writer{start: p.Start, time: p.Time, fp: p.Fingerprint, value: p.Value, sum: math.NaN()}
	if p.HasSum {
		w.sum = p.Sum
	}
	return w
}

// gapInterval is what w.interval becomes after a point at t.
func (w *writer) gapInterval(t uint64) uint64 {
	if w.time == 0 || t <= w.time {
		return w.interval
	}
	g := t - w.time
	if g >= w.interval {
		return g
	}
	return w.interval - (w.interval-g)/8
}

func (w *writer) accept(p Point) {
	w.interval = w.gapInterval(p.Time)
	w.time = p.Time
	w.fp = p.Fingerprint
	if p.NoValue {
		return
	}
	w.value = p.Value
	if p.HasSum {
		w.sum = p.Sum
	} else {
		w.sum = math.NaN()
	}
}

// order checks a point of this writer (same start) against its newest one.
func (w *writer) order(p Point, monotonic bool) Reason {
	switch {
	case p.Time == w.time && p.Fingerprint == w.fp:
		return ReasonDuplicate
	case p.Time <= w.time:
		return ReasonOutOfOrder
	case monotonic && !p.NoValue && (p.Value < w.value || p.HasSum && p.Sum < w.sum):
		// NaN compares false: a NaN neither is nor hides a decrease, as in
		// PromQL's resets().
		return ReasonDecrease
	}
	return ReasonNone
}

func (w *writer) deltaStart() uint64 { return math.Float64bits(w.sum) }

func newDeltaWriter(p Point) writer {
	return writer{start: p.Start, time: p.Time, fp: p.Fingerprint, sum: math.Float64frombits(p.Start)}
}

func (w *writer) acceptDelta(p Point) {
	w.interval = w.gapInterval(p.Time)
	w.time = p.Time
	w.fp = p.Fingerprint
	w.sum = math.Float64frombits(p.Start)
}

// stream is one tracked stream: 144 bytes.
type stream struct {
	id      ID
	cur     writer // the elected writer (deltas: the current run)
	alt     writer // the most relevant other writer, when flagAlt
	shift   Shift  // cur's points' rewrite, when flagShift
	seen    int64  // the caller's clock at the newest point
	version uint32 // changes with every Observe; guards Undo
	shape   Shape
	flags   uint8
}

const (
	flagLive uint8 = 1 << iota
	flagAlt
	flagShift // cur was elected by an interpolated change-over
	// flagWasElected: alt was the elected writer until an election (it may
	// take the stream back under Policy.Auto: a misjudged restart).
	flagWasElected
	// flagShared: cur's start is shared by several writers, split into
	// chains (shared.go).
	flagShared
	// flagShortGap: a gauge point came sooner than half the observed
	// interval (gauge, rules.go); the next such gap is a suspected writer.
	flagShortGap
	// flagRunSince: cur is not the stream's first run (an election since
	// its first point, or a stream restored from a snapshot): a delta
	// point before cur's run start may be an earlier run's, passed then
	// (deltaAuto).
	flagRunSince
	// flagSparse: a delta chain of the stream went on across intervals
	// its writer sent nothing for (delta_gap.go): its writers export no
	// point for an interval without measurements, so a quiet elected
	// chain is no evidence that it stopped (the quiet rule is off).
	flagSparse
)
