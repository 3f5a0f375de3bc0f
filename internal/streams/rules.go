package streams

import "math"

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
		r := c.order(p, monotonic)
		if s.flags&flagShared != 0 {
			// Writers that share a start (shared.go).
			if sh := t.sharedOf(s); sh != nil && (sh.iv != 0 || t.learn(s, sh, p, r)) {
				return t.shared(s, sh, p, d)
			}
		} else if t.judge != nil && monotonic && r != ReasonNone && r != ReasonDuplicate && Judged(s.shape) && t.sharedWriter(s, p, r) {
			t.learn(s, t.judge.shared[s.id], p, r)
		}
		if r != ReasonNone {
			return dropped(d, r)
		}
		c.accept(p)
		if s.flags&flagShift != 0 {
			d.Shift, d.Shifted = s.shift, true
		}
		if t.judge != nil && s.flags&flagAlt != 0 {
			t.judge.elected(s, p, Judged(s.shape))
		}
		return d
	}
	// Policy.Auto: a peer keeps its own series (labelled, never elected);
	// a copy or an undecided writer is judged as keep_one judges it, but
	// an undecided one does not take the stream over from a live writer
	// by its earlier start (it may be a peer, and a writer moved from the
	// unlabelled series into a labelled one is counted twice).
	takeOver, hold := true, false
	var cls Class
	var own Reason // the point against its writer's own newest, with Auto
	if t.judge != nil && p.Start != 0 {
		var refused bool
		var r Reason
		cls, r, refused = t.judge.other(s, t.origin, p, t.now, t.journal)
		own = r
		hold = cls == ClassUndecided && !refused && r == ReasonNone && t.judge.holding()
		d.Class = cls
		if cls == ClassPeer {
			s.flags |= flagAlt
			if r != ReasonNone {
				return dropped(d, r)
			}
			d.Verdict, d.Reason = Label, ReasonOverlap
			return d
		}
		takeOver = refused || cls == ClassCopy ||
			s.flags&(flagAlt|flagWasElected) == flagAlt|flagWasElected && a.start == p.Start
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
		case p.Start >= c.time && !t.split && t.heldRestart(s, p, gap, cls, own, hold):
			// A restart, or a second writer with fresh state that exported
			// before the elected writer's next point: held until either the
			// elected writer sends again or it is overdue (restart.go).
			if own != ReasonNone {
				return dropped(d, own)
			}
			d.Restart = hold
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
		case !t.split && p.Start != 0 && p.Start < c.start && takeOver:
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
		s.flags &^= flagWasElected
	}
	d = t.loser(d)
	d.Hold = hold && !t.split
	return d
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
	s.flags |= flagAlt | flagWasElected | flagRunSince
	s.flags &^= flagShift
	d.Election = e
	if t.judge != nil {
		t.judge.keepRestart(s.id, s.cur.start, &old) // restart.go
		t.judge.drop(s.id, s.cur.start)
	}
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
		if t.judge != nil && JudgedDelta(s.shape) {
			// Two chains that ended in one millisecond and count alike
			// send the same point: the second is the other chain's
			// (deltaCollide).
			if dd, ok := t.deltaCollide(s, p, d); ok {
				return dd
			}
		}
		return dropped(d, ReasonDuplicate)
	case p.Start == c.time && p.Time > c.time:
		c.acceptDelta(p)
		if t.judge != nil && s.flags&flagAlt != 0 && JudgedDelta(s.shape) {
			t.judge.deltaElected(s, p, across{})
		}
		return d
	}
	auto := t.judge != nil && JudgedDelta(s.shape) && p.Start != 0
	if auto {
		if dd, ok := t.deltaAuto(s, p, d); ok {
			return dd
		}
	}
	switch {
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
		s.flags |= flagAlt | flagRunSince
		if auto {
			s.flags |= flagWasElected // it may take the stream back (deltaAuto)
		}
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
// suspected second writer, passed, from the second such gap on: one short
// gap is what a single writer's final flush at shutdown makes (the SDK
// exports once more as it ends, whenever that is). A point whose writer
// started after the stream's newest point is a restart, not a concurrent
// writer: it forgets an earlier short gap.
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
	if p.Start > c.time {
		s.flags &^= flagShortGap
	}
	if c.interval > 0 && p.Time-c.time < c.interval/2 {
		if s.flags&flagShortGap != 0 {
			d.Reason = ReasonSuspect
		}
		s.flags |= flagShortGap
	}
	c.accept(p)
	return d
}
