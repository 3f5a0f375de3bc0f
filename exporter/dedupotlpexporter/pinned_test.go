package dedupotlpexporter

// The tests of this file pin what missing.go, undecodable.go and
// queueprobe.go take from exporterhelper v0.161's internals, which no
// public API offers: the persistent queue's key layout, its log lines for
// an entry it drops, and the names of its queue gauges. Each runs the real
// queue, with nothing of this package around it, and fails naming what
// changed, so that a bump of the collector that changes one of them fails
// here rather than in silence (an entry lost uncounted, a status page
// without its queue).

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// plainQueue is exporterhelper's traces exporter with the otlp_grpc
// exporter's default sending queue (storage: in storageID when set; one
// consumer; queueSize requests) and push behind it, retrying every 10s.
func plainQueue(t *testing.T, set exporter.Settings, storageID *component.ID, queueSize int64, push func(context.Context, ptrace.Traces) error) exporter.Traces {
	t.Helper()
	q := otlpexporter.NewFactory().CreateDefaultConfig().(*otlpexporter.Config).QueueConfig
	qc := *q.Get()
	qc.StorageID = storageID
	qc.NumConsumers = 1
	qc.QueueSize = queueSize
	qc.Batch = configoptional.None[exporterhelper.BatchConfig]()
	r := configretry.NewDefaultBackOffConfig()
	r.InitialInterval = 10 * time.Second
	r.MaxElapsedTime = 0
	exp, err := exporterhelper.NewTraces(context.Background(), set, &struct{}{}, push,
		exporterhelper.WithQueue(configoptional.Some(qc)), exporterhelper.WithRetry(r))
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// TestPinnedPersistentQueueLayout pins missing.go and undecodable.go: the
// persistent queue keeps entry N under the key "N" (strconv of N) and its
// other records under keys that are not numbers (missingEntries counts a
// decimal key read and not found as a lost entry); an entry it cannot
// decode is logged "Failed unmarshalling item" at warn when the queue puts
// back, at start, the entry being sent at the stop, and "Failed to
// dispatch item" at debug when it takes a waiting entry to send
// (droppedEntry turns those lines into the warning it counts).
func TestPinnedPersistentQueueLayout(t *testing.T) {
	ctx := context.Background()
	storeID := storagetest.NewStorageID("pinned")
	store := storagetest.NewFileBackedStorageExtension("pinned", t.TempDir())
	host := storagetest.NewStorageHost().WithExtension(storeID, store)
	set := exportertest.NewNopSettings(component.MustNewType("otlp_grpc"))

	// A queue of three entries: the first being sent (refused, waiting to
	// be retried) when it stops, the others waiting.
	entered := make(chan struct{}, 16)
	first := plainQueue(t, set, &storeID, 100, func(context.Context, ptrace.Traces) error {
		entered <- struct{}{}
		return errors.New("upstream unavailable") // retryable
	})
	if err := first.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := first.ConsumeTraces(ctx, spansOf(2, func(int) string { return "op" })); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	c, err := store.GetClient(ctx, component.KindExporter, set.ID, "traces")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string][]byte{}
	if err := c.(*storagetest.TestClient).Walk(ctx, func(k string, v []byte) ([]*storage.Operation, error) {
		stored[k] = v
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(stored))
	for i := range 3 {
		if v, ok := stored[strconv.Itoa(i)]; !ok || len(v) == 0 {
			t.Fatalf("exporterhelper's persistent queue no longer keeps entry %d under the key %q (its keys now: %q): "+
				"missing.go (missingEntries) counts a decimal key read and not found as a lost entry; adapt it to the new layout", i, strconv.Itoa(i), keys)
		}
	}
	for _, k := range keys {
		if _, err := strconv.ParseUint(k, 10, 64); err == nil && k != "0" && k != "1" && k != "2" {
			t.Fatalf("exporterhelper's persistent queue keeps a record under the number %q besides its three entries (keys: %q): "+
				"missing.go would count it missing as an entry; adapt it to the new layout", k, keys)
		}
	}

	// The three entries garbled: the queue drops each with its lines.
	for i := range 3 {
		if err := c.Set(ctx, strconv.Itoa(i), []byte{0xff, 0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	set.Logger = zap.New(core)
	second := plainQueue(t, set, &storeID, 100, func(context.Context, ptrace.Traces) error { return nil })
	if err := second.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Shutdown(ctx) })
	dropped := func(msg string, level zapcore.Level) int {
		return logs.FilterMessage(msg).FilterLevelExact(level).Len()
	}
	deadline := time.Now().Add(30 * time.Second)
	for dropped("Failed unmarshalling item", zapcore.WarnLevel) < 1 || dropped("Failed to dispatch item", zapcore.DebugLevel) < 2 {
		if time.Now().After(deadline) {
			var lines []string
			for _, e := range logs.All() {
				lines = append(lines, e.Level.String()+" "+e.Message)
			}
			t.Fatalf("exporterhelper's persistent queue no longer logs the lines undecodable.go's droppedEntry turns into its counted warning "+
				"(want %q at warn for the entry being sent at the stop and %q at debug for each waiting one); it logged: %q",
				"Failed unmarshalling item", "Failed to dispatch item", lines)
		}
		time.Sleep(10 * time.Millisecond) // polling the log, bounded by the deadline
	}
	for msg, level := range droppedEntry {
		if dropped(msg, level) == 0 {
			t.Errorf("droppedEntry expects %q at %v, which the queue did not log", msg, level)
		}
	}
}

// TestPinnedQueueGauges pins queueprobe.go: exporterhelper reports its
// sending queue through the observable gauges queueSizeMetric and
// queueCapacityMetric, whose callbacks queueProbe runs to read the queue.
func TestPinnedQueueGauges(t *testing.T) {
	ctx := context.Background()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(ctx) })
	probe := newQueueProbe()
	set := exportertest.NewNopSettings(component.MustNewType("otlp_grpc"))
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.MeterProvider = probe.meterProvider(set.MeterProvider)
	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	exp := plainQueue(t, set, nil, 7, func(context.Context, ptrace.Traces) error {
		entered <- struct{}{}
		<-release
		return nil
	})
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(ctx) })
	t.Cleanup(func() { close(release) }) // before the Shutdown, which waits for the send
	for _, name := range []string{queueSizeMetric, queueCapacityMetric} {
		if _, err := tel.GetMetric(name); err != nil {
			t.Fatalf("exporterhelper no longer reports its sending queue as %q (%v): queueprobe.go reads the queue's depth from that gauge's callback; adapt it", name, err)
		}
	}
	if !probe.readable() {
		t.Fatalf("queueProbe did not catch the gauges %q and %q with their callbacks: exporterhelper changed how it makes them; adapt queueprobe.go", queueSizeMetric, queueCapacityMetric)
	}
	for range 3 {
		if err := exp.ConsumeTraces(ctx, spansOf(1, func(int) string { return "op" })); err != nil {
			t.Fatal(err)
		}
	}
	<-entered // one request being sent, two waiting: the queue counts all three until sent
	if size, capacity := probe.read(); size != 3 || capacity != 7 {
		t.Fatalf("queueProbe read size %d, capacity %d from exporterhelper's gauges, want 3 of 7: what %q or %q report changed; adapt queueprobe.go",
			size, capacity, queueSizeMetric, queueCapacityMetric)
	}
}
