package streams

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

	judge  *judge // Policy.Auto; nil otherwise
	origin uint64 // the point's origin, during Observe
	now    int64  // the caller's clock, during Observe
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
	t := &Tracker{
		max:         p.MaxStreams,
		maxStale:    int64(p.MaxStale),
		failover:    uint64(p.FailoverAfter),
		floor:       uint64(floor),
		split:       p.Split,
		interpolate: p.Interpolate,
		index:       newIndex(),
	}
	if p.Auto {
		mj := p.MaxJudged
		if mj == 0 {
			mj = DefaultMaxJudged
		}
		t.judge = newJudge(mj, p.MaxHeldBytes, p.MaxExportTimes)
	}
	return t, nil
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
	if t.judge != nil {
		t.judge.dropStream(s.id)
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
	return t.ObserveFrom(id, 0, shape, p, now)
}

// ObserveFrom is Observe for a point whose origin (Hasher.Origin: its
// resource and scope) is known: with Policy.Auto, what one stream proves of
// a writer applies to the writer's other streams of the same origin with a
// start within PoolWindow. Origin 0 pools nothing.
func (t *Tracker) ObserveFrom(id ID, origin uint64, shape Shape, p Point, now int64) Decision {
	t.origin, t.now = origin, now
	if p.Time == 0 {
		return Decision{Writer: p.Start} // no time, no order: pass it untouched
	}
	if t.judge != nil {
		if k := t.judge.exports.observe(t.judge.identity, shape, p); k != 0 && t.journal != nil {
			t.journal.entries = append(t.journal.entries, journalEntry{export: k})
		}
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
	if t.judge != nil {
		t.judge.sweep(cutoff, budget)
	}
	return removed
}

// Expire forgets every stream whose newest point is older than MaxStale.
func (t *Tracker) Expire(now int64) int { return t.Sweep(now, int(t.used)) }
