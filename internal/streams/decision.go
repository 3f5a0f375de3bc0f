package streams

import "strconv"

// Verdict is what a Tracker says to do with a point.
type Verdict uint8

const (
	// Pass forwards the point as it is.
	Pass Verdict = iota
	// Label forwards the point as its writer's own series: the caller adds
	// an attribute derived from Decision.Writer (see WriterName). Only with
	// Policy.Split.
	Label
	// Drop drops the point (or, in a dry run, counts it only).
	Drop
)

var verdictNames = [...]string{"pass", "label", "drop"}

func (v Verdict) String() string { return nameOf(verdictNames[:], v) }

// Reason says why a point broke the single-writer rule.
type Reason uint8

const (
	// ReasonNone: the point is its stream's next point.
	ReasonNone Reason = iota
	// ReasonDuplicate: an exact repeat of its writer's newest point (same
	// start, time and value): a re-sent batch. Dropped.
	ReasonDuplicate
	// ReasonOverlap: a point of a writer that is not the elected one, or a
	// delta interval that overlaps the previous one. Dropped, or labelled
	// with Policy.Split.
	ReasonOverlap
	// ReasonOutOfOrder: a point at or before the newest time of its writer
	// (or, for deltas and gauges, of the stream). Dropped.
	ReasonOutOfOrder
	// ReasonDecrease: a monotonic value below the last accepted value for the
	// same start time: writers that share a start but diverge. Dropped.
	ReasonDecrease
	// ReasonSuspect: a gauge value sooner after the previous one than the
	// stream's observed interval allows: a suspected second writer. Passed.
	ReasonSuspect
	// ReasonUnjudged: the point of a new stream while the Tracker holds
	// MaxStreams streams. Passed.
	ReasonUnjudged

	// NumReasons is the number of reasons, for arrays indexed by Reason.
	NumReasons = iota
)

var reasonNames = [...]string{"", "duplicate", "overlap", "out_of_order", "decrease", "suspected_writer", "unjudged"}

func (r Reason) String() string { return nameOf(reasonNames[:], r) }

// Election says why a stream's elected writer changed with a point.
type Election uint8

const (
	// ElectionNone: the elected writer did not change (a stream's first
	// writer is elected silently).
	ElectionNone Election = iota
	// ElectionEarlierStart: a live writer with an earlier start time (the
	// more complete counter) took over. Not with Policy.Split.
	ElectionEarlierStart
	// ElectionRestart: a writer that started at or after the elected
	// writer's newest point took over at its first point newer than that
	// one (with Policy.Split, once the elected writer was quiet for its
	// interval); for deltas, a run that starts after a gap.
	ElectionRestart
	// ElectionFailover: the elected writer sent nothing for the failover
	// time; the next writer took over. Not with Policy.Split.
	ElectionFailover

	// NumElections is the number of election kinds.
	NumElections = iota
)

var electionNames = [...]string{"", "earlier_start", "restart", "failover"}

func (e Election) String() string { return nameOf(electionNames[:], e) }

// nameOf is names[i], or "unknown" past its end.
func nameOf[T ~uint8](names []string, i T) string {
	if int(i) < len(names) {
		return names[i]
	}
	return "unknown"
}

// Decision is the Tracker's judgement of one point.
type Decision struct {
	Verdict  Verdict
	Reason   Reason
	Election Election
	// Writer is the point's writer: its start time (for deltas, the start
	// of its unbroken run). Label derives the split attribute from it.
	Writer uint64
	// Elected is the start of the writer that was elected before this
	// point (for warnings that name both writers).
	Elected uint64
	// Shift, when Shifted, is how to write a point of a monotonic
	// cumulative Sum that passes after an interpolated change-over (see
	// Policy.Interpolate): with start time Shift.Start, its value less
	// Shift.Offset.
	Shift   Shift
	Shifted bool
	// Class is, with Policy.Auto, the class of the point's writer when it
	// is not the elected one (ClassUndecided otherwise).
	Class Class
	// Sharer, when above 0, is the point's chain of a start shared by
	// several writers (shared.go): Label names it SharerName(Writer,
	// Sharer).
	Sharer uint8
	// Hold: the point is dropped as an undecided writer's, and may be held
	// until the writer is decided (Tracker.Hold; Policy.MaxHeldBytes).
	Hold bool
	// Restart: the point is a held restart's (restart.go): dropped while
	// the elected writer is not yet overdue, and to be held unlabelled
	// (Tracker.HoldRestart) besides Hold, so that it is sent as the
	// stream's own if its writer turns out a restart.
	Restart bool
}

// Shift is the rewrite of a writer's points after an interpolated
// change-over: the start moves to the previous writer's newest time, and
// the count the new writer had made before it (estimated by linear
// interpolation over its first passing point) is taken off every value.
type Shift struct {
	Start  uint64
	Offset float64
}

// String renders a decision as "verdict[ reason][ elect:election]", as the
// golden tests write it.
func (d Decision) String() string {
	s := d.Verdict.String()
	if d.Reason != ReasonNone {
		s += " " + d.Reason.String()
	}
	if d.Election != ElectionNone {
		s += " elect:" + d.Election.String()
	}
	return s
}

// WriterName is the split attribute's value for a writer: its start time
// as 16 hex digits. It is stable (the same writer always gets the same name)
// and unique among a stream's writers, which are told apart by start time.
func WriterName(start uint64) string {
	var b [16]byte
	s := strconv.AppendUint(b[:0], start, 16)
	const zeros = "0000000000000000"
	return zeros[:16-len(s)] + string(s)
}
