package streams

// What a Tracker asks of its classifier (judge.go) from outside: the
// ScopeMetrics a point comes from, and the judgements and counts shown.

// NewScope says that the next points come from a new ScopeMetrics of the
// resource identity (Hasher.Identity; 0: not known): the second writers
// met in one ScopeMetrics are pooled as one writer (see judge.other), and
// an identity's points at one time are one export of it (exports.go).
// Walk's callers call it at Visit.NewScope, with Visit.Identity; the
// processor at each ScopeMetrics.
func (t *Tracker) NewScope(identity uint64) {
	if t.judge != nil {
		t.judge.anchored, t.judge.scoped = false, true
		t.judge.identity = identity
	}
}

// ExportTimesForgotten is how many exports the record of exports seen
// (Policy.MaxExportTimes) forgot for newer ones so far.
func (t *Tracker) ExportTimesForgotten() uint64 {
	if t.judge == nil {
		return 0
	}
	return t.judge.exports.forgotten
}

// Judgement is the classifier's view of one second writer of a stream.
type Judgement struct {
	Writer  uint64 // its start
	Elected uint64 // the elected writer's start the evidence is against
	Evidence
}

func (jp *judged) judgement() Judgement {
	e := jp.Evidence()
	return Judgement{Writer: jp.other, Elected: jp.ref, Evidence: e}
}

// Judgement returns the judgement of the writer with start writer of
// stream id, with Policy.Auto.
func (t *Tracker) Judgement(id ID, writer uint64) (Judgement, bool) {
	if t.judge == nil {
		return Judgement{}, false
	}
	jp, ok := t.judge.find(id, writer)
	if !ok {
		return Judgement{}, false
	}
	return jp.judgement(), true
}

// Judgements appends the judgements of stream id's second writers to dst.
func (t *Tracker) Judgements(id ID, dst []Judgement) []Judgement {
	if t.judge == nil {
		return dst
	}
	head, ok := t.judge.byStream[id]
	if !ok {
		return dst
	}
	for i := head; i != 0; i = t.judge.pairs[i-1].next {
		dst = append(dst, t.judge.pairs[i-1].judgement())
	}
	return dst
}

// JudgeStats returns the classifier's counts; zero without Policy.Auto.
func (t *Tracker) JudgeStats() JudgeStats {
	if t.judge == nil {
		return JudgeStats{}
	}
	s := t.judge.stats
	s.Pairs, s.Writers, s.ByClass, s.Limit, s.Streams = len(t.judge.byKey), len(t.judge.writers), t.judge.counts, t.judge.max, len(t.judge.byStream)
	s.HeldPoints, s.HeldBytes = len(t.judge.holders)+t.judge.restartPoints(), t.judge.heldBytes
	s.Shared = len(t.judge.shared)
	s.ExportTimes, s.ExportTimesForgotten = len(t.judge.exports.ring), t.judge.exports.forgotten
	for _, i := range t.judge.byKey {
		if t.judge.pairs[i].chains != nil {
			s.Delta[t.judge.classOf(i)]++
		}
	}
	return s
}
