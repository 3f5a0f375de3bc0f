package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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
// storage files, and in local mode opens the files the exporters will
// write. The lock is held while the returned file is open: the caller
// closes it once the collector has stopped (or at once on an error).
func prepareDataDir(o distro.Options) (lock *os.File, err error) {
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
	err = datadir.Recover(context.Background(), filepath.Join(o.DataDir, "queue"), datadir.ChildChecker(exe, checkStorageCommand),
		func(msg string, f recovered.File) {
			logger.Warn(msg, zap.String("file", f.Path), zap.String("kept", f.MovedTo), zap.String("store", f.Store),
				zap.Int64("salvaged_items", f.Salvaged), zap.Int64("lost_items", f.Lost), zap.Int64("lost_entries", f.LostEntries), zap.Bool("lost_uncounted", f.LostUncounted))
		})
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

// startLogger logs as the collector's default does, before it runs.
func startLogger() *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zapcore.InfoLevel)
	return zap.New(core)
}
