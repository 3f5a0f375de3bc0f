package streams

import (
	"math"
	"time"
)

// judge is a Tracker's classifier under Policy.Auto: a Pair for every
// (stream, second writer) under judgement, and a pooled class for every
// writer, keyed by its origin (resource and scope) and start time (within
// PoolWindow), so
// that what one stream proves applies to the writer's other streams.
// Both are bounded by Policy.MaxJudged; at the limit new ones are refused
// (counted) and their points are judged as keep_one judges them.
type judge struct {
	max      int
	pairs    []judged
	free     []uint32
	byKey    map[pairKey]uint32 // slot of the pair
	byStream map[ID]uint32      // first slot of the stream's pairs, plus one
	writers  map[writerKey]pooled
	shared   map[ID]*sharedStart // streams whose elected start is shared (shared.go)
	cursor   uint32
	lastPass int64 // the cutoff of the last pass over the writers
	// anchor is the pooled writer of the first second writer's point met
	// in the current ScopeMetrics, while anchored; scoped: the caller
	// marks ScopeMetrics (Tracker.NewScope), so anchoring applies.
	anchor           writerKey
	anchored, scoped bool
	counts           [NumClasses]int // pooled writers by class
	stats            JudgeStats

	// Held points (held.go): the pairs that hold one, their bytes, and
	// whether a class was decided since the last TakeReleased.
	maxHeld   int
	heldBytes int
	holders   []uint32
	scan      bool
	// Held restarts (restart.go): the pairs that hold one, and the points
	// to send as their streams' own.
	restarts []uint32
	out      []outPoint

	// The exports seen (exports.go), and the identity of the points
	// observed now (Tracker.NewScope).
	exports  exportTimes
	identity uint64
}

// JudgeStats counts what the classifier did.
type JudgeStats struct {
	Pairs   int    // (stream, writer) pairs under judgement
	Writers int    // writers under judgement (pooled)
	Refused uint64 // pairs or writers not judged: MaxJudged reached
	Expired uint64 // pairs forgotten: their writer sent nothing for MaxStale
	Quiet   uint64 // pairs decided peers by the quiet rule
	// Continued counts delta chains found to be another chain's next
	// points, arrived before the point they follow (delta_auto.go,
	// continued).
	Continued uint64
	// AcrossGap counts delta points that went on from their chain after
	// intervals it sent nothing for (delta_gap.go); EmptyIntervals, those
	// of them across intervals known to have been empty, their exports
	// seen (exports.go).
	AcrossGap, EmptyIntervals uint64
	// ExportTimes is how many exports are remembered now (at most
	// MaxExportTimes); ExportTimesForgotten, how many were forgotten for
	// newer ones.
	ExportTimes          int
	ExportTimesForgotten uint64
	// Shared starts (shared.go): streams split since start, points that
	// could not be split, and streams split now.
	SharedSplit, SharedUnsplit uint64
	Shared                     int
	Decided                    [NumClasses]uint64
	ByClass                    [NumClasses]int // writers under judgement by class
	Limit                      int
	Streams                    int // streams with at least one pair
	// Held counts what became of the held points (held.go), by outcome;
	// HeldPoints and HeldBytes are what is held now.
	Held       [NumHeldOutcomes]uint64
	HeldPoints int
	HeldBytes  int
	// Delta counts the later chains of delta streams judged now
	// (delta_auto.go), by class with their pooled writer's: copies
	// dropped, peers kept as their own series, undecided ones held. The
	// counts verify and audit give (writer_rules), from the same pairs.
	Delta [NumClasses]int
}

type pairKey struct {
	id    ID
	other uint64
}

// writerKey is a pooled writer: its origin and its start time in
// PoolWindow buckets (the record holds the start it was made with).
type writerKey struct{ origin, start uint64 }

// PoolWindow is how close two start times of one origin must be to be one
// writer's: SDKs stamp a start per instrument (the Go SDK's microseconds
// apart, the JS SDK's milliseconds). Processes that start closer than this
// (pre-fork workers forked together) are pooled as one writer; that is
// harmless among peers (all are peers), and wrong only for a second reader
// joined within PoolWindow of another process's start (docs/metrics.md).
const PoolWindow = uint64(10 * time.Millisecond)

// resolve returns the key of the pooled writer that a start of origin
// belongs to: the one whose start is within PoolWindow, else a new one's.
func (j *judge) resolve(origin, start uint64) writerKey {
	b := start / PoolWindow
	for _, d := range [3]int64{0, -1, 1} {
		k := writerKey{origin, b + uint64(d)}
		if w, ok := j.writers[k]; ok && max(w.start, start)-min(w.start, start) <= PoolWindow {
			return k
		}
	}
	return writerKey{origin, b}
}

// pooled is a writer's class over its streams: a peer once any of its
// pairs is (a crossing is a proof), a copy once any is and none is a peer.
type pooled struct {
	start   uint64 // the start it was made with
	class   Class
	streams uint32 // pairs that refer to it
	seen    int64
}

// ownPoint is a second writer's newest point: time, value, sum (NaN:
// none) and fingerprint; the elected writer's start when it came (ref),
// and the writer's observed interval (iv, as writer.interval; 0 while it
// has sent one point), for the quiet rule.
type ownPoint struct {
	time       uint64
	value, sum float64
	fp         uint64
	ref, iv    uint64
	conn       uint64 // the connection a delta chain's newest point came on (Point.Conn; 0: not known)
}

// undoOwn takes back a second writer's newest point set by a request that
// could not be delivered, unless a later one replaced it since: the
// sender's retry of a labelled point then passes again.
func (j *judge) undoOwn(k pairKey, before, after ownPoint) bool {
	i, ok := j.byKey[k]
	if !ok {
		return false
	}
	jp := &j.pairs[i]
	if jp.own.time != after.time || jp.own.fp != after.fp {
		return false
	}
	jp.own = before
	return true
}

// judged is one second writer of one stream.
type judged struct {
	Pair
	id     ID
	ref    uint64 // the elected writer the evidence is against
	other  uint64 // this writer's start
	origin uint64
	wk     writerKey // its pooled writer (origin 0: none)
	next   uint32    // the stream's next pair, plus one
	seen   int64     // the caller's clock at this writer's newest point
	skip   uint8     // points since the last fed, while a copy (CopySample)
	own    ownPoint  // this writer's newest point, for its own order while it is labelled
	live   bool
	late   bool // a delta chain's first interval, late: pooled once it goes on (deltaAuto)
	held   held // its newest dropped point, while undecided (held.go)
	// restart: its points held unlabelled while it looks like a restart
	// of the stream's elected writer (restart.go); nil otherwise.
	restart *pendingRestart
	// chains: a delta stream's second chain (delta_auto.go); nil for
	// cumulative writers.
	chains *deltaChains
}

func newJudge(max, maxHeld, maxExports int) *judge {
	return &judge{
		max: max, maxHeld: maxHeld, byKey: map[pairKey]uint32{}, byStream: map[ID]uint32{}, writers: map[writerKey]pooled{},
		shared: map[ID]*sharedStart{}, exports: exportTimes{max: maxExports},
	}
}

func (j *judge) setClass(w *pooled, c Class) {
	if c <= w.class {
		return
	}
	j.scan = true
	j.counts[w.class]--
	j.counts[c]++
	j.stats.Decided[c]++
	w.class = c
}

// pool returns the pooled record of a writer, made if there is room.
func (j *judge) pool(k writerKey, start uint64, now int64) (pooled, bool) {
	w, ok := j.writers[k]
	if !ok {
		if len(j.writers) >= j.max {
			return pooled{}, false
		}
		j.counts[ClassUndecided]++
		w.start = start
	}
	if !ok || now-w.seen > int64(time.Second) { // seen matters to sweep only: coarse
		w.seen = max(w.seen, now)
		j.writers[k] = w
	}
	return w, true
}

// seed feeds the elected writer's newest point (value and sum; no
// buckets) to a pair that has none of it.
func seed(jp *judged, s *stream) {
	c := &s.cur
	if c.time == 0 || c.start == 0 {
		return
	}
	pt := Point{Start: c.start, Time: c.time, Value: c.value}
	if !math.IsNaN(c.sum) {
		pt.Sum, pt.HasSum = c.sum, true
	}
	jp.Add(s.shape, pt)
}

// rebase points a pair at the stream's elected writer, forgetting evidence
// gathered against another (its class stays).
func rebase(jp *judged, s *stream) {
	if jp.ref == s.cur.start {
		return
	}
	cls, decided := jp.class, jp.decided
	jp.Pair = Pair{}
	jp.class, jp.decided = cls, decided
	jp.ref = s.cur.start
	jp.Add(s.shape, Point{Start: jp.other, Time: jp.own.time, Value: jp.own.value, Sum: jp.own.sum, HasSum: !math.IsNaN(jp.own.sum)})
	seed(jp, s)
}

// other judges a point of a writer that is not the stream's elected one:
// its class, and a reason when the point breaks its own order (which
// matters while it is labelled). refused: there was no room to judge it.
func (j *judge) other(s *stream, origin uint64, p Point, now int64, journal *Journal) (cls Class, r Reason, refused bool) {
	key := pairKey{s.id, p.Start}
	i, ok := j.byKey[key]
	var wk writerKey
	switch {
	case ok:
		wk = j.pairs[i].wk
	case origin != 0 && j.anchored && j.anchor.origin == origin:
		// One export's points are one writer's: a new second writer met
		// in the ScopeMetrics of another is that writer's other
		// instrument (SDKs stamp a start per instrument, and under load
		// further apart than PoolWindow).
		wk = j.anchor
	case origin != 0:
		wk = j.resolve(origin, p.Start)
	}
	var w pooled
	pooledOK := false
	// 0: no origin known, no pooling; a peer's pair is final, and its
	// writer was told when it became one.
	if wk.origin != 0 && (!ok || j.pairs[i].class != ClassPeer) {
		w, pooledOK = j.pool(wk, p.Start, now)
	}
	if wk.origin != 0 && j.scoped && !j.anchored {
		j.anchor, j.anchored = wk, true
	}
	if !ok {
		if len(j.byKey) >= j.max {
			j.stats.Refused++
			if pooledOK {
				j.writers[wk] = w
			}
			return w.class, ReasonNone, w.class == ClassUndecided
		}
		i = j.alloc()
		jp := &j.pairs[i]
		*jp = judged{id: s.id, ref: s.cur.start, other: p.Start, origin: origin, wk: wk, live: true, own: ownPoint{sum: math.NaN()}}
		if !pooledOK {
			jp.wk = writerKey{}
		}
		if head, ok := j.byStream[s.id]; ok {
			jp.next = head
		}
		j.byStream[s.id] = i + 1
		j.byKey[key] = i
		seed(jp, s)
		if pooledOK {
			w.streams++
		}
	}
	jp := &j.pairs[i]
	if now > jp.seen {
		jp.seen = now
	}
	rebase(jp, s)
	if jp.own.time != 0 {
		switch {
		case p.Time == jp.own.time && p.Fingerprint == jp.own.fp:
			r = ReasonDuplicate
		case p.Time <= jp.own.time:
			r = ReasonOutOfOrder
		case s.shape.Monotonic() && !p.NoValue && (p.Value < jp.own.value || p.HasSum && p.Sum < jp.own.sum):
			r = ReasonDecrease
		}
	}
	before := jp.class
	if r == ReasonNone {
		old := jp.own
		if old.time != 0 {
			w := writer{time: old.time, interval: old.iv}
			jp.own.iv = w.gapInterval(p.Time)
		}
		jp.own.ref = s.cur.start
		jp.own.time, jp.own.fp = p.Time, p.Fingerprint
		if !p.NoValue {
			jp.own.value, jp.own.sum = p.Value, math.NaN()
			if p.HasSum {
				jp.own.sum = p.Sum
			}
		}
		if journal != nil {
			journal.entries = append(journal.entries, journalEntry{pair: true, key: key, pairBefore: old, pairAfter: jp.own})
		}
		if feed(jp) {
			jp.Add(s.shape, p)
		}
	}
	if pooledOK {
		wasPooled := w
		switch jp.class {
		case ClassPeer, ClassCopy:
			j.setClass(&w, jp.class)
		}
		jp.SetClass(w.class, p.Time)
		if w != wasPooled || !ok {
			j.writers[wk] = w
		}
	}
	if jp.class != before {
		j.scan = true
	}
	if jp.class == ClassPeer && r == ReasonNone {
		j.unhold(i, NumHeldOutcomes) // this newer point passes, labelled
	}
	return jp.class, r, false
}

// elected feeds a point of the stream's elected writer to every pair of
// the stream (judged: the stream's values are evidence), and decides
// peers the writers that went quiet while it went on (quietPeer).
func (j *judge) elected(s *stream, p Point, judged bool) {
	head, ok := j.byStream[s.id]
	if !ok {
		return
	}
	for i := head; i != 0; i = j.pairs[i-1].next {
		jp := &j.pairs[i-1]
		if jp.other == p.Start {
			continue
		}
		if jp.restart != nil {
			j.cancelRestart(i - 1) // the elected writer sent again: a second writer (restart.go)
		}
		if j.quietPeer(jp, s, p) {
			continue
		}
		if !judged {
			continue
		}
		rebase(jp, s)
		if jp.class == ClassPeer {
			continue
		}
		if !feed(jp) {
			continue
		}
		before := jp.class
		jp.Add(s.shape, p)
		if jp.class == before {
			continue
		}
		j.scan = true
		wk := jp.wk
		if w, ok := j.writers[wk]; ok && wk.origin != 0 {
			switch jp.class {
			case ClassPeer, ClassCopy:
				j.setClass(&w, jp.class)
			}
			j.writers[wk] = w
		}
	}
}

// Quiet rule (docs/metrics.md, "overlap: auto"): a copy is a second
// reader of the elected writer's own process and cannot outlive it, so an
// undecided writer that sends nothing for QuietIntervals of its interval
// (and of the elected writer's), while the writer that was elected at its
// newest point goes on sending, is a peer: a process that ended. Its held
// point is released. A writer whose process ended with the elected
// writer's is not decided (nothing goes on), nor is one whose elected
// writer changed since (a restart ended both), nor a writer pooled a copy.
// The decision is the pair's own, not pooled over the writer's streams: a
// writer may stop writing one stream (an asynchronous instrument's
// callback no longer observing an attribute set) and not the others.
const (
	// QuietIntervals is how many intervals a quiet writer has missed.
	QuietIntervals = 3
	// QuietOneShot is the least wait for a writer that sent a single point
	// (its interval unknown): a copy's reader may export far less often
	// than the elected writer's.
	QuietOneShot = 2 * time.Minute
)

// quietPeer decides pair jp a peer, by the quiet rule, at the elected
// writer's point p, and says whether it did.
func (j *judge) quietPeer(jp *judged, s *stream, p Point) bool {
	o := &jp.own
	if jp.class != ClassUndecided || p.Start == 0 || o.time == 0 || o.ref != p.Start || p.Time <= o.time {
		return false
	}
	wait := QuietIntervals * max(o.iv, s.cur.interval)
	if o.iv == 0 {
		wait = max(wait, uint64(QuietOneShot))
	}
	if wait == 0 || p.Time-o.time < wait {
		return false
	}
	if w, ok := j.writers[jp.wk]; ok && jp.wk.origin != 0 && w.class != ClassUndecided {
		return false // pooled a copy: proven by the values elsewhere
	}
	jp.class, jp.part, jp.pooled, jp.decided = ClassPeer, partQuiet, false, p.Time
	jp.crossLo, jp.crossHi = float64(p.Time-o.time)/1e9, float64(wait)/1e9
	j.stats.Quiet++
	j.scan = true
	return true
}

// CopySample is how a copy is tested once decided: one point of every
// CopySample of each writer (the bounds stay valid, only looser), so that
// a long-lived copy costs little; a peer taken for a copy is still found.
const CopySample = 8

// feed says whether to feed a pair the next point.
func feed(jp *judged) bool {
	if jp.class != ClassCopy {
		return true
	}
	jp.skip++
	return jp.skip%CopySample == 0
}

func (j *judge) alloc() uint32 {
	if n := len(j.free); n > 0 {
		i := j.free[n-1]
		j.free = j.free[:n-1]
		return i
	}
	j.pairs = append(j.pairs, judged{})
	return uint32(len(j.pairs) - 1)
}

// drop forgets the pair of (id, other): the writer was elected (its point
// passes, so a held one is superseded).
func (j *judge) drop(id ID, other uint64) {
	i, ok := j.byKey[pairKey{id, other}]
	if !ok {
		return
	}
	j.releaseRestart(i) // elected: its held restart goes out before this point
	j.unlink(i, NumHeldOutcomes)
}

// unlink removes pair slot i from its stream's list and the index; a point
// it holds goes with it, counted as o (unless NumHeldOutcomes).
func (j *judge) unlink(i uint32, o HeldOutcome) {
	if o == HeldExpired && j.classOf(i) != ClassUndecided {
		o = NumHeldOutcomes // decided since: released or discarded at the next TakeReleased
	}
	j.unhold(i, o)
	j.cancelRestart(i)
	jp := &j.pairs[i]
	if head, ok := j.byStream[jp.id]; ok {
		if head == i+1 {
			if jp.next == 0 {
				delete(j.byStream, jp.id)
			} else {
				j.byStream[jp.id] = jp.next
			}
		} else {
			for k := head; k != 0; k = j.pairs[k-1].next {
				if j.pairs[k-1].next == i+1 {
					j.pairs[k-1].next = jp.next
					break
				}
			}
		}
	}
	delete(j.byKey, pairKey{jp.id, jp.other})
	if jp.chains != nil && jp.wk.origin == 0 {
		j.counts[jp.class]-- // a delta chain that is its own writer (newChain)
	}
	j.unpool(jp.wk)
	*jp = judged{}
	j.free = append(j.free, i)
}

// unpool takes one stream from pooled writer wk (origin 0: none),
// forgetting the writer when it has none left and is undecided.
func (j *judge) unpool(wk writerKey) {
	w, ok := j.writers[wk]
	if !ok || wk.origin == 0 {
		return
	}
	if w.streams > 0 {
		w.streams--
	}
	if w.streams == 0 && w.class == ClassUndecided {
		j.counts[w.class]--
		delete(j.writers, wk)
	} else {
		j.writers[wk] = w
	}
}

// dropStream forgets every pair of a stream.
func (j *judge) dropStream(id ID) {
	delete(j.shared, id)
	for {
		head, ok := j.byStream[id]
		if !ok {
			return
		}
		j.unlink(head-1, HeldExpired)
	}
}

// sweep forgets pairs whose writer sent nothing since cutoff, looking at
// up to budget slots, and writers that no pair refers to and that were
// seen before cutoff when the writers are at their limit.
func (j *judge) sweep(cutoff int64, budget int) {
	n := uint32(len(j.pairs))
	for k := 0; k < budget && k < int(n); k++ {
		if j.cursor >= n {
			j.cursor = 0
		}
		if jp := &j.pairs[j.cursor]; jp.live && jp.seen < cutoff {
			j.unlink(j.cursor, HeldExpired)
			j.stats.Expired++
		}
		j.cursor++
	}
	// At the limit, a pass over the writers; at most once a second of the
	// caller's clock, so that a full set costs one pass, not one a request.
	if len(j.writers) >= j.max && cutoff-j.lastPass >= int64(time.Second) {
		j.lastPass = cutoff
		for k, w := range j.writers {
			if w.streams == 0 && w.seen < cutoff {
				j.counts[w.class]--
				delete(j.writers, k)
			}
		}
	}
}

// find returns the pair of (id, other).
func (j *judge) find(id ID, other uint64) (*judged, bool) {
	i, ok := j.byKey[pairKey{id, other}]
	if !ok {
		return nil, false
	}
	return &j.pairs[i], true
}
