package streams

import "testing"

// TestFold: a peer if any later writer is one (its evidence), a copy only
// if every one is, undecided otherwise (the first writer's evidence).
func TestFold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []Class
		want    Class
		ev      int // the writer whose evidence it is; -1: none
	}{
		{"none", nil, ClassUndecided, -1},
		{"one copy", []Class{ClassCopy}, ClassCopy, 0},
		{"all copies", []Class{ClassCopy, ClassCopy}, ClassCopy, 0},
		{"a copy and an undecided writer", []Class{ClassCopy, ClassUndecided}, ClassUndecided, 0},
		{"an undecided writer first", []Class{ClassUndecided, ClassCopy}, ClassUndecided, 0},
		{"a peer among copies", []Class{ClassCopy, ClassPeer, ClassCopy}, ClassPeer, 1},
		{"two peers: the first one's evidence", []Class{ClassUndecided, ClassPeer, ClassPeer}, ClassPeer, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Fold
			for i, c := range tc.classes {
				f.Add(c, Evidence{Class: c, Tests: i})
			}
			want := ""
			if tc.ev >= 0 {
				want = Evidence{Class: tc.classes[tc.ev], Tests: tc.ev}.String()
			}
			if f.Class() != tc.want || f.Evidence() != want || f.Len() != len(tc.classes) {
				t.Errorf("fold of %v: %v %q (%d), want %v %q", tc.classes, f.Class(), f.Evidence(), f.Len(), tc.want, want)
			}
		})
	}
}

// TestStreamClass: the Tracker folds a stream's judgements: a copy and a
// peer of one stream make a peer stream; a stream with only a copy is one.
func TestStreamClass(t *testing.T) {
	tr := autoTracker(t, nil)
	a, b := ID{1}, ID{2}
	obs := func(id ID, start, time, value float64) {
		tr.Observe(id, monoSum, pt{start: start, time: time, value: value}.point(), 1)
	}
	for k := range 60 {
		tm := 110 + float64(k)*10
		obs(a, 100, tm, tm)
		obs(b, 100, tm, tm)
		obs(a, 105, tm+1, tm-50) // a copy of a's first writer: 50 less
		obs(b, 105, tm+1, tm-50)
		obs(b, 107, tm+2, 3*tm) // a peer of b's
	}
	if f := tr.StreamClass(a); f.Class() != ClassCopy || f.Len() != 1 {
		t.Errorf("stream a: %v over %d writers, want a copy", f.Class(), f.Len())
	}
	if f := tr.StreamClass(b); f.Class() != ClassPeer || f.Len() != 2 || f.Evidence()[:5] != "peer:" {
		t.Errorf("stream b: %v over %d writers (%s), want a peer", f.Class(), f.Len(), f.Evidence())
	}
	if f := tr.StreamClass(ID{9}); f.Class() != ClassUndecided || f.Len() != 0 {
		t.Errorf("unknown stream: %v", f.Class())
	}
}
