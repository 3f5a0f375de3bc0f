package streams

import (
	"testing"
)

// TestSnapshotRestoreKeepsElections: a tracker restored from a snapshot
// judges the next points exactly as the original would.
func TestSnapshotRestoreKeepsElections(t *testing.T) {
	shape := NewShape(KindSum, true, true)
	orig, err := NewTracker(DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	a, b := ID{1}, ID{2}
	// Stream a: writer 100 elected, writer 200 (a later reader) seen too.
	orig.Observe(a, shape, Point{Start: 100, Time: 1000, Value: 5}, 1)
	orig.Observe(a, shape, Point{Start: 200, Time: 1100, Value: 1}, 1)
	orig.Observe(b, shape, Point{Start: 300, Time: 1000, Value: 7}, 1)

	restored, err := NewTracker(DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	n, err := restored.Restore(orig.AppendSnapshot(nil))
	if err != nil || n != 2 {
		t.Fatalf("Restore = %d, %v; want 2 streams", n, err)
	}
	for _, p := range []struct {
		id ID
		pt Point
	}{
		{a, Point{Start: 200, Time: 2100, Value: 2}}, // the later writer: overlap
		{a, Point{Start: 100, Time: 2000, Value: 9}}, // the elected writer: passes
		{a, Point{Start: 100, Time: 2000, Value: 9}}, // its exact repeat
		{b, Point{Start: 300, Time: 900, Value: 6}},  // out of order
	} {
		want := orig.Observe(p.id, shape, p.pt, 2)
		got := restored.Observe(p.id, shape, p.pt, 2)
		if got.Verdict != want.Verdict || got.Reason != want.Reason || got.Election != want.Election {
			t.Errorf("%v: restored tracker says %v, original %v", p.pt, got, want)
		}
	}
	if restored.Len() != orig.Len() {
		t.Errorf("Len = %d, want %d", restored.Len(), orig.Len())
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	tr, _ := NewTracker(DefaultPolicy())
	for _, b := range [][]byte{nil, []byte("nope"), append([]byte(snapshotMagic), 1, 0, 0, 0, 0, 0, 0, 0)} {
		if _, err := tr.Restore(b); err == nil {
			t.Errorf("Restore(%q) accepted garbage", b)
		}
	}
}

func TestRestoreHonoursTheLimit(t *testing.T) {
	shape := NewShape(KindSum, true, true)
	big, _ := NewTracker(DefaultPolicy())
	for i := range 10 {
		big.Observe(ID{byte(i + 1)}, shape, Point{Start: 1, Time: 2, Value: 1}, 1)
	}
	p := DefaultPolicy()
	p.MaxStreams = 4
	small, _ := NewTracker(p)
	if n, err := small.Restore(big.AppendSnapshot(nil)); err != nil || n != 4 || small.Len() != 4 {
		t.Fatalf("Restore into a 4-stream tracker = %d, %v (Len %d); want 4", n, err, small.Len())
	}
}

// TestSnapshotKeepsTheShift: a writer elected at an interpolated change-over
// is still shifted after a restore; a snapshot of the first format (which
// had no shift) still restores, without one.
func TestSnapshotKeepsTheShift(t *testing.T) {
	shape := NewShape(KindSum, true, true)
	orig, _ := NewTracker(DefaultPolicy())
	id := ID{1}
	for _, p := range []Point{
		{Start: secs(100), Time: secs(110), Value: 10},
		{Start: secs(100), Time: secs(120), Value: 20},
		{Start: secs(115), Time: secs(121), Value: 1},
		{Start: secs(115), Time: secs(150), Value: 35}, // failover, shifted
	} {
		orig.Observe(id, shape, p, 1)
	}
	snap := orig.AppendSnapshot(nil)
	next := Point{Start: secs(115), Time: secs(160), Value: 40}

	restored, _ := NewTracker(DefaultPolicy())
	if n, err := restored.Restore(snap); err != nil || n != 1 {
		t.Fatalf("Restore = %d, %v", n, err)
	}
	want := orig.Observe(id, shape, next, 2)
	got := restored.Observe(id, shape, next, 2)
	if !want.Shifted || got.Shifted != want.Shifted || got.Shift != want.Shift {
		t.Fatalf("restored: shifted %v %+v; original: shifted %v %+v", got.Shifted, got.Shift, want.Shifted, want.Shift)
	}

	// The same snapshot in the first format: the magic, the count, and
	// each stream without its last 16 bytes (and no classifier section:
	// its two counts, 16 bytes, end the snapshot).
	v1 := append([]byte(snapshotMagicV1), snap[len(snapshotMagic):len(snapshotMagic)+8]...)
	for b := snap[len(snapshotMagic)+8 : len(snap)-16]; len(b) > 0; b = b[streamBytes:] {
		v1 = append(v1, b[:streamBytesV1]...)
	}
	old, _ := NewTracker(DefaultPolicy())
	if n, err := old.Restore(v1); err != nil || n != 1 {
		t.Fatalf("Restore(v1) = %d, %v", n, err)
	}
	if d := old.Observe(id, shape, next, 2); d.Verdict != want.Verdict || d.Shifted {
		t.Fatalf("v1 restore: %v shifted %v; want %v, not shifted", d, d.Shifted, want)
	}
}
