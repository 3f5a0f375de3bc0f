package journal

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/doubletake/doubletake/extension/logstorageextension"
)

// BenchmarkAppend: one segment per request as the span window writes it
// (1000 spans of 32 bytes) into a real file_storage, in the steady state
// where every append also deletes the oldest segment (the newer ones hold
// MaxEntries).
//
//	go test -run '^$' -bench Append -benchtime 2s -benchmem ./processor/dedupprocessor/internal/journal
//
// BenchmarkAppend/*/fsync is the same with the storage's fsync on
// (--fsync): every append waits for the disk. file_storage is bbolt,
// log_storage the embedded default's append-only log.
func BenchmarkAppend(b *testing.B) {
	for _, st := range []struct {
		name string
		open func(testing.TB, string, string, bool) (storage.Client, func())
	}{{"file_storage", fileStorageOpts}, {"log_storage", logStorageOpts}} {
		b.Run(st.name+"/nosync", func(b *testing.B) { benchAppend(b, st.open, false) })
		b.Run(st.name+"/fsync", func(b *testing.B) { benchAppend(b, st.open, true) })
	}
}

// logStorageOpts is fileStorageOpts for log_storage.
func logStorageOpts(t testing.TB, dir, name string, fsync bool) (storage.Client, func()) {
	t.Helper()
	f := logstorageextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*logstorageextension.Config)
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

func benchAppend(b *testing.B, open func(testing.TB, string, string, bool) (storage.Client, func()), fsync bool) {
	const spans, record = 1000, 32
	client, done := open(b, b.TempDir(), "traces", fsync)
	defer done()
	j, err := Open(context.Background(), client, Options{Prefix: "traces/", MaxSegments: 200_000, MaxEntries: 200 * spans, RecordSize: record})
	if err != nil {
		b.Fatal(err)
	}
	seg := make([]byte, spans*record)
	for i := range seg {
		seg[i] = byte(i * 7)
	}
	ctx := context.Background()
	for i := range 300 { // past MaxEntries: every append now drops one
		if err := j.Append(ctx, int64(i+1), seg); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(seg)))
	at := int64(1000)
	for b.Loop() {
		at++
		if err := j.Append(ctx, at, seg); err != nil {
			b.Fatal(err)
		}
	}
	if j.Len() > 201 {
		b.Fatalf("%d segments held, want at most 201", j.Len())
	}
}
