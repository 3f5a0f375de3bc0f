package logstorageextension

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// BenchmarkBatch runs the persistent queue's pattern, a 16 KiB item and
// an 8-byte index set in one Batch, the item read, the item deleted, on
// log_storage (default segments) and on file_storage, with and without
// fsync: `go test -bench Batch -run '^$'` shows them side by side.
func BenchmarkBatch(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("log_storage/fsync=%v", fsync), func(b *testing.B) {
			f := NewFactory()
			cfg := f.CreateDefaultConfig().(*Config)
			cfg.Directory, cfg.FSync = b.TempDir(), fsync
			benchQueue(b, f, cfg)
		})
		b.Run(fmt.Sprintf("file_storage/fsync=%v", fsync), func(b *testing.B) {
			f := filestorage.NewFactory()
			cfg := f.CreateDefaultConfig().(*filestorage.Config)
			cfg.Directory, cfg.FSync = b.TempDir(), fsync
			cfg.Compaction.Directory = cfg.Directory
			benchQueue(b, f, cfg)
		})
	}
}

func benchQueue(b *testing.B, f extension.Factory, cfg component.Config) {
	ctx := context.Background()
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	c, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, exporterID, "logs")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Close(ctx); err != nil {
			b.Error(err)
		}
		if err := ext.Shutdown(ctx); err != nil {
			b.Error(err)
		}
	})
	item := val(1, 16<<10)
	idx := make([]byte, 8)
	b.SetBytes(int64(len(item)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := strconv.Itoa(i)
		binary.LittleEndian.PutUint64(idx, uint64(i))
		if err := c.Batch(ctx, storage.SetOperation("wi", idx), storage.SetOperation(key, item)); err != nil {
			b.Fatal(err)
		}
		v, err := c.Get(ctx, key)
		if err != nil || len(v) != len(item) {
			b.Fatalf("Get: %d bytes, %v", len(v), err)
		}
		if err := c.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}
