package streams

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

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

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

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

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

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

func (e Election) String() string {
	if int(e) < len(electionNames) {
		return electionNames[e]
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

// Policy bounds and tunes a Tracker.
type Policy struct {
	// MaxStreams is the most streams tracked; points of further streams
	// pass unjudged (ReasonUnjudged).
	MaxStreams int
	// MaxStale is how long a stream is kept after its newest point, in the
	// caller's clock (the now passed to Observe).
	MaxStale time.Duration
	// FailoverAfter, when positive, is how long in point time the elected
	// writer may send nothing before the next writer is elected. Zero
	// derives it per stream: FailoverIntervals times the elected writer's
	// observed interval, at least FailoverFloor.
	FailoverAfter time.Duration
	// FailoverFloor is the least derived failover time; zero means
	// DefaultFailoverFloor.
	FailoverFloor time.Duration
	// Split keeps every writer's points as its own series (Verdict Label)
	// instead of dropping the points of writers that were not elected.
	Split bool
	// Interpolate applies the data model's overlap interpolation to
	// monotonic cumulative Sums: when a failover elects a writer whose
	// start lies before the previous writer's newest point (one process
	// started just before the other stopped), that writer's points are
	// shifted (Decision.Shift) so that its series starts where the
	// previous one ended, with no overlap: the counts both made in the
	// overlap are not counted twice.
	Interpolate bool
}

// Defaults and limits.
const (
	DefaultMaxStreams    = 100_000
	DefaultMaxStale      = 5 * time.Minute
	DefaultFailoverFloor = time.Second
	// FailoverIntervals is how many observed intervals the elected writer
	// may miss before a derived failover.
	FailoverIntervals = 3
	// MaxStreamsLimit is the largest MaxStreams accepted.
	MaxStreamsLimit = 1 << 26
)

// DefaultPolicy returns the defaults: keep one writer per stream, and
// interpolate change-overs.
func DefaultPolicy() Policy {
	return Policy{MaxStreams: DefaultMaxStreams, MaxStale: DefaultMaxStale, FailoverFloor: DefaultFailoverFloor, Interpolate: true}
}

var (
	errMaxStreams = fmt.Errorf("max_streams must be between 1 and %d", MaxStreamsLimit)
	errMaxStale   = errors.New("max_stale must be positive")
	errFailover   = errors.New("failover_after must not be negative")
	errFloor      = errors.New("failover floor must not be negative")
)

// Validate checks a Policy.
func (p Policy) Validate() error {
	var errs []error
	if p.MaxStreams < 1 || p.MaxStreams > MaxStreamsLimit {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxStreams, p.MaxStreams))
	}
	if p.MaxStale <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errMaxStale, p.MaxStale))
	}
	if p.FailoverAfter < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errFailover, p.FailoverAfter))
	}
	if p.FailoverFloor < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errFloor, p.FailoverFloor))
	}
	return errors.Join(errs...)
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
)

// Streams live in fixed pages, so that growing never copies them and the
// overhead of a growing slice stays off the bytes per stream.
const (
	pageBits = 9
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

// Tracker judges metric points stream by stream. Memory is bounded by
// Policy.MaxStreams (about 170 bytes per tracked stream: docs/benchmarks.md,
// "Metric path"), and a stream is forgotten MaxStale after its newest point. A Tracker is not
// safe for concurrent use.
type Tracker struct {
	max         int
	maxStale    int64
	failover    uint64
	floor       uint64
	split       bool
	interpolate bool

	index  index
	pages  [][]stream
	used   uint32   // slots handed out so far, live or free
	free   []uint32 // slots to reuse
	cursor uint32   // where the next Sweep looks

	gen     uint32 // version counter
	journal *Journal
	stats   Stats
}

// Stats counts what a Tracker did since it was made.
type Stats struct {
	Created  uint64 // streams started
	Expired  uint64 // streams forgotten after MaxStale
	Unjudged uint64 // points passed unjudged because the tracker was full
}

// NewTracker makes a Tracker.
func NewTracker(p Policy) (*Tracker, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	floor := p.FailoverFloor
	if floor == 0 {
		floor = DefaultFailoverFloor
	}
	return &Tracker{
		max:         p.MaxStreams,
		maxStale:    int64(p.MaxStale),
		failover:    uint64(p.FailoverAfter),
		floor:       uint64(floor),
		split:       p.Split,
		interpolate: p.Interpolate,
		index:       newIndex(),
	}, nil
}

// Len returns the number of streams tracked.
func (t *Tracker) Len() int { return t.index.n }

// Limit returns MaxStreams.
func (t *Tracker) Limit() int { return t.max }

// Stats returns the Tracker's counts.
func (t *Tracker) Stats() Stats { return t.stats }

func (t *Tracker) at(i uint32) *stream { return &t.pages[i>>pageBits][i&pageMask] }

func (t *Tracker) alloc() uint32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	i := t.used
	if int(i>>pageBits) == len(t.pages) {
		t.pages = append(t.pages, make([]stream, pageSize))
	}
	t.used++
	return i
}

func (t *Tracker) remove(i uint32, s *stream) {
	if _, pos, ok := t.index.find(&s.id, t); ok {
		t.index.remove(pos)
	}
	*s = stream{}
	t.free = append(t.free, i)
}

func (t *Tracker) nextVersion() uint32 {
	t.gen++
	return t.gen
}

// failoverAfter is the failover time for a writer whose interval is iv, and
// false while it cannot be known (no interval observed yet).
func (t *Tracker) failoverAfter(iv uint64) (uint64, bool) {
	if t.failover > 0 {
		return t.failover, true
	}
	if iv == 0 {
		return 0, false
	}
	return max(FailoverIntervals*iv, t.floor), true
}

// Observe judges one point of the stream id (whose metric has shape) and
// updates the stream. now is the caller's clock, used only to forget quiet
// streams (Sweep); every other rule works in point time, so that replaying
// stored points gives the same decisions.
func (t *Tracker) Observe(id ID, shape Shape, p Point, now int64) Decision {
	if p.Time == 0 {
		return Decision{Writer: p.Start} // no time, no order: pass it untouched
	}
	i, _, ok := t.index.find(&id, t)
	if !ok {
		if t.index.n >= t.max {
			t.stats.Unjudged++
			return Decision{Reason: ReasonUnjudged, Writer: p.Start}
		}
		i = t.alloc()
		s := t.at(i)
		*s = stream{id: id, shape: shape, flags: flagLive, seen: now, version: t.nextVersion()}
		if shape.Kind() != KindGauge && !shape.Cumulative() {
			s.cur = newDeltaWriter(p)
		} else {
			s.cur = newWriter(p)
		}
		t.index.insert(&id, i)
		t.stats.Created++
		if t.journal != nil {
			t.journal.entries = append(t.journal.entries, journalEntry{idx: i, after: s.version, created: true, before: stream{id: id}})
		}
		return Decision{Writer: p.Start, Elected: p.Start}
	}
	s := t.at(i)
	v := t.nextVersion()
	if t.journal != nil {
		t.journal.entries = append(t.journal.entries, journalEntry{idx: i, after: v, before: *s})
	}
	s.version = v
	if now > s.seen {
		s.seen = now
	}
	switch {
	case s.shape.Kind() == KindGauge:
		return t.gauge(s, p)
	case s.shape.Cumulative():
		return t.cumulative(s, p)
	default:
		return t.delta(s, p)
	}
}

func (t *Tracker) loser(d Decision) Decision {
	d.Reason = ReasonOverlap
	if t.split {
		d.Verdict = Label
	} else {
		d.Verdict = Drop
	}
	return d
}

func dropped(d Decision, r Reason) Decision {
	d.Verdict, d.Reason = Drop, r
	return d
}

// cumulative judges a point of a cumulative stream. Writers are told apart
// by start time; the elected writer's points pass, as do the points of a
// writer that takes over; the others are losers.
func (t *Tracker) cumulative(s *stream, p Point) Decision {
	c, a := &s.cur, &s.alt
	d := Decision{Writer: p.Start, Elected: c.start}
	// Values are compared within one start only; an unknown (zero) start
	// cannot tell writers apart, so a decrease there is taken for a reset.
	monotonic := s.shape.Monotonic() && p.Start != 0
	if p.Start == c.start {
		if r := c.order(p, monotonic); r != ReasonNone {
			return dropped(d, r)
		}
		c.accept(p)
		if s.flags&flagShift != 0 {
			d.Shift, d.Shifted = s.shift, true
		}
		return d
	}
	known := s.flags&flagAlt != 0 && a.start == p.Start
	if known {
		// The runner-up's own order. Its values must not decrease only where
		// its points are forwarded (split).
		if r := a.order(p, monotonic && t.split); r != ReasonNone {
			return dropped(d, r)
		}
	}
	if p.Time > c.time {
		gap := p.Time - c.time
		// How long the elected writer is given: its own interval, or, while
		// it has sent a single point, the other writer's.
		iv := c.interval
		if iv == 0 && known {
			iv = a.gapInterval(p.Time)
		} else if iv == 0 && s.flags&flagAlt != 0 {
			iv = a.interval
		}
		fo, foKnown := t.failoverAfter(iv)
		switch {
		case p.Start >= c.time && (!t.split || iv > 0 && gap >= iv):
			// Started at or after the elected writer's newest point: its
			// counter holds nothing the elected writer has reported, so it
			// is a restart, elected at once. No wait for the elected writer
			// to look quiet: a restart's first export may come sooner after
			// that writer's last point than one of its intervals (a
			// scheduler's delays inflate the observed interval; a new
			// process may export at once), and waiting would drop it. A
			// second writer misjudged so is taken back by earlier_start at
			// the elected writer's next point. With Split a point judged
			// too early is labelled, not lost, and moving a live writer out
			// of the unlabelled series would count it twice: there the
			// elected writer must have been quiet for its interval.
			return t.elect(s, p, known, ElectionRestart, d)
		case !t.split && p.Start != 0 && p.Start < c.start:
			// A live writer whose counter started earlier: the more
			// complete one, elected deterministically.
			return t.elect(s, p, known, ElectionEarlierStart, d)
		case !t.split && foKnown && gap >= fo:
			return t.elect(s, p, known, ElectionFailover, d)
		}
	}
	if !t.split && p.Time <= c.start {
		// It lies wholly before the elected writer started (the last
		// points of a life a restart ended, arriving late): not a second
		// writer, only too late to join the series.
		return dropped(d, ReasonOutOfOrder)
	}
	switch {
	case known:
		a.accept(p)
	case s.flags&flagAlt == 0 || p.Start < a.start || t.quiet(a, p.Time):
		// Track the earliest-started live writer as the runner-up.
		s.alt = newWriter(p)
		s.flags |= flagAlt
	}
	return t.loser(d)
}

// quiet says whether w has sent nothing for its failover time before t.
func (t *Tracker) quiet(w *writer, t0 uint64) bool {
	fo, ok := t.failoverAfter(w.interval)
	return ok && t0 > w.time && t0-w.time >= fo
}

// elect makes the point's writer the elected one; the old one becomes the
// runner-up, so that it is recognised if it turns out to be alive.
func (t *Tracker) elect(s *stream, p Point, known bool, e Election, d Decision) Decision {
	old := s.cur
	if known {
		s.cur = s.alt
		s.cur.accept(p)
	} else {
		s.cur = newWriter(p)
	}
	s.alt = old
	s.flags |= flagAlt
	s.flags &^= flagShift
	d.Election = e
	if sh, ok := t.changeOver(s, &old, p, e); ok {
		s.shift = sh
		s.flags |= flagShift
		d.Shift, d.Shifted = sh, true
	}
	return d
}

// changeOver returns the shift of a writer taking over from old at p, when
// the data model's overlap interpolation applies: a failover (old went
// quiet) to a writer of a monotonic cumulative Sum that started before
// old's newest point. The count the new writer made in that overlap is
// estimated by linear interpolation over (p.Start, p.Time], as if its rate
// had been constant: p.Value × (old.time − p.Start) / (p.Time − p.Start).
func (t *Tracker) changeOver(s *stream, old *writer, p Point, e Election) (Shift, bool) {
	if !t.interpolate || e != ElectionFailover || s.shape.Kind() != KindSum || !s.shape.Monotonic() ||
		p.NoValue || p.Start == 0 || p.Start >= old.time || p.Time <= old.time ||
		math.IsNaN(p.Value) || math.IsInf(p.Value, 0) || p.Value < 0 {
		return Shift{}, false
	}
	overlap := float64(old.time - p.Start)
	span := float64(p.Time - p.Start)
	return Shift{Start: old.time, Offset: p.Value * (overlap / span)}, true
}

// delta judges a point of a delta stream. An unbroken run has each start
// equal to the previous point's time; a point that starts after the run's
// newest time is a gap: a new run (a restart) that takes over. A point that
// overlaps the run's newest interval is a second writer's, unless it lies
// wholly before that interval (out of order).
func (t *Tracker) delta(s *stream, p Point) Decision {
	c, a := &s.cur, &s.alt
	d := Decision{Writer: c.start, Elected: c.start}
	switch {
	case p.Time == c.time && p.Start == c.deltaStart() && p.Fingerprint == c.fp:
		return dropped(d, ReasonDuplicate)
	case p.Start == c.time && p.Time > c.time:
		c.acceptDelta(p)
		return d
	case p.Start > c.time:
		old := s.cur
		if s.flags&flagAlt != 0 && p.Start == a.time {
			// The runner-up run goes on after the elected one stopped.
			s.cur = s.alt
			s.cur.acceptDelta(p)
			d.Election = ElectionFailover
		} else {
			s.cur = newDeltaWriter(p)
			d.Election = ElectionRestart
		}
		s.alt = old
		s.flags |= flagAlt
		d.Writer = s.cur.start
		return d
	}
	if s.flags&flagAlt != 0 {
		switch {
		case p.Time == a.time && p.Start == a.deltaStart() && p.Fingerprint == a.fp:
			d.Writer = a.start
			return dropped(d, ReasonDuplicate)
		case p.Start == a.time && p.Time > a.time:
			a.acceptDelta(p)
			d.Writer = a.start
			return t.loser(d)
		}
	}
	if p.Time <= c.deltaStart() {
		return dropped(d, ReasonOutOfOrder)
	}
	s.alt = newDeltaWriter(p)
	s.flags |= flagAlt
	d.Writer = p.Start
	return t.loser(d)
}

// gauge judges a gauge point. Gauges have no writer identity: an exact
// repeat is dropped, a point at or before the newest one cannot join the
// series (a different value at the same time is a second writer for
// certain), and a value sooner than half the observed interval is a
// suspected second writer, passed.
func (t *Tracker) gauge(s *stream, p Point) Decision {
	c := &s.cur
	d := Decision{Writer: p.Start, Elected: c.start}
	switch {
	case p.Time == c.time && p.Fingerprint == c.fp:
		return dropped(d, ReasonDuplicate)
	case p.Time == c.time:
		return dropped(d, ReasonOverlap)
	case p.Time < c.time:
		return dropped(d, ReasonOutOfOrder)
	}
	if c.interval > 0 && p.Time-c.time < c.interval/2 {
		d.Reason = ReasonSuspect
	}
	c.accept(p)
	return d
}

// Sweep forgets streams whose newest point is older than MaxStale at now,
// looking at up to budget slots from where the previous Sweep stopped, so
// that the cost is spread over requests. It returns the streams forgotten.
func (t *Tracker) Sweep(now int64, budget int) int {
	if t.used == 0 {
		return 0
	}
	cutoff := now - t.maxStale
	removed := 0
	for n := 0; n < budget && n < int(t.used); n++ {
		if t.cursor >= t.used {
			t.cursor = 0
		}
		s := t.at(t.cursor)
		if s.flags&flagLive != 0 && s.seen < cutoff {
			t.remove(t.cursor, s)
			removed++
		}
		t.cursor++
	}
	t.stats.Expired += uint64(removed)
	return removed
}

// Expire forgets every stream whose newest point is older than MaxStale.
func (t *Tracker) Expire(now int64) int { return t.Sweep(now, int(t.used)) }

// Journal records what Observe changed, so that Undo can take it back:
// the caller does so when the data it let through could not be delivered,
// so that the sender's retry is judged afresh instead of as a repeat.
type Journal struct {
	entries []journalEntry
}

type journalEntry struct {
	idx     uint32
	after   uint32 // the stream's version after the change
	created bool
	before  stream
}

// Len returns the number of changes recorded.
func (j *Journal) Len() int { return len(j.entries) }

// Reset empties the journal, keeping its memory.
func (j *Journal) Reset() { j.entries = j.entries[:0] }

// Record makes Observe record its changes into j, until Record(nil).
func (t *Tracker) Record(j *Journal) { t.journal = j }

// Undo takes back the changes recorded in j, newest first, and empties j.
// A stream changed since by someone else (another request) keeps that
// change: it and the stream's older changes in j are left alone. It returns
// the number of changes taken back.
func (t *Tracker) Undo(j *Journal) int {
	n := 0
	for k := len(j.entries) - 1; k >= 0; k-- {
		e := &j.entries[k]
		if e.idx >= t.used {
			continue
		}
		s := t.at(e.idx)
		if s.flags&flagLive == 0 || s.id != e.before.id || s.version != e.after {
			continue
		}
		if e.created {
			t.remove(e.idx, s)
			t.stats.Created--
		} else {
			*s = e.before
		}
		n++
	}
	j.Reset()
	return n
}
