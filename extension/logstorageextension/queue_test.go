package logstorageextension

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog"
)

// host gives components the storage extension, as the collector's does.
type host struct {
	ext map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.ext }

func logsRequest(i int) plog.Logs {
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	// Over a segment's worth in a few requests: segments roll, the
	// oldest are compacted.
	lr.Body().SetStr(fmt.Sprintf("request %d %s", i, strings.Repeat("x", 1500)))
	return ld
}

// requestNumber is the number logsRequest wrote in ld, -1 for what it
// did not write (the queue delivers an item it could not read empty).
func requestNumber(t *testing.T, ld plog.Logs) int {
	if ld.LogRecordCount() != 1 {
		t.Errorf("a request of %d log records", ld.LogRecordCount())
		return -1
	}
	body := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().Str()
	var i int
	if _, err := fmt.Sscanf(body, "request %d ", &i); err != nil {
		t.Errorf("a request no one sent: %.40q", body)
		return -1
	}
	return i
}

// The collector's persistent sending queue over log_storage: requests
// queued while the backend fails stay queued across a restart of the
// exporter and the extension, and every request is delivered exactly
// once; the queue's storage then holds no item.
func TestPersistentQueueAcrossRestart(t *testing.T) {
	const n, deliveredFirst = 60, 10
	ctx := context.Background()
	base := t.TempDir()
	storageID := component.NewID(Type)
	set := exportertest.NewNopSettings(exportertest.NopType)
	set.ID = component.MustNewIDWithName("otlp_grpc", "backend")
	qCfg := exporterhelper.NewDefaultQueueConfig()
	qCfg.StorageID = &storageID
	qCfg.NumConsumers = 1
	qCfg.Batch = configoptional.None[exporterhelper.BatchConfig]()
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval, retry.MaxInterval, retry.MaxElapsedTime = time.Millisecond, 5*time.Millisecond, 0

	var mu sync.Mutex
	delivered := map[int]int{}
	start := func(push func(context.Context, plog.Logs) error) (exporter.Logs, *logStorage) {
		t.Helper()
		cfg := createDefaultConfig()
		cfg.Directory, cfg.SegmentBytes = base, 4096
		ext, err := newExtension(extensiontest.NewNopSettings(Type), cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := host{ext: map[component.ID]component.Component{storageID: ext}}
		if err := ext.Start(ctx, h); err != nil {
			t.Fatal(err)
		}
		exp, err := exporterhelper.NewLogs(ctx, set, &struct{}{}, push,
			exporterhelper.WithQueue(configoptional.Some(qCfg)),
			exporterhelper.WithRetry(retry),
			exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Start(ctx, h); err != nil {
			t.Fatal(err)
		}
		return exp, ext
	}
	stop := func(exp exporter.Logs, ext *logStorage) {
		t.Helper()
		if err := exp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ext.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The backend takes the first requests, then fails until shutdown.
	failing := make(chan struct{})
	var once sync.Once
	exp, ext := start(func(_ context.Context, ld plog.Logs) error {
		mu.Lock()
		defer mu.Unlock()
		if len(delivered) < deliveredFirst {
			delivered[requestNumber(t, ld)]++
			return nil
		}
		once.Do(func() { close(failing) })
		return errors.New("backend down")
	})
	for i := range n {
		if err := exp.ConsumeLogs(ctx, logsRequest(i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-failing:
	case <-time.After(30 * time.Second):
		t.Fatal("the backend was never called after the first requests")
	}
	stop(exp, ext)

	// Restarted, the backend takes everything.
	got := make(chan int, n)
	exp, ext = start(func(_ context.Context, ld plog.Logs) error {
		i := requestNumber(t, ld)
		mu.Lock()
		delivered[i]++
		mu.Unlock()
		got <- i
		return nil
	})
	for range n - deliveredFirst {
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatalf("after the restart, %d requests of %d delivered", len(got), n-deliveredFirst)
		}
	}
	stop(exp, ext)

	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if delivered[i] != 1 {
			t.Errorf("request %d delivered %d times", i, delivered[i])
		}
	}
	if len(delivered) != n {
		t.Errorf("%d requests delivered, %d sent", len(delivered), n)
	}
	// The queue's storage holds its metadata, no item.
	c := mustOpen(t, ClientDir(base, ClientName(component.KindExporter, set.ID, "logs")), options{segmentBytes: 4096})
	defer closeClient(t, c)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.idx {
		if _, err := strconv.ParseUint(k, 10, 64); err == nil {
			t.Errorf("item %s is still stored", k)
		}
	}
	if len(c.idx) == 0 {
		t.Error("the queue's metadata is not stored")
	}
}
