package journal

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fileStorage starts a real file_storage extension on dir and returns a
// client, as a processor would get it.
func fileStorage(t *testing.T, dir string) (storage.Client, func()) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	client, err := ext.(storage.Extension).GetClient(context.Background(), component.KindProcessor, component.MustNewID("dedup"), "traces")
	if err != nil {
		t.Fatal(err)
	}
	return client, func() {
		if err := client.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := ext.(extension.Extension).Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func payload(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

func TestReplayAfterReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c, closeFn := fileStorage(t, dir)
	j, err := Open(ctx, c, "traces/", 100, func(int64, []byte) { t.Fatal("replay on an empty journal") })
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
	j, err = Open(ctx, c, "traces/", 100, func(at int64, p []byte) {
		ats = append(ats, at)
		got = append(got, binary.LittleEndian.Uint64(p))
	})
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
	j, err := Open(ctx, c, "p/", 3, func(int64, []byte) {})
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
	if _, err := Open(ctx, c, "p/", 3, func(_ int64, p []byte) { got = append(got, binary.LittleEndian.Uint64(p)) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 2 {
		t.Fatalf("replayed %v, want [2 3 4]", got)
	}
	if v, _ := c.Get(ctx, "p/seg/00000000000000000000"); v != nil {
		t.Fatal("the dropped segment is still stored")
	}
}

func TestCorruptMetaStartsAfresh(t *testing.T) {
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	ctx := context.Background()
	if err := c.Set(ctx, "x/meta", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	j, err := Open(ctx, c, "x/", 10, func(int64, []byte) { t.Fatal("replayed from a corrupt journal") })
	if err != nil {
		t.Fatal(err)
	}
	if j.Stats().Corrupted != 1 {
		t.Fatalf("Corrupted = %d, want 1", j.Stats().Corrupted)
	}
}
