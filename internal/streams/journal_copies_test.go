package streams

import (
	"slices"
	"testing"
)

// TestUndoFrom: a repeat observed after an original's change, whose own
// change (the stream's version moved on) is taken back at once with
// UndoFrom, leaves the original's change undoable; Slot and Slots name the
// streams changed.
func TestUndoFrom(t *testing.T) {
	tr := newTracker(t, nil)
	a, b := ID{1}, ID{2}
	tr.Observe(a, monoSum, pt{start: 0, time: 10, value: 10}.point(), 0)
	var orig, cp Journal
	tr.Record(&orig)
	tr.Observe(a, monoSum, pt{start: 0, time: 20, value: 20}.point(), 0)
	tr.Observe(b, monoSum, pt{start: 0, time: 20, value: 1}.point(), 0)
	tr.Record(nil)
	sa, ok := orig.Slot(0)
	if !ok {
		t.Fatal("no slot for the first change")
	}
	sb, _ := orig.Slot(1)
	if got := orig.Slots(nil); !slices.Equal(got, []uint32{sa, sb}) || sa == sb {
		t.Fatalf("Slots %v, want [%d %d], two streams", got, sa, sb)
	}
	if _, ok := orig.Slot(2); ok {
		t.Fatal("a slot past the end")
	}

	tr.Record(&cp)
	tr.Observe(b, monoSum, pt{start: 0, time: 30, value: 2}.point(), 0) // new: kept
	n := cp.Len()
	if got := tr.Observe(a, monoSum, pt{start: 0, time: 20, value: 20}.point(), 0).String(); got != "drop duplicate" {
		t.Fatalf("the repeat: %q", got)
	}
	tr.Record(nil)
	if s, _ := cp.Slot(n); s != sa {
		t.Fatalf("the repeat's change is of slot %d, want %d", s, sa)
	}
	if k := tr.UndoFrom(&cp, n); k != 1 || cp.Len() != n {
		t.Fatalf("UndoFrom took back %d, left %d changes; want 1 and %d", k, cp.Len(), n)
	}
	if k := tr.UndoFrom(&cp, cp.Len()); k != 0 {
		t.Fatalf("UndoFrom past the end took back %d", k)
	}
	// The original fails: its change of a is taken back (b moved on since).
	if k := tr.Undo(&orig); k != 1 {
		t.Fatalf("the original's undo took back %d changes, want 1", k)
	}
	if got := tr.Observe(a, monoSum, pt{start: 0, time: 20, value: 20}.point(), 0).String(); got != "pass" {
		t.Fatalf("the repeat judged again: %q, want pass", got)
	}
}
