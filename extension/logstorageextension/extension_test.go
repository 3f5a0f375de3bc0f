package logstorageextension

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doubletake/doubletake/extension/logstorageextension/internal/metadatatest"
	"github.com/doubletake/doubletake/internal/dirlock"
)

// startExtension starts log_storage in dir with 4 KiB segments, its
// telemetry in tt and its log in the observer it returns.
func startExtension(t *testing.T, dir string, tt *componenttest.Telemetry) (*logStorage, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.Directory = dir
	cfg.SegmentBytes = 4096
	e, err := newExtension(set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e, logs
}

func getClient(t *testing.T, e storage.Extension, kind component.Kind, id component.ID, name string) storage.Client {
	t.Helper()
	c, err := e.GetClient(context.Background(), kind, id, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var exporterID = component.MustNewIDWithName("otlp_grpc", "backend")

// Through the extension, what opening a client cut is logged (an error
// naming where the damaged bytes were kept, a warning for a torn tail)
// and counted in otelcol_log_storage_discarded_bytes by client and
// reason; compaction is counted in otelcol_log_storage_compacted_bytes.
func TestDiscardedReported(t *testing.T) {
	ctx := context.Background()
	tt := componenttest.NewTelemetry()
	defer func() {
		if err := tt.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	base := t.TempDir()
	e, logs := startExtension(t, base, tt)
	sc := getClient(t, e, component.KindExporter, exporterID, "logs")
	for i := range 60 {
		if err := sc.Set(ctx, fmt.Sprintf("k%03d", i), val(i, 200)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cn := ClientName(component.KindExporter, exporterID, "logs")
	dir := ClientDir(base, cn)
	// Damage in segment 1, a torn tail in the newest.
	first := filepath.Join(dir, segName(1))
	offs := records(t, first)
	cutAt := offs[len(offs)/2]
	damaged := offs[len(offs)/2+1] - cutAt // that record only: the next one is read again
	flipBit(t, first, cutAt+recHeader+2, 0)
	nums, _, err := listSegments(osFS{}, dir)
	if err != nil || len(nums) < 3 {
		t.Fatalf("segments %v, %v", nums, err)
	}
	newest := filepath.Join(dir, segName(nums[len(nums)-1]))
	// A write cut short past what the client had written (its mark): a
	// header claiming 200 bytes, 92 of them there.
	nf, err := os.OpenFile(newest, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(binary.LittleEndian.AppendUint32(nil, 200), make([]byte, 96)...)
	torn[8] = opSet
	if _, err := nf.Write(torn); err != nil {
		t.Fatal(err)
	}
	nf.Close()

	sc = getClient(t, e, component.KindExporter, exporterID, "logs")
	client := attribute.String("client", cn)
	metadatatest.AssertEqualLogStorageDiscardedBytes(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: attribute.NewSet(client, attribute.String("reason", "damaged")), Value: damaged},
		{Attributes: attribute.NewSet(client, attribute.String("reason", "torn")), Value: 100},
	}, metricdatatest.IgnoreTimestamp())
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 1 {
		t.Fatalf("%d errors logged: %v", len(errs), errs)
	}
	f := errs[0].ContextMap()
	kept, _ := f["kept_as"].(string)
	if f["client"] != cn || f["segment"] != first || f["offset"] != cutAt || f["bytes"] != damaged || !strings.HasPrefix(kept, first+".damaged-") {
		t.Fatalf("the error logged: %v", f)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatal(err)
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 1 || warns[0].ContextMap()["segment"] != newest || warns[0].ContextMap()["bytes"] != int64(100) {
		t.Fatalf("warnings logged: %v", warns)
	}

	// The queue's pattern compacts the segment of a value that stays.
	for i := range 100 {
		if err := sc.Batch(ctx, storage.SetOperation("item", val(i, 1000)), storage.SetOperation("wi", []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
		if err := sc.Delete(ctx, "item"); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := tt.GetMetric("otelcol_log_storage_compacted_bytes")
	if err != nil {
		t.Fatal(err)
	}
	dps := m.Data.(metricdata.Sum[int64]).DataPoints
	if want := attribute.NewSet(client); len(dps) != 1 || dps[0].Value <= 0 || !dps[0].Attributes.Equals(&want) {
		t.Fatalf("compacted bytes: %+v", dps)
	}
}

// A compaction that fails is logged once, until compacting works again.
func TestCompactionFailureLogged(t *testing.T) {
	ctx := context.Background()
	steps, at := compactionSteps(t)
	base := t.TempDir()
	e, logs := startExtension(t, base, componenttest.NewTelemetry())
	sc := getClient(t, e, component.KindExporter, exporterID, "logs")
	for _, s := range steps[:at] {
		if err := sc.Batch(ctx, s.ops...); err != nil {
			t.Fatal(err)
		}
	}
	cn := ClientName(component.KindExporter, exporterID, "logs")
	nums, _, err := listSegments(osFS{}, ClientDir(base, cn))
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(ClientDir(base, cn), segName(nums[len(nums)-1]+1))
	if err := os.Mkdir(next, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := sc.Batch(ctx, steps[at].ops...); err != nil {
		t.Fatal(err)
	}
	// Failing again, not logged again.
	if err := sc.Set(ctx, "meta", []byte{1}); err != nil {
		t.Fatal(err)
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Message, "Compacting failed") || errs[0].ContextMap()["client"] != cn || !strings.Contains(fmt.Sprint(errs[0].ContextMap()["error"]), "file exists") {
		t.Fatalf("logged: %v", errs)
	}
	if err := os.Remove(next); err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A client's directory is named as file_storage names its file for the
// same client (so that Import can take a file_storage file's data), a
// name too long for a file hashed as file_storage hashes it.
func TestClientDirNames(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		kind component.Kind
		id   component.ID
		name string
		want string // the directory's name, when not checked against file_storage alone
	}{
		{component.KindExporter, component.MustNewID("otlp_grpc"), "logs", "exporter_otlp_grpc__logs"},
		{component.KindReceiver, component.MustNewIDWithName("filelog", "a/b"), "", "receiver_filelog_a~002Fb"},
		{component.KindProcessor, component.MustNewIDWithName("dedup", "x"), "journal/traces ü", "processor_dedup_x_journal~002Ftraces~0020~00FC"},
		{component.KindExtension, component.MustNewID("guard"), long, ""},
		{component.KindConnector, component.MustNewID("count"), "a~b", "connector_count__a~007Eb"},
	} {
		base := t.TempDir()
		e, _ := startExtension(t, base, componenttest.NewTelemetry())
		c := getClient(t, e, tc.kind, tc.id, tc.name)
		dir := ClientDir(base, ClientName(tc.kind, tc.id, tc.name))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Fatalf("%s: %v", dir, err)
		}
		ents, err := os.ReadDir(base)
		// The directory holds the clients and the lock file of the
		// extension that holds it.
		ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == dirlock.Name && e.Type().IsRegular() })
		if err != nil || len(ents) != 1 {
			t.Fatalf("%v, %v", ents, err)
		}
		if tc.want != "" && ents[0].Name() != tc.want {
			t.Fatalf("%q, want %q", ents[0].Name(), tc.want)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if fs := fileStorageName(t, tc.kind, tc.id, tc.name); fs != ents[0].Name() {
			t.Fatalf("%q, file_storage's file %q", ents[0].Name(), fs)
		}
	}
}

// fileStorageName is the name of the file file_storage creates for a
// client.
func fileStorageName(t *testing.T, kind component.Kind, id component.ID, name string) string {
	t.Helper()
	ctx := context.Background()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = t.TempDir()
	cfg.Compaction.Directory = cfg.Directory
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ext.Shutdown(ctx) }()
	c, err := ext.(storage.Extension).GetClient(ctx, kind, id, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(cfg.Directory)
	if err != nil || len(ents) != 1 {
		t.Fatalf("file_storage made %v, %v", ents, err)
	}
	return ents[0].Name()
}

// A name longer than 200 bytes, which file_storage keeps up to 255, is
// hashed here: the client's directory and its .importing sibling stay
// within a file name's 255 bytes.
func TestClientDirHashedWithRoomForImport(t *testing.T) {
	base := t.TempDir()
	if got := ClientDir(base, strings.Repeat("n", 200)); got != filepath.Join(base, strings.Repeat("n", 200)) {
		t.Fatalf("200 bytes: %s", got)
	}
	cn := ClientName(component.KindExporter, exporterID, strings.Repeat("n", 220))
	if len(cn) != 247 {
		t.Fatalf("a name of %d bytes", len(cn))
	}
	dir := ClientDir(base, cn)
	sum := sha256.Sum256([]byte(cn))
	if filepath.Base(dir) != hex.EncodeToString(sum[:]) {
		t.Fatalf("%s: not the name's SHA-256", dir)
	}
	if err := Import(dir, map[string][]byte{"k": []byte("v")}, 0); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, dir, options{segmentBytes: DefaultSegmentBytes})
	defer closeClient(t, c)
	checkState(t, c, map[string][]byte{"k": []byte("v")})
}

// A client open is not opened again until it is closed; closing it
// twice frees its name once; a closed client returns errors.
func TestGetClientOnce(t *testing.T) {
	ctx := context.Background()
	e, _ := startExtension(t, t.TempDir(), componenttest.NewTelemetry())
	c1 := getClient(t, e, component.KindExporter, exporterID, "logs")
	if err := c1.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetClient(ctx, component.KindExporter, exporterID, "logs"); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Fatalf("a second client for the same name: %v", err)
	}
	// Another name is another client.
	other := getClient(t, e, component.KindExporter, exporterID, "traces")
	if v, err := other.Get(ctx, "k"); err != nil || v != nil {
		t.Fatalf("another client sees %q, %v", v, err)
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Get(ctx, "k"); err == nil {
		t.Fatal("a closed client read")
	}
	if err := c1.Set(ctx, "k", nil); err == nil {
		t.Fatal("a closed client wrote")
	}
	c2 := getClient(t, e, component.KindExporter, exporterID, "logs")
	if v, err := c2.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("reopened: %q, %v", v, err)
	}
	// Closing the first client again does not free the second's name.
	if err := c1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetClient(ctx, component.KindExporter, exporterID, "logs"); err == nil {
		t.Fatal("a second client for the same name after the first was closed twice")
	}
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// The extension made by its factory creates its directory at Start, in a
// temporary directory (the generated lifecycle test would write into the
// source tree), and a Start where the directory cannot be fails.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Directory = filepath.Join(t.TempDir(), "a", "b")
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(cfg.Directory); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("the directory: %v, %v", st, err)
	}
	c := getClient(t, ext.(storage.Extension), component.KindExporter, exporterID, "")
	if err := c.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ext.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = f.CreateDefaultConfig().(*Config)
	cfg.Directory = filepath.Join(file, "sub")
	ext, err = f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err == nil {
		t.Fatal("started in a directory under a file")
	}
	if err := ext.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		mutate func(*Config)
		err    string
	}{
		{func(c *Config) { c.Directory = "/d" }, ""},
		{func(*Config) {}, "directory must be set"},
		{func(c *Config) { c.Directory, c.SegmentBytes = "/d", 4095 }, "segment_bytes must be between 4096 and 1073741824, not 4095"},
		{func(c *Config) { c.Directory, c.SegmentBytes = "/d", 4096 }, ""},
		{func(c *Config) { c.Directory, c.SegmentBytes = "/d", 1<<30 }, ""},
		{func(c *Config) { c.Directory, c.SegmentBytes = "/d", 1<<30+1 }, "segment_bytes must be between 4096 and 1073741824, not 1073741825"},
		{func(c *Config) { c.SegmentBytes = 0 }, "directory must be set\nsegment_bytes must be between 4096 and 1073741824, not 0"},
	} {
		cfg := createDefaultConfig()
		c.mutate(cfg)
		err := cfg.Validate()
		if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("got %v, want %q", err, c.err)
		}
	}
}

func TestConfigLoadsFromYAML(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   component.ID
		want Config
		err  string
	}{
		{component.NewID(Type), Config{Directory: "/var/lib/otelcol/log", SegmentBytes: DefaultSegmentBytes, ReadCacheBytes: DefaultReadCacheBytes}, ""},
		{component.NewIDWithName(Type, "custom"), Config{Directory: "/var/lib/otelcol/queue", FSync: true, SegmentBytes: 1 << 20, ReadCacheBytes: 0}, ""},
		{component.NewIDWithName(Type, "small"), Config{Directory: "/var/lib/otelcol/log", SegmentBytes: 100, ReadCacheBytes: DefaultReadCacheBytes}, "segment_bytes must be between 4096 and 1073741824, not 100"},
	} {
		sub, err := cm.Sub(tc.id.String())
		if err != nil {
			t.Fatal(err)
		}
		cfg := createDefaultConfig()
		if err := sub.Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
		if *cfg != tc.want {
			t.Fatalf("%s: %+v, want %+v", tc.id, *cfg, tc.want)
		}
		err = confmap.Validate(cfg)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Fatalf("%s: %v, want %q", tc.id, err, tc.err)
		}
	}
}
