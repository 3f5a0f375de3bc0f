package datadir

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doubletake/doubletake/extension/logstorageextension"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// TestMoveFileStorageAtStart: log_storage, started with
// file_storage_directory and MoveFileStorage as its mover (as the
// distribution builds it), checks file_storage's files in a child
// process, salvages a damaged queue file (a warn line saying what was
// lost), moves every file's data into its clients (an info line each),
// keeps the files aside, and then serves what was moved; a second start
// finds nothing more to do and says nothing.
func TestMoveFileStorageAtStart(t *testing.T) {
	dataDir := t.TempDir()
	queueDir, logDir := filepath.Join(dataDir, "queue"), filepath.Join(dataDir, "log")
	q, j := queueClient, journalClient
	q.kv, j.kv = queueData(t), journalData(t)
	writeFileStorage(t, queueDir, q, j)
	damaged := filepath.Join(queueDir, q.file())
	truncateTo(t, damaged, 0.6)

	start := func() *observer.ObservedLogs {
		t.Helper()
		core, logs := observer.New(zapcore.InfoLevel)
		set := extensiontest.NewNopSettings(logstorageextension.Type)
		set.Logger = zap.New(core)
		f := logstorageextension.NewFactory(logstorageextension.WithFileStorageMover(
			func(ctx context.Context, dir string, to logstorageextension.Clients, logger *zap.Logger) error {
				return MoveFileStorage(ctx, dir, to, childCheck(t), dedupprocessor.SalvageJournal, logger)
			}))
		cfg := f.CreateDefaultConfig().(*logstorageextension.Config)
		cfg.Directory, cfg.FileStorageDirectory = logDir, queueDir
		ext, err := f.Create(context.Background(), set, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return logs
	}
	logs := start()

	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 1 || !strings.HasPrefix(warns[0].Message, "damaged storage file "+damaged) || warns[0].ContextMap()["file"] != damaged || warns[0].ContextMap()["store"] != "queue" {
		t.Fatalf("want one warn line for the damaged %s, got %+v", damaged, warns)
	}
	kept, _ := warns[0].ContextMap()["kept"].(string)
	if _, err := os.Stat(kept); err != nil || !strings.Contains(kept, DamagedMark) {
		t.Errorf("the damaged file was not kept aside as %q: %v", kept, err)
	}
	infos := logs.FilterLevelExact(zapcore.InfoLevel).FilterMessageSnippet("migrated file_storage file").All()
	if len(infos) != 2 {
		t.Fatalf("want an info line per file moved, got %+v", logs.All())
	}
	for _, c := range []client{q, j} {
		if _, err := os.Stat(filepath.Join(queueDir, c.file())); !os.IsNotExist(err) {
			t.Errorf("%s is still in %s (%v)", c.file(), queueDir, err)
		}
		if m, _ := filepath.Glob(filepath.Join(queueDir, c.file()+MigratedMark+"*")); len(m) != 1 {
			t.Errorf("%s kept as %v, want one %s-TIME", c.file(), m, MigratedMark)
		}
	}
	// The journal moved whole; the queue as salvaged (what the kept
	// file_storage file holds).
	var salvage map[string][]byte
	for _, in := range infos {
		if in.ContextMap()["file"] == damaged {
			var err error
			if salvage, err = readBoltFile(in.ContextMap()["kept"].(string)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(salvage) == 0 || len(salvage) >= len(q.kv) {
		t.Fatalf("the salvage holds %d keys of the %d written", len(salvage), len(q.kv))
	}
	q.kv = salvage
	assertLogStorage(t, logDir, q, j)

	if again := start(); again.Len() != 0 {
		t.Errorf("a second start logged %+v", again.All())
	}
}
