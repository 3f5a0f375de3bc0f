package datadir

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	bolt "go.etcd.io/bbolt"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/xpdata/request"

	"github.com/doubletake/doubletake/extension/logstorageextension"
	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// client is one storage client: who asks for it and what it holds.
type client struct {
	kind component.Kind
	id   component.ID
	name string
	kv   map[string][]byte
}

// file is the name file_storage (and log_storage) gives the client.
func (c client) file() string { return logstorageextension.ClientName(c.kind, c.id, c.name) }

var (
	queueClient   = client{kind: component.KindExporter, id: component.MustNewIDWithName("dedup_otlp_grpc", "upstream"), name: "traces"}
	journalClient = client{kind: component.KindProcessor, id: component.MustNewID("dedup")}
	otherClient   = client{kind: component.KindExporter, id: component.MustNewIDWithName("otlp_http", "b~ck/up"), name: "metrics"}
)

// queueData is a persistent queue as exporterhelper v0.161 leaves it:
// entries 0 and 1 delivered (deleted), 2 being sent, 3 to 39 queued, 50
// spans each.
func queueData(t testing.TB) map[string][]byte {
	t.Helper()
	kv := map[string][]byte{}
	m := queueMeta{read: 3, write: 40, dispatched: []uint64{2}}
	for i := m.read - 1; i < m.write; i++ {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for k := range 50 {
			s := spans.AppendEmpty()
			s.SetSpanID([8]byte{byte(i), byte(k), 1})
			s.SetTraceID([16]byte{byte(i), byte(k), 2})
			s.SetName(strings.Repeat("x", 20))
		}
		v, err := request.MarshalTraces(context.Background(), td)
		if err != nil {
			t.Fatal(err)
		}
		kv[fmt.Sprint(i)] = v
		m.items += 50
	}
	kv[queueMetaKey] = encodeQueueMeta(m)
	return kv
}

// journalData is the dedup processor's journal of the fixture (written by
// the processor through file_storage), read with bbolt.
func journalData(t testing.TB) map[string][]byte {
	t.Helper()
	db, err := bolt.Open(filepath.Join("testdata", "processor_dedup_"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kv := map[string][]byte{}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("default")).ForEach(func(k, v []byte) error {
			kv[string(k)] = slices.Clone(v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(kv) < 40 {
		t.Fatalf("the journal fixture holds %d keys, want its 40 segments and more", len(kv))
	}
	return kv
}

// otherData holds what no doubletake component writes: a value of many
// pages, an empty one, binary keys.
func otherData() map[string][]byte {
	big := make([]byte, 3<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	return map[string][]byte{"big": big, "empty": {}, "\x00\xff key": []byte("binary key"), "ü/ß": []byte("utf-8")}
}

// goneKeys are set and then deleted in every client: file_storage's file
// still holds them in freed pages, and they must not come back.
var goneKeys = []string{"gone/1", "gone/2", queueMetaKey + "-old"}

// writeFileStorage writes each client's data into dir through the contrib
// file_storage extension, as the collector's components do: in batches,
// keys deleted on the way.
func writeFileStorage(t testing.TB, dir string, clients ...client) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	cfg.CreateDirectory = true
	ctx := context.Background()
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		sc, err := ext.(storage.Extension).GetClient(ctx, c.kind, c.id, c.name)
		if err != nil {
			t.Fatal(err)
		}
		var ops []*storage.Operation
		for _, k := range goneKeys {
			ops = append(ops, storage.SetOperation(k, bytes.Repeat([]byte(k), 500)))
		}
		if err := sc.Batch(ctx, ops...); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
		for _, k := range slices.Sorted(maps.Keys(c.kv)) {
			ops = append(ops, storage.SetOperation(k, c.kv[k]))
			if len(ops) == 7 {
				if err := sc.Batch(ctx, ops...); err != nil {
					t.Fatal(err)
				}
				ops = ops[:0]
			}
		}
		for _, k := range goneKeys {
			ops = append(ops, storage.DeleteOperation(k))
		}
		if err := sc.Batch(ctx, ops...); err != nil {
			t.Fatal(err)
		}
		if err := sc.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := ext.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		if _, err := os.Stat(filepath.Join(dir, c.file())); err != nil {
			t.Fatalf("file_storage did not name the client's file as log_storage's ClientName: %v", err)
		}
	}
}

// assertLogStorage opens the clients through log_storage on dir, as the
// collector will, and checks that each holds exactly its data.
func assertLogStorage(t testing.TB, dir string, clients ...client) {
	t.Helper()
	f := logstorageextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*logstorageextension.Config)
	cfg.Directory = dir
	ctx := context.Background()
	ext, err := f.Create(ctx, extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ext.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	for _, c := range clients {
		sc, err := ext.(storage.Extension).GetClient(ctx, c.kind, c.id, c.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range slices.Sorted(maps.Keys(c.kv)) {
			v, err := sc.Get(ctx, k)
			if err != nil {
				t.Fatalf("%s: Get(%q): %v", c.file(), k, err)
			}
			if !bytes.Equal(v, c.kv[k]) {
				t.Errorf("%s: %q holds %d bytes, want the %d written through file_storage", c.file(), k, len(v), len(c.kv[k]))
			}
		}
		for _, k := range goneKeys {
			if v, err := sc.Get(ctx, k); err != nil || v != nil {
				t.Errorf("%s: deleted key %q came back: %d bytes, %v", c.file(), k, len(v), err)
			}
		}
		if err := sc.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// listing is every name under dir with its size and modification time.
func listing(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// names lists dir's entries.
func names(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func migrate(t testing.TB, queueDir, logDir string) ([]Migrated, error) {
	t.Helper()
	var got []Migrated
	err := Migrate(queueDir, logstorageextension.Clients{Dir: logDir}, func(msg string, m Migrated) {
		t.Log(msg)
		if !strings.Contains(msg, m.File) || !strings.Contains(msg, fmt.Sprintf("%d keys", m.Keys)) || !strings.Contains(msg, filepath.Base(m.KeptAs)) {
			t.Errorf("the line does not name the file, its keys and where it is kept: %s", msg)
		}
		got = append(got, m)
	})
	return got, err
}

// refuseChecks fails the test when Recover checks a file.
func refuseChecks(t testing.TB) Checker {
	return func(_ context.Context, path string) error {
		t.Errorf("Recover checked %s", path)
		return nil
	}
}

// TestMigrate: file_storage files written by the real extension (a
// queue, a journal, a client of values of every size) are checked by
// Recover, then migrated; log_storage then returns every value and none
// of the deleted keys; each file is kept, whole, as FILE.migrated-TIME;
// a second Migrate changes nothing and says nothing.
func TestMigrate(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	clients := []client{queueClient, journalClient, otherClient}
	clients[0].kv, clients[1].kv, clients[2].kv = queueData(t), journalData(t), otherData()
	writeFileStorage(t, queueDir, clients...)

	if err := Recover(context.Background(), queueDir, childCheck(t), dedupprocessor.SalvageJournal, func(msg string, _ recovered.File) {
		t.Errorf("Recover took a file file_storage just wrote as damaged: %s", msg)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := migrate(t, queueDir, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(clients) {
		t.Fatalf("%d files migrated, want %d", len(got), len(clients))
	}
	for _, c := range clients {
		i := slices.IndexFunc(got, func(m Migrated) bool { return m.File == filepath.Join(queueDir, c.file()) })
		if i < 0 {
			t.Errorf("%s: not migrated", c.file())
			continue
		}
		m := got[i]
		if m.Keys != len(c.kv) || m.Resumed || m.Client != filepath.Join(logDir, c.file()) {
			t.Errorf("%s: %+v; want %d keys imported into %s", c.file(), m, len(c.kv), filepath.Join(logDir, c.file()))
		}
		if !strings.HasPrefix(filepath.Base(m.KeptAs), c.file()+MigratedMark) || filepath.Dir(m.KeptAs) != queueDir {
			t.Errorf("%s: kept as %s", c.file(), m.KeptAs)
		}
		kept, err := readBoltFile(m.KeptAs)
		if err != nil || !maps.EqualFunc(kept, c.kv, bytes.Equal) {
			t.Errorf("%s: the kept file does not hold the data any more (%d keys, %v)", c.file(), len(kept), err)
		}
	}
	for _, n := range names(t, queueDir) {
		if !strings.Contains(n, MigratedMark) {
			t.Errorf("%s left in %s", n, queueDir)
		}
	}
	assertLogStorage(t, logDir, clients...)

	before, beforeLog := listing(t, queueDir), listing(t, logDir)
	again, err := migrate(t, queueDir, logDir)
	if err != nil || len(again) != 0 {
		t.Fatalf("the second Migrate: %+v, %v; want nothing done", again, err)
	}
	if after := listing(t, queueDir); !maps.Equal(before, after) {
		t.Errorf("the second Migrate changed %s:\n%v\n%v", queueDir, before, after)
	}
	if after := listing(t, logDir); !maps.Equal(beforeLog, after) {
		t.Errorf("the second Migrate changed %s:\n%v\n%v", logDir, beforeLog, after)
	}
}

// TestRecoverSkipsMigrated: the files Migrate kept and log_storage's
// client directories are not storage files to Recover (nor to the
// `__check-storage` child it runs): neither is checked nor salvaged. A
// FILE.migrating is: it holds the data until its import is done, and it
// is checked as what its name says (a queue here).
func TestRecoverSkipsMigrated(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	c := queueClient
	c.kv = queueData(t)
	writeFileStorage(t, queueDir, c)
	if _, err := migrate(t, queueDir, logDir); err != nil {
		t.Fatal(err)
	}
	// A kept file that fails every check: were it checked, it would be
	// salvaged.
	if err := os.WriteFile(filepath.Join(queueDir, c.file()+MigratedMark+"20250101T000000Z"), []byte("not bbolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dataDir)
	for _, dir := range []string{queueDir, logDir} {
		if err := Recover(context.Background(), dir, refuseChecks(t), dedupprocessor.SalvageJournal, func(msg string, _ recovered.File) { t.Errorf("salvaged: %s", msg) }); err != nil {
			t.Fatal(err)
		}
	}
	if after := listing(t, dataDir); !maps.Equal(before, after) {
		t.Errorf("Recover changed the data dir:\n%v\n%v", before, after)
	}

	// A file being imported is checked, as a queue.
	dir := t.TempDir()
	writeFileStorage(t, dir, c)
	staged := filepath.Join(dir, c.file()+MigratingSuffix)
	if err := os.Rename(filepath.Join(dir, c.file()), staged); err != nil {
		t.Fatal(err)
	}
	if k := kindOf(staged); !k.queue || k.signal != "traces" {
		t.Errorf("kindOf(%s) = %+v, want a traces queue", staged, k)
	}
	var checked []string
	if err := Recover(context.Background(), dir, func(_ context.Context, path string) error {
		checked = append(checked, path)
		return nil
	}, dedupprocessor.SalvageJournal, func(string, recovered.File) {}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(checked, []string{staged}) {
		t.Errorf("Recover checked %v, want %s", checked, staged)
	}
}

// TestMigrateResumesAfterImport: a start cut short after the import,
// before the file was kept (FILE.migrating and the client directory both
// there): the next Migrate only renames the file; the client directory is
// left as it is (its extra key shows it was not imported again).
func TestMigrateResumesAfterImport(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	c := queueClient
	c.kv = queueData(t)
	writeFileStorage(t, queueDir, c)
	staged := filepath.Join(queueDir, c.file()+MigratingSuffix)
	if err := os.Rename(filepath.Join(queueDir, c.file()), staged); err != nil {
		t.Fatal(err)
	}
	imported := maps.Clone(c.kv)
	imported["only/in/log_storage"] = []byte("x")
	if err := logstorageextension.Import(logstorageextension.ClientDir(logDir, c.file()), imported, 0); err != nil {
		t.Fatal(err)
	}
	got, err := migrate(t, queueDir, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Resumed || got[0].Keys != len(c.kv) || got[0].File != filepath.Join(queueDir, c.file()) {
		t.Fatalf("%+v; want one resumed migration of %d keys", got, len(c.kv))
	}
	if n := names(t, queueDir); len(n) != 1 || n[0] != filepath.Base(got[0].KeptAs) || !strings.HasPrefix(n[0], c.file()+MigratedMark) {
		t.Errorf("%s holds %v, want only the kept file", queueDir, n)
	}
	c.kv = imported
	assertLogStorage(t, logDir, c)
}

// TestMigrateImportCutShort: a start cut short during the import (the
// file renamed FILE.migrating, a half-written CLIENT.importing): the next
// Migrate imports the file whole.
func TestMigrateImportCutShort(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	c := journalClient
	c.kv = journalData(t)
	writeFileStorage(t, queueDir, c)
	if err := os.Rename(filepath.Join(queueDir, c.file()), filepath.Join(queueDir, c.file()+MigratingSuffix)); err != nil {
		t.Fatal(err)
	}
	half := logstorageextension.ClientDir(logDir, c.file()) + ".importing"
	if err := os.MkdirAll(half, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, fmt.Sprintf("%016x.log", 1)), []byte("DTLOG\x00\x01\ntorn"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := migrate(t, queueDir, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Resumed || got[0].Keys != len(c.kv) {
		t.Fatalf("%+v; want one import of %d keys", got, len(c.kv))
	}
	if n := names(t, logDir); !slices.Equal(n, []string{c.file()}) {
		t.Errorf("%s holds %v, want only the client", logDir, n)
	}
	assertLogStorage(t, logDir, c)
}

// TestMigrateRefusesDataInBothStores: a file_storage file with keys next
// to its client's log_storage directory, not one this code began to
// import: file_storage wrote it after an earlier migration (a downgrade
// ran). Both may hold undelivered data: Migrate stops, naming both, and
// changes nothing.
func TestMigrateRefusesDataInBothStores(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	c := queueClient
	c.kv = queueData(t)
	writeFileStorage(t, queueDir, c)
	client := logstorageextension.ClientDir(logDir, c.file())
	if err := logstorageextension.Import(client, map[string][]byte{"older": []byte("x")}, 0); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dataDir)
	got, err := migrate(t, queueDir, logDir)
	if err == nil {
		t.Fatalf("Migrate: %+v, no error", got)
	}
	path := filepath.Join(queueDir, c.file())
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), client) || !strings.Contains(err.Error(), fmt.Sprintf("%d keys", len(c.kv))) {
		t.Errorf("the error does not name the file, its keys and the client: %v", err)
	}
	if after := listing(t, dataDir); !maps.Equal(before, after) {
		t.Errorf("Migrate changed the data dir:\n%v\n%v", before, after)
	}
}

// TestMigrateEmptyFiles: a file of no bytes (bbolt's new file) and one
// file_storage opened but never wrote to hold nothing: they are kept
// aside, no client directory is made, and one next to its client's
// directory is no conflict.
func TestMigrateEmptyFiles(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	writeFileStorage(t, queueDir, journalClient) // no keys: only set and deleted
	if err := os.WriteFile(filepath.Join(queueDir, queueClient.file()), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := otherClient
	other.kv = map[string][]byte{"kept": []byte("in log_storage")}
	writeFileStorage(t, filepath.Join(dataDir, "other"), otherClient)
	if err := os.Rename(filepath.Join(dataDir, "other", other.file()), filepath.Join(queueDir, other.file())); err != nil {
		t.Fatal(err)
	}
	if err := logstorageextension.Import(logstorageextension.ClientDir(logDir, other.file()), other.kv, 0); err != nil {
		t.Fatal(err)
	}
	got, err := migrate(t, queueDir, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d files kept aside, want 3: %+v", len(got), got)
	}
	for _, m := range got {
		if m.Keys != 0 || m.Resumed || !strings.Contains(m.KeptAs, MigratedMark) {
			t.Errorf("%+v; want 0 keys, kept aside", m)
		}
	}
	if n := names(t, logDir); !slices.Equal(n, []string{other.file()}) {
		t.Errorf("%s holds %v, want only the client imported before", logDir, n)
	}
	for _, n := range names(t, queueDir) {
		if !strings.Contains(n, MigratedMark) {
			t.Errorf("%s left in %s", n, queueDir)
		}
	}
	assertLogStorage(t, logDir, other)
}

// TestMigrateSkipsDamaged: a queue file damaged (truncated) is moved
// aside by Recover, which salvages what it can into a fresh file; the
// salvage is migrated, the damaged file is left as it is.
func TestMigrateSkipsDamaged(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	c := queueClient
	c.kv = queueData(t)
	writeFileStorage(t, queueDir, c)
	path := filepath.Join(queueDir, c.file())
	truncateTo(t, path, 0.6)
	var salvaged []recovered.File
	if err := Recover(context.Background(), queueDir, childCheck(t), dedupprocessor.SalvageJournal, func(_ string, f recovered.File) { salvaged = append(salvaged, f) }); err != nil {
		t.Fatal(err)
	}
	if len(salvaged) != 1 || salvaged[0].Salvaged == 0 {
		t.Fatalf("Recover: %+v; want the truncated file salvaged", salvaged)
	}
	damaged, err := os.ReadFile(salvaged[0].MovedTo)
	if err != nil {
		t.Fatal(err)
	}
	salvage, err := readBoltFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := migrate(t, queueDir, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].File != path || got[0].Keys != len(salvage) {
		t.Fatalf("%+v; want the salvage of %s (%d keys) migrated, only", got, path, len(salvage))
	}
	if b, err := os.ReadFile(salvaged[0].MovedTo); err != nil || !bytes.Equal(b, damaged) {
		t.Errorf("the damaged file %s was changed or moved: %v", salvaged[0].MovedTo, err)
	}
	if n := names(t, logDir); !slices.Equal(n, []string{c.file()}) {
		t.Errorf("%s holds %v, want only the salvage's client", logDir, n)
	}
	c.kv = salvage
	assertLogStorage(t, logDir, c)
}

func truncateTo(t testing.TB, path string, frac float64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(float64(st.Size())*frac)); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateUnreadable: a file bbolt refuses (not a bbolt file, or a
// bucket file_storage never writes) stops Migrate with an error naming
// it; the file stays where it is and no client is made of it.
func TestMigrateUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"not bbolt", func(t *testing.T, path string) {
			b := make([]byte, 16384)
			r := rand.New(rand.NewPCG(3, 4))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"nested bucket", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("default"))
				if err != nil {
					return err
				}
				if err := b.Put([]byte("a"), []byte("1")); err != nil {
					return err
				}
				_, err = b.CreateBucket([]byte("inner"))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
			if err := os.MkdirAll(queueDir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(queueDir, queueClient.file())
			tc.write(t, path)
			got, err := migrate(t, queueDir, logDir)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("Migrate: %+v, %v; want an error naming %s", got, err, path)
			}
			t.Log(err)
			if n := names(t, queueDir); !slices.Equal(n, []string{queueClient.file()}) {
				t.Errorf("%s holds %v, want the file left as it was", queueDir, n)
			}
			if _, err := os.Stat(logDir); err == nil {
				t.Errorf("%s was made: %v", logDir, names(t, logDir))
			}
		})
	}
}
