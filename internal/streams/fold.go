package streams

// Fold is the class of a stream whose writers overlapped, folded from the
// classes of its later writers (each judged against the stream's first):
// a peer if any of them is one (its counts are its own, whatever the
// others are), a copy only if every one is, undecided otherwise. Its
// evidence is the first peer's line, else the first writer's. The gateway's
// status page, `doubletake verify` and `doubletake audit` all fold so. The
// zero value is an empty fold: undecided, no evidence.
type Fold struct {
	n       int // writers folded
	copies  int
	first   Evidence // the first writer's
	peer    Evidence // the first peer's
	hasPeer bool
	// The line of a shared start's writers (AddShared), when it is the
	// first writer's or the first peer's.
	firstLine, peerLine string
}

// Add folds in one later writer's class and its evidence, which is
// formatted only if Evidence returns it.
func (f *Fold) Add(c Class, evidence Evidence) {
	if f.n == 0 {
		f.first = evidence
	}
	f.n++
	switch c {
	case ClassPeer:
		if !f.hasPeer {
			f.hasPeer, f.peer = true, evidence
		}
	case ClassCopy:
		f.copies++
	}
}

// AddShared folds in the writers of a start shared by several
// (shared.go): peers once split into their own series, undecided while
// they are not; their evidence is SharedEvidence's line.
func (f *Fold) AddShared(e SharedEvidence) {
	if f.n == 0 {
		f.firstLine = e.String()
	}
	f.n++
	if e.Writers > 1 && !f.hasPeer {
		f.hasPeer, f.peerLine = true, e.String()
	}
}

// Len is the number of writers folded.
func (f *Fold) Len() int { return f.n }

// Class is the stream's class.
func (f *Fold) Class() Class {
	switch {
	case f.hasPeer:
		return ClassPeer
	case f.n > 0 && f.copies == f.n:
		return ClassCopy
	}
	return ClassUndecided
}

// Evidence is the line that decided the class: the first peer's, else the
// first writer's; "" when nothing was folded.
func (f *Fold) Evidence() string {
	switch {
	case f.hasPeer && f.peerLine != "":
		return f.peerLine
	case f.hasPeer:
		return f.peer.String()
	case f.firstLine != "":
		return f.firstLine
	case f.n > 0:
		return f.first.String()
	}
	return ""
}

// StreamClass folds the judgements of stream id's later writers (Fold),
// with Policy.Auto, and its shared start's (Fold.AddShared); an empty fold
// otherwise.
func (t *Tracker) StreamClass(id ID) Fold {
	var f Fold
	if t.judge == nil {
		return f
	}
	if e, ok := t.Shared(id); ok {
		f.AddShared(e)
	}
	head, ok := t.judge.byStream[id]
	if !ok {
		return f
	}
	for i := head; i != 0; i = t.judge.pairs[i-1].next {
		e := t.judge.pairs[i-1].Evidence()
		f.Add(e.Class, e)
	}
	return f
}
