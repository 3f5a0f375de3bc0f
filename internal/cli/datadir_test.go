package cli

import (
	"strings"
	"testing"

	"github.com/doubletake/doubletake/internal/distro"
)

// TestMigrationTarget: file_storage's data moves to log_storage only when
// the config stores in log_storage and no file_storage reads the files
// any more; the target is log_storage's directory.
func TestMigrationTarget(t *testing.T) {
	for _, c := range []struct {
		name, config string
		logDir       string // "": no migration
	}{
		{"log_storage only", "extensions:\n  health_check:\n  log_storage:\n    directory: /d/log\n    fsync: true\n", "/d/log"},
		{"file_storage still there", "extensions:\n  file_storage:\n    directory: /d/queue\n  log_storage:\n    directory: /d/log\n", ""},
		{"a named file_storage still there", "extensions:\n  file_storage/journal:\n    directory: /d/queue\n  log_storage:\n    directory: /d/log\n", ""},
		{"file_storage only", "extensions:\n  file_storage:\n    directory: /d/queue\n", ""},
		{"no storage", "extensions:\n  health_check:\n", ""},
		{"no extensions", "receivers:\n  otlp:\n", ""},
		{"log_storage without a directory", "extensions:\n  log_storage:\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, migrate, err := migrationTarget(c.config)
			if err != nil {
				t.Fatal(err)
			}
			if migrate != (c.logDir != "") || dir != c.logDir {
				t.Errorf("migrationTarget = %q, %t; want %q", dir, migrate, c.logDir)
			}
		})
	}
	if _, _, err := migrationTarget("extensions: [\n"); err == nil {
		t.Error("a config that is not YAML: no error")
	}

	// The embedded default: while it has file_storage, nothing moves; once
	// it stores in log_storage, the data goes to {DataDir}/log.
	o := distro.DefaultOptions()
	o.DataDir = "/data"
	config, err := distro.DefaultConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	dir, migrate, err := migrationTarget(config)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.Contains(config, "\n  file_storage:"):
		if migrate {
			t.Errorf("the default still has file_storage, yet its data would move to %s", dir)
		}
	case strings.Contains(config, "\n  log_storage:"):
		if !migrate || dir != "/data/log" {
			t.Errorf("the default stores in log_storage: migrationTarget = %q, %t; want /data/log", dir, migrate)
		}
	}
}
