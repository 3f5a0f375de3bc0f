package datadir

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/recovered"
)

// CheckCommand is the hidden command that checks one storage file
// (CheckFile) in a child process: `PROGRAM __check-storage FILE`.
// doubletake's command line has it; SelfChecker runs it.
const CheckCommand = "__check-storage"

// SelfChecker checks each file in a child process: this program, run
// with CheckCommand. Only a program whose command line has that command
// (doubletake's) can use it.
func SelfChecker() (Checker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to check storage files in a child process: %w", err)
	}
	return ChildChecker(exe, CheckCommand), nil
}

// MoveFileStorage makes file_storage's directory dir (an earlier
// version's, or an earlier config's) safe to leave: it checks every
// storage file there and salvages the damaged ones (Recover, one warn
// line each on logger), then moves each file's data into to (Migrate,
// one info line each). log_storage runs it at its Start, with its
// directory locked, before any component opens a client. An error means
// the gateway must not start: a file could not be salvaged, read or
// imported, or a client holds data in both stores.
func MoveFileStorage(ctx context.Context, dir string, to Target, check Checker, journal recovered.JournalSalvager, logger *zap.Logger) error {
	err := Recover(ctx, dir, check, journal, func(msg string, f recovered.File) {
		logger.Warn(msg, zap.String("file", f.Path), zap.String("kept", f.MovedTo), zap.String("store", f.Store),
			zap.Int64("salvaged_items", f.Salvaged), zap.Int64("lost_items", f.Lost), zap.Int64("lost_entries", f.LostEntries), zap.Bool("lost_uncounted", f.LostUncounted))
	})
	if err != nil {
		return err
	}
	return Migrate(dir, to, func(msg string, m Migrated) {
		logger.Info(msg, zap.String("file", m.File), zap.String("client_dir", m.Client), zap.String("kept", m.KeptAs), zap.Int("keys", m.Keys))
	})
}
