package streams

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
	// A labelled writer's own newest point (a pair's), instead of a
	// stream: what it was before, and the point that replaced it.
	pair bool
	key  pairKey
	// An export recorded (exports.go), instead of a stream: its key.
	export     uint64
	pairBefore ownPoint
	pairAfter  ownPoint
	// A shared start's chain (shared.go), instead of a stream.
	shared *sharedUndo
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
		if e.export != 0 {
			t.judge.exports.forget(e.export)
			continue
		}
		if e.shared != nil {
			if t.judge.undoShared(e.shared) {
				n++
			}
			continue
		}
		if e.pair {
			if t.judge.undoOwn(e.key, e.pairBefore, e.pairAfter) {
				n++
			}
			continue
		}
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

// Slot returns the stream slot the n-th change recorded in j is of; false
// for a change of a labelled writer's own point, or past the end.
func (j *Journal) Slot(n int) (uint32, bool) {
	if n < 0 || n >= len(j.entries) || j.entries[n].pair {
		return 0, false
	}
	return j.entries[n].idx, true
}

// Slots appends to dst the stream slots of j's changes, in order, each as
// often as it was changed (labelled writers' points left out).
func (j *Journal) Slots(dst []uint32) []uint32 {
	for k := range j.entries {
		if !j.entries[k].pair {
			dst = append(dst, j.entries[k].idx)
		}
	}
	return dst
}

// UndoFrom takes back the changes recorded in j from the n-th on, as Undo
// does, and leaves j with the ones before. It returns the number taken
// back.
func (t *Tracker) UndoFrom(j *Journal, n int) int {
	if n < 0 || n >= len(j.entries) {
		return 0
	}
	tail := Journal{entries: j.entries[n:]}
	k := t.Undo(&tail)
	clear(j.entries[n:])
	j.entries = j.entries[:n]
	return k
}
