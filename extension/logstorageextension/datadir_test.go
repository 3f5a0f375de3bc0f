package logstorageextension

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// newTestExtension makes (does not start) log_storage on dir, moving
// from fileStorageDir with mover (nil: none), its log in the observer.
func newTestExtension(t *testing.T, dir, fileStorageDir string, mover FileStorageMover) (*logStorage, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	set := extensiontest.NewNopSettings(Type)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.Directory, cfg.FileStorageDirectory = dir, fileStorageDir
	var opts []Option
	if mover != nil {
		opts = append(opts, WithFileStorageMover(mover))
	}
	e, err := NewFactory(opts...).Create(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e.(*logStorage), logs
}

// TestDirectoryHeldOnce: a second log_storage on a directory another one
// holds (in this process or another) fails at Start, naming the directory
// and the holder's PID, and leaves the holder's clients alone; once the
// holder has shut down, it starts.
func TestDirectoryHeldOnce(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "log")
	first, _ := newTestExtension(t, dir, "", nil)
	if err := first.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	c := getClient(t, first, component.KindExporter, component.MustNewID("otlp_grpc"), "traces")
	if err := c.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	second, _ := newTestExtension(t, dir, "", nil)
	err := second.Start(ctx, componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "directory "+dir+" is in use") || !strings.Contains(err.Error(), "(pid "+strconv.Itoa(os.Getpid())+")") {
		t.Fatalf("the second Start: %v; want an error naming %s and pid %d", err, dir, os.Getpid())
	}
	if err := second.Shutdown(ctx); err != nil { // as the collector does after a failed Start
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("the holder's client after the refused Start: %q, %v", v, err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	third, _ := newTestExtension(t, dir, "", nil)
	if err := third.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatalf("after the holder shut down: %v", err)
	}
	if err := third.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryIsAFile: a directory that is a file is named.
func TestDirectoryIsAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, _ := newTestExtension(t, path, "", nil)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err == nil || !strings.Contains(err.Error(), path+" is a file") {
		t.Fatalf("Start: %v", err)
	}
}

// TestFileStorageMovedAtStart: the mover runs once at Start, with the
// directory held, given file_storage_directory and this directory's
// clients; its error fails the Start, names file_storage_directory and
// gives the directory back.
func TestFileStorageMovedAtStart(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir, from := filepath.Join(base, "log"), filepath.Join(base, "queue")
	var calls []Clients
	var failWith error
	mover := func(_ context.Context, fileStorageDir string, to Clients, logger *zap.Logger) error {
		if fileStorageDir != from {
			t.Errorf("moving %s, want %s", fileStorageDir, from)
		}
		// The directory is held while the mover runs.
		other, _ := newTestExtension(t, dir, "", nil)
		if err := other.Start(ctx, componenttest.NewNopHost()); err == nil {
			t.Error("another log_storage started on the directory while the mover ran")
			_ = other.Shutdown(ctx)
		}
		logger.Info("moved")
		calls = append(calls, to)
		return failWith
	}
	e, logs := newTestExtension(t, dir, from, mover)
	if err := e.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Dir != dir || calls[0].SegmentBytes != DefaultSegmentBytes || calls[0].ClientDir("exporter_x_y") != filepath.Join(dir, "exporter_x_y") {
		t.Fatalf("mover calls %+v, want one into %s", calls, dir)
	}
	if logs.FilterMessage("moved").Len() != 1 {
		t.Error("the mover did not log on the extension's logger")
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	failWith = errors.New("cannot read it")
	e, _ = newTestExtension(t, dir, from, mover)
	err := e.Start(ctx, componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "file_storage_directory "+from+": cannot read it") {
		t.Fatalf("Start with a failing mover: %v", err)
	}
	failWith = nil
	e, _ = newTestExtension(t, dir, "", nil)
	if err := e.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatalf("the directory was not given back after the failed Start: %v", err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// hostWith is a host with the given extensions.
type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// TestFileStorageKeptWhileConfigured: with a file_storage extension in
// the config, its files may still be read: nothing is moved, and a warn
// line says why.
func TestFileStorageKeptWhileConfigured(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	moved := false
	e, logs := newTestExtension(t, filepath.Join(base, "log"), filepath.Join(base, "queue"), func(context.Context, string, Clients, *zap.Logger) error {
		moved = true
		return nil
	})
	host := hostWith{component.MustNewIDWithName("file_storage", "journal"): nil}
	if err := e.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Shutdown(ctx) }()
	if moved {
		t.Error("moved file_storage's files while a file_storage extension is configured")
	}
	if w := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("this config has a file_storage extension").All(); len(w) != 1 || w[0].ContextMap()["file_storage"] != "file_storage/journal" {
		t.Errorf("want one warn line naming file_storage/journal, got %+v", logs.All())
	}
}

// TestFileStorageWithoutMover: a build without a mover starts while
// file_storage_directory holds nothing to move (missing, or only files
// kept aside), and refuses to, naming the files, when it does.
func TestFileStorageWithoutMover(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir, from := filepath.Join(base, "log"), filepath.Join(base, "queue")
	start := func() error {
		e, _ := newTestExtension(t, dir, from, nil)
		err := e.Start(ctx, componenttest.NewNopHost())
		_ = e.Shutdown(ctx)
		return err
	}
	if err := start(); err != nil {
		t.Fatalf("no file_storage_directory there: %v", err)
	}
	if err := os.MkdirAll(from, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"exporter_x_traces.migrated-20250101T000000Z", "exporter_x_logs.damaged-20250101T000000Z", ".salvage-x"} {
		if err := os.WriteFile(filepath.Join(from, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := start(); err != nil {
		t.Fatalf("only files kept aside: %v", err)
	}
	if err := os.WriteFile(filepath.Join(from, "exporter_x_metrics"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := start(); err == nil || !strings.Contains(err.Error(), from) || !strings.Contains(err.Error(), "exporter_x_metrics") || strings.Contains(err.Error(), "migrated") {
		t.Fatalf("a file to move and no mover: %v", err)
	}
}

// TestFileStorageDirectoryConfig: file_storage_directory loads from YAML
// and must not be the directory itself.
func TestFileStorageDirectoryConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, err string
	}{
		{"upgrade", "/var/lib/otelcol/queue", ""},
		{"same", "/var/lib/otelcol/log/", "file_storage_directory must not be directory itself: file_storage's files and log_storage's clients have the same names"},
	} {
		sub, err := cm.Sub(component.NewIDWithName(Type, tc.name).String())
		if err != nil {
			t.Fatal(err)
		}
		cfg := createDefaultConfig()
		if err := sub.Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.FileStorageDirectory != tc.from {
			t.Errorf("%s: file_storage_directory %q, want %q", tc.name, cfg.FileStorageDirectory, tc.from)
		}
		err = confmap.Validate(cfg)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
