package dedupotlpexporter

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/extension/logstorageextension"
	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/internal/storagestate"
)

// TestUndecodableEntryWarnedAndCounted: the persistent queue's lines for
// an entry it could not decode and dropped (its debug line when it takes
// the entry to send, its warn line when it puts back at start the
// entries being sent when the process stopped) become one warning each
// and are counted; other lines are left as they were, the queue's line
// for a missing entry among them (missingEntries counts that one).
func TestUndecodableEntryWarnedAndCounted(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := withUndecodable(zap.New(core))
	before := recovered.Undecodable()
	l.Debug("Failed to dispatch item", zap.Error(errors.New("proto: illegal wireType 6")))
	l.Warn("Failed unmarshalling item", zap.String("key", "1"), zap.Error(errors.New("proto: cannot parse invalid wire-format data")))
	l.Debug("something else")
	l.Debug("Failed unmarshalling item") // not the queue's line: it logs this one at warn
	l.Warn("Failed retrieving item", zap.String("key", "0"), zap.Error(errors.New("value not set")))
	if got := recovered.Undecodable() - before; got != 2 {
		t.Errorf("counted %d, want 2", got)
	}
	entries := logs.All()
	if len(entries) != 3 {
		t.Fatalf("logged %+v, want two warnings and the queue's other warning as it was", entries)
	}
	for i, want := range []string{"proto: illegal wireType 6", "proto: cannot parse invalid wire-format data"} {
		if e := entries[i]; e.Level != zapcore.WarnLevel || e.Message != undecodableLine || e.ContextMap()["error"] != want {
			t.Errorf("entry %d: %+v, want a warning %q with the error %q", i, e, undecodableLine, want)
		}
	}
	if e := entries[2]; e.Message != "Failed retrieving item" {
		t.Errorf("entry 2: %+v, want the queue's own line", e)
	}
}

// TestMissingEntriesCounted: the queue's storage client counts and warns
// each entry (a decimal key) read and not found, by Get or in a Batch;
// not an entry found, another key not found, nor an entry a Batch
// deleted before reading it.
func TestMissingEntriesCounted(t *testing.T) {
	ctx := context.Background()
	inner := storagetest.NewInMemoryClient(component.KindExporter, component.MustNewID("x"), "traces")
	for _, k := range []string{"1", "2", "qmv0"} {
		if err := inner.Set(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zapcore.InfoLevel)
	c := &missingEntries{Client: inner, logger: zap.New(core)}
	before := recovered.Undecodable()
	for _, k := range []string{"0", "1", "ri", "qmv0"} {
		if _, err := c.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Batch(ctx, storage.SetOperation("qmv0", []byte("m")), storage.GetOperation("2"), storage.GetOperation("3"),
		storage.DeleteOperation("4"), storage.GetOperation("4"), storage.GetOperation("di")); err != nil {
		t.Fatal(err)
	}
	if got := recovered.Undecodable() - before; got != 2 {
		t.Errorf("counted %d, want 2 (entries 0 and 3)", got)
	}
	var keys []string
	for _, e := range logs.All() {
		if e.Level != zapcore.WarnLevel || e.Message != undecodableLine {
			t.Errorf("logged %+v", e)
		}
		keys = append(keys, e.ContextMap()["key"].(string))
	}
	if len(keys) != 2 || keys[0] != "0" || keys[1] != "3" {
		t.Errorf("warned for keys %v, want [0 3]", keys)
	}
}

// refusingUpstream is an OTLP/gRPC trace server that refuses every
// export as unavailable (retryable); entered is closed at the first.
type refusingUpstream struct {
	ptraceotlp.UnimplementedGRPCServer
	once    sync.Once
	entered chan struct{}
}

func (u *refusingUpstream) Export(context.Context, ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	u.once.Do(func() { close(u.entered) })
	return ptraceotlp.NewExportResponse(), status.Error(codes.Unavailable, "not now")
}

// TestUndecodableQueueEntriesAtRestart: a real persistent queue in
// log_storage stops while its upstream refuses, its first entry being
// sent and the others waiting; the records of two entries are gone (as
// when log_storage cuts damaged records) when it starts again. The entry
// that was being sent is missing when the queue puts it back in the
// queue, the waiting one when the queue takes it to send (or both when
// its batcher had taken both): each is one warning and counted. Before,
// an entry being sent at the stop, most of the queue while the upstream
// is away, was lost with an uncounted warning.
func TestUndecodableQueueEntriesAtRestart(t *testing.T) {
	up := &refusingUpstream{entered: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, up)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	sf := logstorageextension.NewFactory()
	scfg := sf.CreateDefaultConfig().(*logstorageextension.Config)
	scfg.Directory = t.TempDir()
	ext, err := sf.Create(context.Background(), extensiontest.NewNopSettings(sf.Type()), scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	host := storagetest.NewStorageHost().WithExtension(component.NewID(sf.Type()), ext)
	raw := map[string]any{
		"endpoint": ln.Addr().String(), "tls": map[string]any{"insecure": true}, "dedup": "dedup",
		"retry_on_failure": map[string]any{"enabled": true, "initial_interval": "10s", "max_elapsed_time": 0},
		"sending_queue":    map[string]any{"enabled": true, "storage": "log_storage", "num_consumers": 1},
	}
	ctx := context.Background()

	first, _ := newUpstreamTraces(t, raw, nil)
	if err := first.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := first.ConsumeTraces(ctx, spansOf(10, func(int) string { return "op" })); err != nil {
			t.Fatal(err)
		}
	}
	<-up.entered // entry 0 is being sent: refused, waiting to be retried
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	c, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewIDWithName("dedup_otlp_grpc", "upstream"), "traces")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"0", "1"} {
		if v, err := c.Get(ctx, key); err != nil || v == nil {
			t.Fatalf("queue entry %s: %v, %d bytes: not where the queue keeps it", key, err, len(v))
		}
		if err := c.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zapcore.InfoLevel)
	before := recovered.Undecodable()
	second, _ := newUpstreamTraces(t, raw, nil, func(s *exporter.Settings) { s.Logger = zap.New(core) })
	if err := second.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for recovered.Undecodable()-before < 2 {
		if time.Now().After(deadline) {
			_ = second.Shutdown(ctx)
			t.Fatalf("counted %d undecodable entries, want 2; logged:\n%+v", recovered.Undecodable()-before, logs.All())
		}
		time.Sleep(10 * time.Millisecond) // polling the count, bounded by the deadline
	}
	if err := second.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recovered.Undecodable() - before; got != 2 {
		t.Errorf("counted %d undecodable entries, want 2", got)
	}
	if warned := logs.FilterMessage(undecodableLine).FilterLevelExact(zapcore.WarnLevel).Len(); warned != 2 {
		t.Errorf("%d warnings %q, want 2; logged:\n%+v", warned, undecodableLine, logs.All())
	}
}

// fullClient refuses every write as a full data dir does.
type fullClient struct{ storage.Client }

type fullErr struct{}

func (fullErr) Error() string     { return "the data dir is full" }
func (fullErr) DataDirFull() bool { return true }

func (fullClient) Batch(context.Context, ...*storage.Operation) error { return fullErr{} }

// TestRefusedEntriesNotCounted: an entry the queue numbered and could not
// store (its storage refused the write: the data dir full) is read back
// missing, and that is no loss: not counted, not warned. The upstream is
// told the storage is full: the queue's room reads 0, so the receivers'
// servers refuse before decoding, until fullProbe has passed.
func TestRefusedEntriesNotCounted(t *testing.T) {
	ctx := context.Background()
	inner := storagetest.NewInMemoryClient(component.KindExporter, component.MustNewID("x"), "traces")
	core, logs := observer.New(zapcore.InfoLevel)
	now := int64(1_000_000_000)
	up := &upstream{queue: newQueueProbe()}
	up.room.now = func() int64 { return now }
	full := &missingEntries{Client: fullClient{inner}, logger: zap.New(core), up: up}
	if err := full.Batch(ctx, storage.SetOperation("qmv0", []byte("m")), storage.SetOperation("7", []byte("entry"))); !storagestate.IsFull(err) {
		t.Fatalf("Batch: %v, want the full data dir's error", err)
	}
	if got := up.readFree(); got != 0 {
		t.Errorf("room %d while the storage refuses new data, want 0", got)
	}
	now += int64(fullProbe)
	if got := up.readFree(); got == 0 {
		t.Error("room still 0 after fullProbe: a full data dir would refuse for ever")
	}
	before := recovered.Undecodable()
	c := &missingEntries{Client: inner, logger: zap.New(core), neverStored: full.neverStored}
	if v, err := c.Get(ctx, "7"); err != nil || v != nil {
		t.Fatalf("Get: %q, %v", v, err)
	}
	// The same key missing again (the refused entry read once) counts.
	if err := c.Batch(ctx, storage.GetOperation("7"), storage.GetOperation("8")); err != nil {
		t.Fatal(err)
	}
	if got := recovered.Undecodable() - before; got != 2 {
		t.Errorf("counted %d, want 2 (7 read a second time, and 8)", got)
	}
	if n := len(logs.All()); n != 2 {
		t.Errorf("%d lines logged, want 2", n)
	}
}
