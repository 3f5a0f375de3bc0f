package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"

	"github.com/doubletake/doubletake/internal/datadir"
	"github.com/doubletake/doubletake/internal/distro"
	"github.com/doubletake/doubletake/internal/recovered"
)

// checkStorageCommand is the child that checks one storage file: bbolt
// may fault on a damaged file (SIGBUS, SIGSEGV), which no Go code can
// recover from, so the gateway checks each file in a process of its own
// and takes a crash as damage.
const checkStorageCommand = "__check-storage"

func newCheckStorageCommand() *cobra.Command {
	return &cobra.Command{
		Use:    checkStorageCommand + " FILE",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := datadir.CheckFile(args[0]); err != nil {
				return &ExitError{Code: ExitFindings, Err: err}
			}
			return nil
		},
	}
}

// prepareDataDir takes the data dir for this run, checks and salvages its
// storage files, moves file_storage's data to log_storage when config (the
// embedded default, rendered) stores in log_storage, and in local mode
// opens the files the exporters will write. The lock is held while the
// returned file is open: the caller closes it once the collector has
// stopped (or at once on an error).
func prepareDataDir(o distro.Options, config string) (lock *os.File, err error) {
	lock, err = datadir.Lock(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
			lock = nil
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("run: finding this program to check --data-dir: %w", err)
	}
	logger := startLogger()
	queueDir := filepath.Join(o.DataDir, "queue")
	err = datadir.Recover(context.Background(), queueDir, datadir.ChildChecker(exe, checkStorageCommand),
		func(msg string, f recovered.File) {
			logger.Warn(msg, zap.String("file", f.Path), zap.String("kept", f.MovedTo), zap.String("store", f.Store),
				zap.Int64("salvaged_items", f.Salvaged), zap.Int64("lost_items", f.Lost), zap.Int64("lost_entries", f.LostEntries), zap.Bool("lost_uncounted", f.LostUncounted))
		})
	if err != nil {
		_ = logger.Sync()
		return nil, fmt.Errorf("run: --data-dir %s: %w", o.DataDir, err)
	}
	logDir, migrate, err := migrationTarget(config)
	if err == nil && migrate {
		err = datadir.Migrate(queueDir, logDir, func(msg string, m datadir.Migrated) {
			logger.Info(msg, zap.String("file", m.File), zap.String("client_dir", m.Client), zap.String("kept", m.KeptAs), zap.Int("keys", m.Keys))
		})
	}
	_ = logger.Sync()
	if err != nil {
		return nil, fmt.Errorf("run: --data-dir %s: %w", o.DataDir, err)
	}
	if o.Upstream == "" {
		for _, name := range []string{"traces.jsonl", "logs.jsonl"} {
			if err := datadir.CheckWritable(filepath.Join(o.DataDir, name)); err != nil {
				return nil, fmt.Errorf("run: %w", err)
			}
		}
	}
	return lock, nil
}

// migrationTarget reads, from the rendered default config, log_storage's
// directory: file_storage's data (in {DataDir}/queue, where Recover looks)
// is moved there before the collector starts. migrate is false while the
// config still has a file_storage: it then still reads those files, and
// data moved away from it would reach no component.
func migrationTarget(config string) (logDir string, migrate bool, err error) {
	var doc struct {
		Extensions map[string]struct {
			Directory string `yaml:"directory"`
		} `yaml:"extensions"`
	}
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		return "", false, fmt.Errorf("reading the default config for its storage: %w", err)
	}
	for id := range doc.Extensions {
		if typ, _, _ := strings.Cut(id, "/"); typ == "file_storage" {
			return "", false, nil
		}
	}
	ls, ok := doc.Extensions["log_storage"]
	if !ok || ls.Directory == "" {
		return "", false, nil
	}
	return ls.Directory, true, nil
}

// startLogger logs as the collector's default does, before it runs.
func startLogger() *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zapcore.InfoLevel)
	return zap.New(core)
}
