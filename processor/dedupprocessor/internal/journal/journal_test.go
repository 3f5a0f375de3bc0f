package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fileStorage starts a real file_storage extension on dir and returns a
// client, as a processor would get it.
func fileStorage(t testing.TB, dir string) (storage.Client, func()) {
	t.Helper()
	return fileStorageNamed(t, dir, "traces")
}

// fileStorageNamed is fileStorage with the client name given ("" as the
// dedup processor asks).
func fileStorageNamed(t testing.TB, dir, name string) (storage.Client, func()) {
	t.Helper()
	return fileStorageOpts(t, dir, name, false)
}

// fileStorageOpts is fileStorageNamed with file_storage's fsync option.
func fileStorageOpts(t testing.TB, dir, name string, fsync bool) (storage.Client, func()) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	cfg.FSync = fsync
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	client, err := ext.(storage.Extension).GetClient(context.Background(), component.KindProcessor, component.MustNewID("dedup"), name)
	if err != nil {
		t.Fatal(err)
	}
	return client, func() {
		if err := client.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func payload(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

func TestReplayAfterReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c, closeFn := fileStorage(t, dir)
	j, err := Open(ctx, c, Options{Prefix: "traces/", MaxSegments: 100, RecordSize: 8, Insert: func(int64, []byte) { t.Fatal("replay on an empty journal") }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(5) {
		if err := j.Append(ctx, int64(10*i), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Trim(ctx, 20); err != nil { // drops the segments at 0 and 10
		t.Fatal(err)
	}
	closeFn()

	c, closeFn = fileStorage(t, dir)
	defer closeFn()
	var got []uint64
	var ats []int64
	j, err = Open(ctx, c, Options{Prefix: "traces/", MaxSegments: 100, RecordSize: 8, Insert: func(at int64, p []byte) {
		ats = append(ats, at)
		got = append(got, binary.LittleEndian.Uint64(p))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 2 || got[2] != 4 || ats[0] != 20 {
		t.Fatalf("replayed %v at %v, want segments 2..4 from t=20", got, ats)
	}
	if j.Len() != 3 || j.Stats().Replayed != 3 {
		t.Fatalf("Len=%d Replayed=%d, want 3 and 3", j.Len(), j.Stats().Replayed)
	}
	// Appending after a reopen continues the numbering.
	if err := j.Append(ctx, 50, payload(5)); err != nil {
		t.Fatal(err)
	}
	if j.Len() != 4 {
		t.Fatalf("Len = %d after append, want 4", j.Len())
	}
}

func TestMaxSegmentsDropsOldest(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	j, err := Open(ctx, c, Options{Prefix: "p/", MaxSegments: 3, RecordSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(5) {
		if err := j.Append(ctx, int64(i), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if j.Len() != 3 || j.Stats().Dropped != 2 {
		t.Fatalf("Len=%d Dropped=%d, want 3 and 2", j.Len(), j.Stats().Dropped)
	}
	var got []uint64
	if _, err := Open(ctx, c, Options{Prefix: "p/", MaxSegments: 3, RecordSize: 8, Insert: func(_ int64, p []byte) { got = append(got, binary.LittleEndian.Uint64(p)) }}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 2 {
		t.Fatalf("replayed %v, want [2 3 4]", got)
	}
	for _, k := range []string{"p/c/00000000000000000000", "p/c/00000000000000000000/000000"} {
		if v, _ := c.Get(ctx, k); v != nil {
			t.Fatalf("the dropped segment is still stored (%s)", k)
		}
	}
	if v, _ := c.Get(ctx, "p/c/00000000000000000004/000000"); v == nil {
		t.Fatal("the newest segment's part is not where it is expected")
	}
}

// TestLargeSegmentsInParts: a segment larger than one part is stored in
// parts, replayed byte for byte, and every part is deleted with it.
func TestLargeSegmentsInParts(t *testing.T) {
	dir := t.TempDir()
	c, closeFn := fileStorage(t, dir)
	ctx := context.Background()
	j, err := Open(ctx, c, Options{Prefix: "l/", MaxSegments: 2, RecordSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	seg := func(i int) []byte {
		b := make([]byte, 3*partBytes+8*i) // 4 parts, the last one short
		for k := range b {
			b[k] = byte(k*31 + i)
		}
		return b
	}
	for i := range 3 { // the first is dropped (MaxSegments 2)
		if err := j.Append(ctx, int64(i+1), seg(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.AppendForget(ctx, 4, seg(3)[:partBytes]); err != nil { // exactly one part
		t.Fatal(err)
	}
	for i := range 4 {
		if v, _ := c.Get(ctx, j.partKey(0, i)); v != nil {
			t.Fatalf("part %d of the dropped segment is still stored", i)
		}
	}
	if v, _ := c.Get(ctx, j.partKey(2, 3)); len(v) != 16 {
		t.Fatalf("the last part of segment 2 holds %d bytes, want 16", len(v))
	}
	closeFn()

	c, closeFn = fileStorage(t, dir)
	defer closeFn()
	var got [][]byte
	var forgot []byte
	j, err = Open(ctx, c, Options{Prefix: "l/", MaxSegments: 2, RecordSize: 8,
		Insert: func(_ int64, p []byte) { got = append(got, bytes.Clone(p)) },
		Forget: func(p []byte) { forgot = bytes.Clone(p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0], seg(2)) || !bytes.Equal(forgot, seg(3)[:partBytes]) {
		t.Fatalf("replayed %d inserts and a forget of %d bytes, want segment 2 and one part of 3 byte for byte", len(got), len(forgot))
	}
	if j.Entries() != len(seg(2))/8 || j.Stats().Corrupted != 0 {
		t.Fatalf("Entries=%d Corrupted=%d, want %d and 0", j.Entries(), j.Stats().Corrupted, len(seg(2))/8)
	}
}

// TestMissingPartIsCorrupt: a segment with a part gone is skipped and
// counted, the others replay.
func TestMissingPartIsCorrupt(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	j, err := Open(ctx, c, Options{Prefix: "m/", MaxSegments: 10, RecordSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Append(ctx, int64(i+1), make([]byte, 2*partBytes)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx, j.partKey(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, j.headKey(2), []byte("bad")); err != nil {
		t.Fatal(err)
	}
	n := 0
	j, err = Open(ctx, c, Options{Prefix: "m/", MaxSegments: 10, RecordSize: 8, Insert: func(int64, []byte) { n++ }})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || j.Stats().Corrupted != 2 || j.Len() != 3 {
		t.Fatalf("replayed %d, Corrupted=%d, Len=%d; want 1, 2, 3", n, j.Stats().Corrupted, j.Len())
	}
}

// TestReadsWholeSegmentsOfEarlierVersions: a journal written before
// segments were stored in parts (a 16-byte meta, one key per segment) is
// replayed, continued in parts, and its segments deleted as they age.
func TestReadsWholeSegmentsOfEarlierVersions(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	for n := uint64(3); n < 5; n++ {
		v := binary.LittleEndian.AppendUint64(nil, 10*n)
		v = binary.LittleEndian.AppendUint64(v, n)
		if err := c.Set(ctx, fmt.Sprintf("o/seg/%020d", n), v); err != nil {
			t.Fatal(err)
		}
	}
	meta := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 3), 5)
	if err := c.Set(ctx, "o/meta", meta); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	insert := func(_ int64, p []byte) { got = append(got, binary.LittleEndian.Uint64(p)) }
	j, err := Open(ctx, c, Options{Prefix: "o/", MaxSegments: 10, RecordSize: 8, Insert: insert})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("replayed %v, want [3 4]", got)
	}
	if err := j.Append(ctx, 50, payload(5)); err != nil {
		t.Fatal(err)
	}
	got = nil
	if j, err = Open(ctx, c, Options{Prefix: "o/", MaxSegments: 10, RecordSize: 8, Insert: insert}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != 5 {
		t.Fatalf("replayed %v after an append, want [3 4 5]", got)
	}
	if err := j.Trim(ctx, 45); err != nil { // drops the two old segments
		t.Fatal(err)
	}
	for n := 3; n < 5; n++ {
		if v, _ := c.Get(ctx, fmt.Sprintf("o/seg/%020d", n)); v != nil {
			t.Fatalf("old segment %d is still stored after the trim", n)
		}
	}
	if j.Len() != 1 {
		t.Fatalf("Len = %d, want 1", j.Len())
	}
}

func TestCorruptMetaStartsAfresh(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	if err := c.Set(ctx, "x/meta", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	j, err := Open(ctx, c, Options{Prefix: "x/", MaxSegments: 10, RecordSize: 8, Insert: func(int64, []byte) { t.Fatal("replayed from a corrupt journal") }})
	if err != nil {
		t.Fatal(err)
	}
	if j.Stats().Corrupted != 1 {
		t.Fatalf("Corrupted = %d, want 1", j.Stats().Corrupted)
	}
}

// TestMaxEntriesDropsCoveredSegments: once the newer segments alone hold the
// window's capacity, the oldest is deleted, so the journal's size follows the
// window, not the traffic.
func TestMaxEntriesDropsCoveredSegments(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	j, err := Open(ctx, c, Options{Prefix: "e/", MaxSegments: 1000, MaxEntries: 10, RecordSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	four := func(i uint64) []byte {
		var b []byte
		for k := range uint64(4) {
			b = binary.LittleEndian.AppendUint64(b, 4*i+k)
		}
		return b
	}
	for i := range uint64(20) {
		if err := j.Append(ctx, int64(i+1), four(i)); err != nil {
			t.Fatal(err)
		}
		// Segments of 4 entries, capacity 10: three segments (12 entries)
		// cover the window; a fourth would already be covered by the newer three.
		if j.Entries() > 10+4-1 {
			t.Fatalf("after %d appends the journal holds %d entries, want at most 13", i+1, j.Entries())
		}
	}
	if j.Len() != 3 || j.Stats().Dropped != 17 {
		t.Fatalf("Len=%d Dropped=%d, want 3 and 17", j.Len(), j.Stats().Dropped)
	}
	var got []uint64
	if _, err := Open(ctx, c, Options{Prefix: "e/", MaxSegments: 1000, MaxEntries: 10, RecordSize: 8,
		Insert: func(_ int64, p []byte) {
			for ; len(p) >= 8; p = p[8:] {
				got = append(got, binary.LittleEndian.Uint64(p))
			}
		}}); err != nil {
		t.Fatal(err)
	}
	// The window would hold entries 70..79 (the newest 10); the journal
	// replays 68..79, a superset within one segment.
	if len(got) != 12 || got[0] != 68 || got[11] != 79 {
		t.Fatalf("replayed %v, want 68..79", got)
	}
}

// TestForgetSegmentsReplayInOrder: a forget segment is replayed after the
// insert it takes back and before a later re-insert of the same entry.
func TestForgetSegmentsReplayInOrder(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	j, err := Open(ctx, c, Options{Prefix: "f/", MaxSegments: 100, RecordSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		forget bool
		v      uint64
	}{{false, 1}, {false, 2}, {true, 1}, {false, 1}, {true, 2}}
	for i, s := range steps {
		if s.forget {
			err = j.AppendForget(ctx, int64(i+1), payload(s.v))
		} else {
			err = j.Append(ctx, int64(i+1), payload(s.v))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if j.Entries() != 3 {
		t.Fatalf("Entries = %d, want 3 (forget segments count none)", j.Entries())
	}
	held := map[uint64]bool{}
	var ats []int64
	if _, err := Open(ctx, c, Options{Prefix: "f/", MaxSegments: 100, RecordSize: 8,
		Insert: func(at int64, p []byte) { held[binary.LittleEndian.Uint64(p)] = true; ats = append(ats, at) },
		Forget: func(p []byte) { delete(held, binary.LittleEndian.Uint64(p)) },
	}); err != nil {
		t.Fatal(err)
	}
	if !held[1] || held[2] || len(held) != 1 {
		t.Fatalf("after replay the window holds %v, want only 1", held)
	}
	if len(ats) != 3 || ats[2] != 4 {
		t.Fatalf("insert times %v, want [1 2 4]", ats)
	}
}

// gatedClient is a real storage client whose first Batch waits for open,
// and which counts Batch calls: the writes the journal made.
type gatedClient struct {
	storage.Client
	mu      sync.Mutex
	batches int
	entered chan struct{} // closed when the first Batch has begun
	open    chan struct{}
}

func (c *gatedClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	c.batches++
	first := c.batches == 1
	c.mu.Unlock()
	if first {
		close(c.entered)
		<-c.open
	}
	return c.Client.Batch(ctx, ops...)
}

// TestConcurrentAppendsShareTransactions: appends that arrive while one is
// being written are written together in one transaction, each still its
// own segment, in arrival order, with the MaxSegments and MaxEntries bounds
// applied as if they had come one by one (segments written and dropped in
// the same transaction included).
func TestConcurrentAppendsShareTransactions(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		maxSegments, maxEntries int
		wantLen                 int
	}{
		{"max segments", 8, 0, 8},
		{"max entries", 1000, 10, 10}, // one entry each: the newest 10 cover the window
	} {
		t.Run(tc.name, func(t *testing.T) {
			real, closeFn := fileStorage(t, t.TempDir())
			defer closeFn()
			c := &gatedClient{Client: real, entered: make(chan struct{}), open: make(chan struct{})}
			ctx := context.Background()
			opt := Options{Prefix: "g/", MaxSegments: tc.maxSegments, MaxEntries: tc.maxEntries, RecordSize: 8}
			j, err := Open(ctx, c, opt)
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			var wg sync.WaitGroup
			errs := make([]error, n)
			wg.Go(func() { errs[0] = j.Append(ctx, 1, payload(0)) })
			<-c.entered
			for i := 1; i < n; i++ {
				wg.Go(func() { errs[i] = j.Append(ctx, int64(i+1), payload(uint64(i))) })
				for j.group.Stats().Calls < uint64(i+1) { // queued in arrival order
					runtime.Gosched()
				}
			}
			close(c.open)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
			}
			if c.batches != 2 {
				t.Fatalf("%d transactions, want 2: the first append alone, the 19 that waited together", c.batches)
			}
			if st := j.Stats(); j.Len() != tc.wantLen || st.Appended != n || st.Dropped != uint64(n-tc.wantLen) {
				t.Fatalf("Len=%d Appended=%d Dropped=%d, want %d, %d, %d", j.Len(), st.Appended, st.Dropped, tc.wantLen, n, n-tc.wantLen)
			}
			var got []uint64
			var ats []int64
			opt.Insert = func(at int64, p []byte) { got = append(got, binary.LittleEndian.Uint64(p)); ats = append(ats, at) }
			if _, err := Open(ctx, real, opt); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.wantLen || got[0] != uint64(n-tc.wantLen) || got[len(got)-1] != n-1 || ats[0] != int64(n-tc.wantLen+1) {
				t.Fatalf("replayed %v at %v, want the newest %d in order", got, ats, tc.wantLen)
			}
			for k := range n - tc.wantLen {
				key := fmt.Sprintf("g/c/%020d", k)
				if v, _ := real.Get(ctx, key); v != nil {
					t.Fatalf("dropped segment %d is still stored (%s)", k, key)
				}
				if v, _ := real.Get(ctx, key+"/000000"); v != nil {
					t.Fatalf("dropped segment %d's part is still stored", k)
				}
			}
		})
	}
}
