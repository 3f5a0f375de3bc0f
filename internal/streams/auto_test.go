package streams

import (
	"os"
	"strings"
	"testing"
)

func autoTracker(t testing.TB, mutate func(*Policy)) *Tracker {
	return newTracker(t, func(p *Policy) {
		p.Auto = true
		if mutate != nil {
			mutate(p)
		}
	})
}

// TestAutoCumulative: with Policy.Auto a peer gets its own series
// (label), a copy and an undecided writer are dropped, and an undecided
// writer does not take the stream over by its earlier start.
func TestAutoCumulative(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []pt
	}{
		{"a second reader joined later: dropped, never labelled", []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 100, time: 120, value: 20, want: "pass"},
			{start: 100, time: 130, value: 30, want: "pass"},
			{start: 125, time: 135, value: 7, want: "drop overlap"}, // c = 28: [20, 30-7... ]
			{start: 100, time: 140, value: 40, want: "pass"},
			{start: 125, time: 145, value: 17, want: "drop overlap"},
			{start: 100, time: 150, value: 50, want: "pass"},
			{start: 125, time: 155, value: 27, want: "drop overlap"},
		}},
		{"processes sharing an identity: the later one, busier, is a peer at its second point", []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 103, time: 111, value: 50, want: "drop overlap"}, // c ≥ 10 − 50: no news
			{start: 100, time: 120, value: 20, want: "pass"},         // c ≤ 20 − 50 < 0: a peer
			{start: 103, time: 121, value: 60, want: "label overlap"},
			{start: 103, time: 121, value: 60, want: "drop duplicate"}, // its own repeat
			{start: 103, time: 115, value: 55, want: "drop out_of_order"},
			{start: 103, time: 131, value: 59, want: "drop decrease"},
		}},
		{"an undecided earlier start does not take over", []pt{
			{start: 103, time: 108, value: 5, want: "pass"},
			{start: 100, time: 110, value: 10, want: "drop overlap"}, // keep_one: elect:earlier_start; c ≤ 5
			{start: 103, time: 118, value: 15, want: "pass"},
			{start: 100, time: 120, value: 30, want: "drop overlap"},
			{start: 103, time: 128, value: 16, want: "pass"}, // c ≥ 30 − 16 > 5: a peer
			{start: 100, time: 130, value: 40, want: "label overlap"},
		}},
		{"a restart is still elected at once; the old writer takes it back", []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 111, time: 112, value: 1, want: "pass elect:restart"},
			{start: 100, time: 120, value: 20, want: "pass elect:earlier_start"},
			{start: 111, time: 122, value: 3, want: "drop overlap"},
		}},
		{"an undecided writer fails over as with keep_one", []pt{
			{start: 100, time: 110, value: 10, want: "pass"},
			{start: 105, time: 111, value: 1, want: "drop overlap"},
			{start: 100, time: 120, value: 10, want: "pass"},
			{start: 105, time: 121, value: 1, want: "drop overlap"},
			{start: 105, time: 151, value: 1, want: "pass elect:failover"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, autoTracker(t, nil), monoSum, tc.steps) })
	}
}

// TestAutoPeerNeverFailsOver: the elected writer of two peers stops; the
// peer keeps its own series, and the unlabelled one ends.
func TestAutoPeerNeverFailsOver(t *testing.T) {
	run(t, autoTracker(t, nil), monoSum, []pt{
		{start: 100, time: 110, value: 10, want: "pass"},
		{start: 103, time: 111, value: 50, want: "drop overlap"},
		{start: 100, time: 120, value: 20, want: "pass"},
		{start: 103, time: 121, value: 60, want: "label overlap"},
		{start: 103, time: 171, value: 70, want: "label overlap"}, // keep_one: elect:failover
		{start: 103, time: 181, value: 80, want: "label overlap"},
	})
}

// TestAutoPooled: a writer found a peer on one stream is a peer on its
// other streams of the same origin and start, an UpDownCounter (which is
// no evidence) included; another origin is not.
func TestAutoPooled(t *testing.T) {
	tr := autoTracker(t, nil)
	const origin, other = 7, 9
	a, b, c := ID{1}, ID{2}, ID{3}
	obs := func(id ID, o uint64, shape Shape, p pt) string {
		return tr.ObserveFrom(id, o, shape, p.point(), 1).String()
	}
	for _, s := range []struct {
		id     ID
		origin uint64
		shape  Shape
		p      pt
		want   string
	}{
		{b, origin, upDown, pt{start: 100, time: 110, value: -3}, "pass"},
		{b, origin, upDown, pt{start: 103, time: 111, value: 4}, "drop overlap"}, // no evidence yet
		{c, other, upDown, pt{start: 100, time: 110, value: -3}, "pass"},
		{a, origin, monoSum, pt{start: 100, time: 110, value: 10}, "pass"},
		{a, origin, monoSum, pt{start: 103, time: 111, value: 50}, "drop overlap"},
		{a, origin, monoSum, pt{start: 100, time: 120, value: 20}, "pass"},
		{a, origin, monoSum, pt{start: 103, time: 121, value: 60}, "label overlap"},
		{b, origin, upDown, pt{start: 103, time: 121, value: 2}, "label overlap"},
		{c, other, upDown, pt{start: 103, time: 121, value: 2}, "drop overlap"},
		// SDKs stamp a start per instrument: 26 µs later is the same writer,
		// 0.5 s later another.
		{ID{4}, origin, upDown, pt{start: 100, time: 110, value: 1}, "pass"},
		{ID{4}, origin, upDown, pt{start: 103.000026, time: 121, value: 2}, "label overlap"},
		{ID{5}, origin, upDown, pt{start: 100, time: 110, value: 1}, "pass"},
		{ID{5}, origin, upDown, pt{start: 103.5, time: 121, value: 2}, "drop overlap"},
	} {
		if got := obs(s.id, s.origin, s.shape, s.p); got != s.want {
			t.Errorf("stream %v start %g time %g: %q, want %q", s.id[0], s.p.start, s.p.time, got, s.want)
		}
	}
	st := tr.JudgeStats()
	if st.ByClass[ClassPeer] != 1 || st.Writers != 3 {
		t.Errorf("stats %+v: want one peer of three writers", st)
	}
	if j, ok := tr.Judgement(ID{4}, secs(103.000026)); !ok || !j.Pooled || !strings.HasPrefix(j.String(), "peer: decided on another stream of the same writer") {
		t.Errorf("pooled judgement %+v: %s", j, j.String())
	}
	j, ok := tr.Judgement(a, secs(103))
	if !ok || j.Class != ClassPeer || j.Elected != secs(100) {
		t.Errorf("judgement %+v, %v", j, ok)
	}
}

// TestAutoLimit: past MaxJudged a second writer is refused (counted) and
// judged as keep_one judges it.
func TestAutoLimit(t *testing.T) {
	tr := autoTracker(t, func(p *Policy) { p.MaxJudged = 1 })
	for i := range 3 {
		id := ID{byte(i + 1)}
		tr.Observe(id, monoSum, pt{start: 103, time: 108, value: 5}.point(), 1)
		d := tr.Observe(id, monoSum, pt{start: 100, time: 110, value: 10}.point(), 1)
		want := "drop overlap"
		if i > 0 {
			want = "pass elect:earlier_start" // keep_one's rule
		}
		if d.String() != want {
			t.Errorf("stream %d: %v, want %s", i, d, want)
		}
	}
	if st := tr.JudgeStats(); st.Refused != 2 || st.Pairs != 1 {
		t.Errorf("stats %+v: want 2 refused, 1 pair", st)
	}
}

// TestAutoSweep: a pair whose writer went quiet is forgotten with
// MaxStale, and with its stream.
func TestAutoSweep(t *testing.T) {
	tr := autoTracker(t, nil)
	id := ID{1}
	tr.Observe(id, monoSum, pt{start: 100, time: 110, value: 10}.point(), 1)
	tr.Observe(id, monoSum, pt{start: 103, time: 111, value: 50}.point(), 1)
	tr.Observe(id, monoSum, pt{start: 100, time: 120, value: 20}.point(), 1)
	if st := tr.JudgeStats(); st.Pairs != 1 {
		t.Fatalf("pairs %d", st.Pairs)
	}
	tr.Expire(1 + int64(DefaultMaxStale) + 1)
	if st := tr.JudgeStats(); st.Pairs != 0 || st.Streams != 0 {
		t.Errorf("after expiry: %+v", st)
	}
}

// TestSnapshotKeepsJudgements: a restored tracker goes on judging the
// second writers as the original would, class and evidence included.
func TestSnapshotKeepsJudgements(t *testing.T) {
	orig := autoTracker(t, nil)
	id := ID{1}
	steps := []pt{
		{start: 100, time: 110, value: 10}, {start: 103, time: 111, value: 50},
		{start: 100, time: 120, value: 20}, {start: 125, time: 126, value: 1},
		{start: 103, time: 121, value: 60},
	}
	for _, s := range steps {
		orig.ObserveFrom(id, 5, monoSum, s.point(), 1)
	}
	restored := autoTracker(t, nil)
	if _, err := restored.Restore(orig.AppendSnapshot(nil)); err != nil {
		t.Fatal(err)
	}
	if a, b := orig.JudgeStats(), restored.JudgeStats(); a.Pairs != b.Pairs || a.Writers != b.Writers || a.ByClass != b.ByClass {
		t.Errorf("stats %+v, restored %+v", a, b)
	}
	for _, s := range []pt{{start: 103, time: 131, value: 70}, {start: 125, time: 130, value: 4}, {start: 100, time: 130, value: 30}} {
		want := orig.ObserveFrom(id, 5, monoSum, s.point(), 2)
		got := restored.ObserveFrom(id, 5, monoSum, s.point(), 2)
		if got != want {
			t.Errorf("%v: restored %v, original %v", s, got, want)
		}
	}
	ja, _ := orig.Judgement(id, secs(125))
	jb, _ := restored.Judgement(id, secs(125))
	if ja != jb {
		t.Errorf("judgement %+v, restored %+v", ja, jb)
	}
	// A tracker without Auto reads the snapshot too, without the section.
	plain := newTracker(t, nil)
	if n, err := plain.Restore(orig.AppendSnapshot(nil)); err != nil || n != 1 {
		t.Errorf("plain restore: %d, %v", n, err)
	}
	// A damaged section is refused whole.
	snap := orig.AppendSnapshot(nil)
	if _, err := autoTracker(t, nil).Restore(snap[:len(snap)-3]); err == nil {
		t.Error("a truncated snapshot restored")
	}
}

// TestSnapshotV2Fixture: testdata/snapshot_v2.bin was written by the
// release before the classifier (format 2): it restores, under Auto too,
// and the next points are judged as that release judged them.
func TestSnapshotV2Fixture(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot_v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	hist := NewShape(KindHistogram, true, true)
	for _, auto := range []bool{false, true} {
		tr := newTracker(t, func(p *Policy) { p.Auto = auto })
		if n, err := tr.Restore(b); err != nil || n != 3 {
			t.Fatalf("auto %v: Restore = %d, %v; want 3 streams", auto, n, err)
		}
		for _, s := range []struct {
			id    ID
			shape Shape
			p     Point
			want  string
		}{
			// What the release that wrote the fixture said of these
			// points, fed to the tracker it snapshotted.
			{ID{1}, monoSum, Point{Start: 125e9, Time: 145e9, Value: 8, Fingerprint: 8}, "drop overlap"},
			{ID{1}, monoSum, Point{Start: 100e9, Time: 150e9, Value: 50, Fingerprint: 50}, "pass"},
			{ID{1}, monoSum, Point{Start: 100e9, Time: 150e9, Value: 50, Fingerprint: 50}, "drop duplicate"},
			{ID{2}, hist, Point{Start: 100e9, Time: 120e9, Value: 6, Sum: 2, HasSum: true, Fingerprint: 6}, "pass"},
			{ID{3}, monoSum, Point{Start: 105e9, Time: 170e9, Value: 40, Fingerprint: 15}, "pass"},
			{ID{3}, monoSum, Point{Start: 100e9, Time: 150e9, Value: 25, Fingerprint: 16}, "drop overlap"},
		} {
			d := tr.Observe(s.id, s.shape, s.p, 2)
			if d.String() != s.want {
				t.Errorf("auto %v, stream %d at %d: %v, want %s", auto, s.id[0], s.p.Time, d, s.want)
			}
			if s.id[0] == 3 && s.p.Start == 105e9 && (!d.Shifted || d.Shift.Start != 120e9 || d.Shift.Offset != 90.0/11) {
				t.Errorf("auto %v: the restored change-over shift is lost: %+v", auto, d)
			}
		}
	}
}

// TestAutoPooledByScope: the second writers met in one ScopeMetrics are one
// writer, however far apart their instruments' starts (a loaded machine
// spreads an SDK's per-instrument stamps past PoolWindow); without scopes
// marked, starts 58 ms apart are two writers.
func TestAutoPooledByScope(t *testing.T) {
	for _, scoped := range []bool{true, false} {
		tr := autoTracker(t, nil)
		counter, hist := ID{1}, ID{2}
		tr.ObserveFrom(counter, 7, monoSum, pt{start: 100, time: 120, value: 20}.point(), 1)
		tr.ObserveFrom(hist, 7, histogram, Point{Start: secs(100), Time: secs(120), Value: 20, Sum: 40, HasSum: true}, 1)
		if scoped {
			tr.NewScope(0)
		}
		d := tr.ObserveFrom(counter, 7, monoSum, pt{start: 100.002, time: 115, value: 12}.point(), 1)
		if d.String() != "drop overlap" || d.Class != ClassUndecided {
			t.Fatalf("scoped %v: the counter's second writer: %v (%v), want an undecided drop", scoped, d, d.Class)
		}
		// Its histogram, 58 ms later, counted more by 115 s than the
		// elected writer by 120 s: a peer.
		if d := tr.ObserveFrom(hist, 7, histogram, Point{Start: secs(100.060), Time: secs(115), Value: 22, Sum: 44, HasSum: true}, 1); d.Verdict != Label {
			t.Fatalf("scoped %v: the histogram's second writer: %v, want labelled", scoped, d)
		}
		want := ClassPeer
		if !scoped {
			want = ClassUndecided
		}
		if k := tr.judge.byKey[pairKey{counter, secs(100.002)}]; tr.judge.classOf(k) != want {
			t.Errorf("scoped %v: the counter's writer is %v, want %v", scoped, tr.judge.classOf(k), want)
		}
	}
}

// TestSnapshotV3Fixture: testdata/snapshot_v3.bin was written by the
// release before held points, min and max and pooling by ScopeMetrics
// (format 3, overlap auto): a peer (stream 1, start 103 s), a copy (stream
// 2, start 200 s) and an undecided writer (stream 3, start 305 s) against
// elected writers started at 100, 150 and 300 s, all of origin 7. This
// release restores their classes and judges their next points as the
// release that wrote them would, the undecided writer's point held.
func TestSnapshotV3Fixture(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot_v3.bin")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t, func(p *Policy) { p.Auto, p.MaxHeldBytes = true, 1000 })
	if n, err := tr.Restore(b); err != nil || n != 3 {
		t.Fatalf("Restore = %d, %v; want 3 streams", n, err)
	}
	for _, s := range []struct {
		id    byte
		start uint64
		class Class
	}{{1, 103e9, ClassPeer}, {2, 200e9, ClassCopy}, {3, 305e9, ClassUndecided}} {
		if j, ok := tr.Judgement(ID{s.id}, s.start); !ok || j.Class != s.class {
			t.Errorf("stream %d: judgement %+v (%v), want %v", s.id, j, ok, s.class)
		}
	}
	for _, s := range []struct {
		id          byte
		start, time float64
		value       float64
		want        string
		hold        bool
	}{
		{1, 103, 131, 70, "label overlap", false},
		{2, 200, 250.5, 345, "drop overlap", false},
		{3, 305, 312, 5, "drop overlap", true},
	} {
		d := tr.ObserveFrom(ID{s.id}, 7, monoSum, Point{Start: secs(s.start), Time: secs(s.time), Value: s.value, Fingerprint: uint64(s.value)}, 2)
		if d.String() != s.want || d.Hold != s.hold {
			t.Errorf("stream %d at %g s: %v hold %v, want %s hold %v", s.id, s.time, d, d.Hold, s.want, s.hold)
		}
	}
}
