package logstorageextension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// at the end of the test: a filesystem that really fills. The tests run
// as root (the README's test command does); without a mount they fail.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs on %s (the full-disk tests need root): %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fullDiskRun drives the collector's persistent queue over a storage
// extension on a small tmpfs, as the gateway's exporter does: the
// upstream away while a sender fills the disk, then back (or the disk
// freed by hand), and checks that every request the queue acknowledged
// is delivered, once.
type fullDiskRun struct {
	t       *testing.T
	mnt     string
	factory extension.Factory
	cfg     func(dir string) component.Config

	mu        sync.Mutex
	up        bool
	delivered map[int]int
	got       chan int
	empty     int // empty requests the queue sent
}

func (r *fullDiskRun) start(ctx context.Context) (exporter.Logs, extension.Extension) {
	t := r.t
	storageID := component.NewID(r.factory.Type())
	ext, err := r.factory.Create(ctx, extensiontest.NewNopSettings(r.factory.Type()), r.cfg(filepath.Join(r.mnt, "data")))
	if err != nil {
		t.Fatal(err)
	}
	h := host{ext: map[component.ID]component.Component{storageID: ext}}
	if err := ext.Start(ctx, h); err != nil {
		t.Fatal(err)
	}
	set := exportertest.NewNopSettings(exportertest.NopType)
	set.ID = component.MustNewIDWithName("otlp_grpc", "backend")
	qCfg := exporterhelper.NewDefaultQueueConfig()
	qCfg.StorageID = &storageID
	qCfg.NumConsumers = 1
	qCfg.QueueSize = 1 << 20 // the disk, not the queue's own bound, fills
	qCfg.Batch = configoptional.None[exporterhelper.BatchConfig]()
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval, retry.MaxInterval, retry.MaxElapsedTime = time.Millisecond, 5*time.Millisecond, 0
	exp, err := exporterhelper.NewLogs(ctx, set, &struct{}{}, func(_ context.Context, ld plog.Logs) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.up {
			return errors.New("upstream away")
		}
		if ld.LogRecordCount() == 0 {
			// An entry the queue numbered and never stored (it
			// advances its write index before the write that was
			// refused) is read back empty: nothing to deliver.
			r.empty++
			return nil
		}
		i := requestNumber(t, ld)
		r.delivered[i]++
		r.got <- i
		return nil
	}, exporterhelper.WithQueue(configoptional.Some(qCfg)), exporterhelper.WithRetry(retry),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, h); err != nil {
		t.Fatal(err)
	}
	return exp, ext
}

// fill sends requests from next on until the queue has refused refusals
// of them in a row, most at most; it returns the numbers acknowledged
// and the next.
func (r *fullDiskRun) fill(ctx context.Context, exp exporter.Logs, next, refusals, most int) (acked []int, _ int) {
	inARow := 0
	for end := next + most; inARow < refusals && next < end; {
		if err := exp.ConsumeLogs(ctx, logsRequest(next)); err != nil {
			inARow++
			if strings.Contains(err.Error(), "queue is full") {
				r.t.Fatalf("the queue's own bound refused request %d: %v", next, err)
			}
		} else {
			acked = append(acked, next)
			inARow = 0
		}
		next++
	}
	return acked, next
}

// waitDelivered waits until every request in acked is delivered, and
// returns how many are not when none has been for 20 s.
func (r *fullDiskRun) waitDelivered(acked []int) int {
	r.t.Helper()
	for {
		r.mu.Lock()
		missing := 0
		for _, i := range acked {
			if r.delivered[i] == 0 {
				missing++
			}
		}
		r.mu.Unlock()
		if missing == 0 {
			return 0
		}
		select {
		case <-r.got:
		case <-time.After(20 * time.Second):
			return missing
		}
	}
}

func (r *fullDiskRun) checkOnce(e fullDiskEngine, acked []int) {
	r.t.Helper()
	report := r.t.Errorf
	if e.comparison {
		report = r.t.Logf
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[int]bool{}
	for _, i := range acked {
		want[i] = true
	}
	for i, n := range r.delivered {
		switch {
		case !want[i]:
			report("%s: request %d delivered, never acknowledged", e.name, i)
		case n != 1:
			report("%s: request %d delivered %d times", e.name, i, n)
		}
	}
}

// verdict fails the test when acknowledged requests were not delivered,
// or logs it for a comparison engine; it says whether none was missing.
func (r *fullDiskRun) verdict(e fullDiskEngine, when string, acked []int, missing int) bool {
	r.t.Helper()
	switch {
	case missing == 0:
		return true
	case e.comparison:
		r.t.Logf("%s (comparison) %s: %d of %d acknowledged requests never delivered", e.name, when, missing, len(acked))
	default:
		r.t.Errorf("%s %s: %d of %d acknowledged requests never delivered", e.name, when, missing, len(acked))
	}
	return false
}

type fullDiskEngine struct {
	name string
	// comparison: the engine is measured, not held to the contract
	// (file_storage: its losses are logged, for the record).
	comparison bool
	factory    extension.Factory
	cfg        func(dir string) component.Config
}

func fullDiskEngines() []fullDiskEngine {
	return []fullDiskEngine{
		{"log_storage", false, NewFactory(), func(dir string) component.Config {
			cfg := createDefaultConfig()
			cfg.Directory = dir // segments (64 MiB) larger than the filesystem
			return cfg
		}},
		{"file_storage", true, filestorage.NewFactory(), func(dir string) component.Config {
			cfg := filestorage.NewFactory().CreateDefaultConfig().(*filestorage.Config)
			cfg.Directory, cfg.CreateDirectory = dir, true
			return cfg
		}},
	}
}

// The upstream away fills the disk: the queue refuses new requests
// (retryably) and loses none it took; the upstream back drains it, and
// once drained the queue takes new requests again.
func TestFullDiskUpstreamReturns(t *testing.T) {
	for _, e := range fullDiskEngines() {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			r := &fullDiskRun{t: t, mnt: mountTmpfs(t, 8<<20), factory: e.factory, cfg: e.cfg, delivered: map[int]int{}, got: make(chan int, 1<<16)}
			exp, ext := r.start(ctx)
			acked, next := r.fill(ctx, exp, 0, 50, 100_000)
			if len(acked) < 1000 {
				t.Fatalf("only %d requests taken before the disk was full", len(acked))
			}
			r.mu.Lock()
			r.up = true
			r.mu.Unlock()
			if r.verdict(e, "drained", acked, r.waitDelivered(acked)) {
				// Drained: new requests are taken again.
				more, _ := r.fill(ctx, exp, next, 1, 1000)
				if len(more) < 1000 {
					t.Fatalf("after draining, %d of 1000 requests taken", len(more))
				}
				acked = append(acked, more...)
				r.verdict(e, "after draining", acked, r.waitDelivered(acked))
			}
			if err := exp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ext.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			r.checkOnce(e, acked)
			t.Logf("%s: %d acknowledged, %d delivered, %d empty", e.name, len(acked), len(r.delivered), r.empty)
		})
	}
}

// The disk freed by hand (another file removed) while the upstream is
// still away: new requests are taken again, and everything taken is
// delivered once the upstream is back.
func TestFullDiskFreedByHand(t *testing.T) {
	for _, e := range fullDiskEngines() {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			mnt := mountTmpfs(t, 10<<20)
			ballast := filepath.Join(mnt, "ballast")
			if err := os.WriteFile(ballast, make([]byte, 4<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			r := &fullDiskRun{t: t, mnt: mnt, factory: e.factory, cfg: e.cfg, delivered: map[int]int{}, got: make(chan int, 1<<16)}
			exp, ext := r.start(ctx)
			acked, next := r.fill(ctx, exp, 0, 50, 100_000)
			if err := os.Remove(ballast); err != nil {
				t.Fatal(err)
			}
			more, _ := r.fill(ctx, exp, next, 50, 100_000)
			if len(more) < 1000 {
				t.Fatalf("after 4 MiB were freed, %d requests taken", len(more))
			}
			acked = append(acked, more...)
			r.mu.Lock()
			r.up = true
			r.mu.Unlock()
			r.verdict(e, "drained", acked, r.waitDelivered(acked))
			if err := exp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ext.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			r.checkOnce(e, acked)
			t.Logf("%s: %d acknowledged, %d delivered, %d empty", e.name, len(acked), len(r.delivered), r.empty)
		})
	}
}

// A full data dir is visible and quiet: one warn line when new data
// starts to be refused and one when it is taken again, none per refused
// write; otelcol_log_storage_full, _refused_writes and _free_bytes, and
// the state the status page reads (storagestate).
func TestFullDiskReported(t *testing.T) {
	ctx := context.Background()
	mnt := mountTmpfs(t, 4<<20)
	tt := componenttest.NewTelemetry()
	e, logs := startExtension(t, filepath.Join(mnt, "data"), tt)
	sc := getClient(t, e, component.KindExporter, exporterID, "logs")
	cn := ClientName(component.KindExporter, exporterID, "logs")
	value := make([]byte, 16<<10)
	var i, refused int
	for ; refused < 20; i++ {
		err := sc.Batch(ctx, storage.SetOperation("meta", []byte{byte(i)}), storage.SetOperation(strconv.Itoa(i), value))
		switch {
		case err == nil:
		case IsFull(err):
			refused++
		default:
			t.Fatalf("write %d: %v, not a full data dir's refusal", i, err)
		}
	}
	st := e.StorageState()
	if !st.Full() || !slices.Equal(st.FullClients, []string{cn}) || st.RefusedWrites != int64(refused) || st.FreeBytes < 0 || st.FreeBytes > 1<<20 {
		t.Fatalf("state when full: %+v", st)
	}
	got, err := tt.GetMetric("otelcol_log_storage_full")
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Data.(metricdata.Gauge[int64]).DataPoints; len(v) != 1 || v[0].Value != 1 {
		t.Fatalf("otelcol_log_storage_full: %+v", v)
	}
	got, err = tt.GetMetric("otelcol_log_storage_refused_writes")
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Data.(metricdata.Sum[int64]).DataPoints; len(v) != 1 || v[0].Value != int64(refused) {
		t.Fatalf("otelcol_log_storage_refused_writes: %+v", v)
	}
	if _, err := tt.GetMetric("otelcol_log_storage_free_bytes"); err != nil {
		t.Fatal(err)
	}
	// Drained: every entry deleted, one a batch, as the queue does.
	for k := range i {
		if err := sc.Batch(ctx, storage.SetOperation("meta", []byte{byte(k)}), storage.DeleteOperation(strconv.Itoa(k))); err != nil {
			t.Fatalf("deleting entry %d on a full disk: %v", k, err)
		}
	}
	if err := sc.Set(ctx, strconv.Itoa(i), value); err != nil {
		t.Fatalf("after draining: %v", err)
	}
	if st := e.StorageState(); st.Full() {
		t.Fatalf("state after draining: %+v", st)
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 2 || !strings.HasPrefix(warns[0].Message, "The data dir is full") || !strings.HasPrefix(warns[1].Message, "The data dir has room again") {
		t.Fatalf("warn lines: %v", warns)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A data dir freed by hand while nothing writes is seen as having room
// again when its state is next read (the status page, the gauges), not
// only when the next request comes; a dir still full stays full.
func TestFullDiskFreedWhileIdle(t *testing.T) {
	ctx := context.Background()
	mnt := mountTmpfs(t, 8<<20)
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	e, logs := startExtension(t, filepath.Join(mnt, "data"), componenttest.NewTelemetry())
	sc := getClient(t, e, component.KindExporter, exporterID, "logs")
	value := make([]byte, 16<<10)
	for i, refused := 0, 0; refused < 5; i++ {
		err := sc.Set(ctx, strconv.Itoa(i), value)
		switch {
		case err == nil:
		case IsFull(err):
			refused++
		default:
			t.Fatalf("write %d: %v, not a full data dir's refusal", i, err)
		}
	}
	for range 3 {
		if st := e.StorageState(); !st.Full() {
			t.Fatalf("state read while still full: %+v", st)
		}
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if st := e.StorageState(); st.Full() {
		t.Fatalf("state read after 3 MiB were freed, nothing written since: %+v", st)
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 2 || !strings.HasPrefix(warns[1].Message, "The data dir has room again") {
		t.Fatalf("warn lines: %v", warns)
	}
	if err := sc.Set(ctx, "after", value); err != nil {
		t.Fatalf("a write after the state cleared: %v", err)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
