package dedupprocessor

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
)

// storageHost is a host with one file_storage extension, as the collector
// gives a processor whose config names it.
type storageHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.exts }

func startFileStorage(t *testing.T, dir string) (storageHost, extension.Extension) {
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
	id := component.NewID(f.Type())
	return storageHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}, ext
}

// TestWindowsSurviveARestart: span ids and log digests stored by one
// process are known to the next, so a batch re-sent after a restart is
// still dropped; new data still passes.
func TestWindowsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := createDefaultConfig()
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	// run starts a fresh processor pair on the same storage directory, as a
	// restarted process would, sends, and shuts everything down.
	run := func(send func(processor.Traces, processor.Logs)) (spans, records int) {
		host, ext := startFileStorage(t, dir)
		defer func() { _ = ext.Shutdown(context.Background()) }()
		f := NewFactory()
		ts, ls := new(consumertest.TracesSink), new(consumertest.LogsSink)
		tp, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, ts)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(Type), cfg, ls)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []component.Component{tp, lp} {
			if err := c.Start(context.Background(), host); err != nil {
				t.Fatal(err)
			}
		}
		send(tp, lp)
		for _, c := range []component.Component{tp, lp} {
			if err := c.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		return ts.SpanCount(), ls.LogRecordCount()
	}
	ctx := context.Background()
	s, r := run(func(tp processor.Traces, lp processor.Logs) {
		_ = tp.ConsumeTraces(ctx, traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0}))
		_ = lp.ConsumeLogs(ctx, logs(logSpec{"a", "boot", 1, ""}))
	})
	if s != 2 || r != 1 {
		t.Fatalf("first run delivered %d spans and %d records, want 2 and 1", s, r)
	}
	s, r = run(func(tp processor.Traces, lp processor.Logs) {
		_ = tp.ConsumeTraces(ctx, traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0}, spanSpec{"a", 1, 3, "new", 0}))
		_ = lp.ConsumeLogs(ctx, logs(logSpec{"a", "boot", 1, ""}, logSpec{"a", "other", 1, ""}))
	})
	if s != 1 || r != 1 {
		t.Fatalf("after the restart %d spans and %d records passed, want only the new 1 and 1", s, r)
	}
}

func TestStorageMustExist(t *testing.T) {
	cfg := createDefaultConfig()
	id := component.MustNewID("file_storage")
	cfg.Storage = &id
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !containsStr(err.Error(), `no extension "file_storage"`) {
		t.Fatalf("Start without the extension: %v, want a message naming it", err)
	}
	_ = p.Shutdown(context.Background())
}
