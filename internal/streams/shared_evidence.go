package streams

import (
	"fmt"
	"math"
	"time"
)

// What a shared start shows (SharedEvidence, for the status page, verify
// and audit), and how a shared point's change is journaled and undone.

// SharedEvidence is what a Tracker knows of a stream's shared start.
type SharedEvidence struct {
	Start   uint64 // the start the writers share
	Writers int    // chains: writers told apart
	Unsplit uint64 // points that could not be given to a writer
	Phase   uint64 // points given by their export phase
	// Ambiguous: points that fit two writers' phases (given by value).
	Ambiguous uint64
	// ByValue: points on one writer's phase that continue another's
	// value (a final flush off its writer's timer), given to that one.
	ByValue uint64
	// ByConn: points placed by the connection they came on where their
	// phase placed them elsewhere or nowhere (shared_conn.go).
	ByConn uint64
	// Conn: split by the connections its writers' points came on (each
	// its own), not by their export phase.
	Conn  bool
	Split uint64 // point time of the split
	// Interval is the export interval the writers' times repeat.
	Interval uint64
}

// String is the evidence in one line, as the status page, verify and
// audit name it.
func (e SharedEvidence) String() string {
	if e.Writers < 2 {
		return fmt.Sprintf("writers sharing one start: could not be split (a value fell without a new start, but their times repeat no export interval by which two writers' phases are told apart); %d falls dropped", e.Unsplit)
	}
	by := "by export phase"
	if e.Conn {
		by = "by the connection each writer's points came on"
	}
	s := fmt.Sprintf("writers sharing one start: split %s (every %s) into %d writers, each its own series (a value fell without a new start; %d points placed by phase)",
		by, time.Duration(e.Interval), e.Writers, e.Phase)
	if e.Ambiguous > 0 {
		s += fmt.Sprintf("; %d points fit two writers' phases, placed by value", e.Ambiguous)
	}
	if e.ByValue > 0 {
		s += fmt.Sprintf("; %d points early for their writer (a flush at shutdown) on another's phase, placed by the value they continue", e.ByValue)
	}
	if e.ByConn > 0 {
		s += fmt.Sprintf("; %d points placed by the connection they came on, where their phase placed them elsewhere or nowhere", e.ByConn)
	}
	if e.Unsplit > 0 {
		s += fmt.Sprintf("; %d points off every writer's phase could not be placed", e.Unsplit)
	}
	return s
}

// Shared returns what the Tracker knows of stream id's shared start, with
// Policy.Auto; false when its start is not shared.
func (t *Tracker) Shared(id ID) (SharedEvidence, bool) {
	if t.judge == nil {
		return SharedEvidence{}, false
	}
	sh := t.judge.shared[id]
	if sh == nil {
		return SharedEvidence{}, false
	}
	if sh.iv == 0 && !sh.gaveUp {
		return SharedEvidence{}, false // learning
	}
	return SharedEvidence{Start: sh.start, Writers: int(sh.n), Unsplit: sh.unsplit, Phase: sh.phase, Split: sh.split, Interval: sh.iv, Ambiguous: sh.ambiguous, ByValue: sh.byValue, ByConn: sh.conns.placed, Conn: sh.conns.split}, true
}

// sharedUndo is what a shared point changed, for Journal/Undo.
type sharedUndo struct {
	id            ID
	k             uint8
	n             uint8 // chains before
	before, after sharer
}

func (t *Tracker) journalShared(id ID, sh *sharedStart, k int, before sharer) {
	if t.journal == nil {
		return
	}
	t.journal.entries = append(t.journal.entries, journalEntry{shared: &sharedUndo{id: id, k: uint8(k), n: sh.n, before: before}})
}

// undoShared takes back a shared point's change unless the chain moved on.
func (j *judge) undoShared(u *sharedUndo) bool {
	sh := j.shared[u.id]
	if sh == nil || int(u.k) >= int(sh.n) || !sh.ch[u.k].same(&u.after) {
		return false
	}
	if u.n == u.k && int(u.k) == int(sh.n)-1 {
		sh.n-- // the chain it started
		sh.ch[u.k] = sharer{}
		return true
	}
	sh.ch[u.k] = u.before
	return true
}

// same compares two chain states (a NaN sum equal to a NaN sum).
func (c *sharer) same(o *sharer) bool {
	return c.time == o.time && c.fp == o.fp && c.points == o.points &&
		math.Float64bits(c.value) == math.Float64bits(o.value) && math.Float64bits(c.sum) == math.Float64bits(o.sum)
}
