package logstorageextension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/dirlock"
)

// FileStorageMover moves the files of a file_storage directory into
// log_storage at Start (the extension's file_storage_directory): it checks
// each file, salvages a damaged one, imports each file's data into the
// log_storage client of the same name (to) and keeps the file aside,
// logging what it did on logger. An error stops the start. doubletake's
// distribution passes internal/datadir's; a build without one refuses to
// start while file_storage_directory holds files to move.
type FileStorageMover func(ctx context.Context, fileStorageDir string, to Clients, logger *zap.Logger) error

// Option configures the factory.
type Option func(*factoryOptions)

type factoryOptions struct {
	mover FileStorageMover
}

// WithFileStorageMover has the extensions the factory makes move
// file_storage_directory's files with m at Start.
func WithFileStorageMover(m FileStorageMover) Option {
	return func(o *factoryOptions) { o.mover = m }
}

// Clients is a log_storage directory as the target of a move from
// file_storage: each file_storage file (named after its client) becomes
// the client directory of the same name.
type Clients struct {
	Dir          string
	SegmentBytes int64 // 0: DefaultSegmentBytes
}

// ClientDir is the directory of the client whose file_storage file is
// named fileName: file_storage and log_storage name a client alike.
func (c Clients) ClientDir(fileName string) string { return ClientDir(c.Dir, fileName) }

// Import writes kv as the whole data of a new client at dir (Import).
func (c Clients) Import(dir string, kv map[string][]byte) error {
	return Import(dir, kv, c.SegmentBytes)
}

// prepare takes the directory for this process (an flock on
// DIRECTORY/LOCK holding its PID, released at Shutdown) and, when
// file_storage_directory is set, moves what file_storage left there into
// the clients before any component opens one: whatever config runs
// log_storage, the embedded default's or a --config's.
func (e *logStorage) prepare(ctx context.Context, host component.Host) error {
	dir := e.cfg.Directory
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("log_storage: directory %s is a file, not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("log_storage: %w", err)
	}
	lock, err := dirlock.Lock(dir)
	var held *dirlock.HeldError
	switch {
	case errors.As(err, &held):
		return fmt.Errorf("log_storage: directory %s is in use by another gateway%s; stop it or give this one another directory", dir, held.Holder())
	case err != nil:
		return fmt.Errorf("log_storage: directory %s: %w", dir, err)
	}
	e.lock = lock
	from := e.cfg.FileStorageDirectory
	if from == "" {
		return nil
	}
	for id := range host.GetExtensions() {
		if id.Type().String() == "file_storage" {
			// Its components may still read those files: moving their
			// data away would hide it from them.
			e.logger.Warn("file_storage_directory is not moved into log_storage: this config has a file_storage extension, which may still read its files; remove it from the config to have them moved",
				zap.String("file_storage_directory", from), zap.String("file_storage", id.String()))
			return nil
		}
	}
	if e.mover == nil {
		left, err := fileStorageFiles(from)
		if err != nil {
			return fmt.Errorf("log_storage: file_storage_directory %s: %w", from, err)
		}
		if len(left) > 0 {
			return fmt.Errorf("log_storage: file_storage_directory %s holds file_storage files (%s) and this build cannot check or move them (doubletake's can): run doubletake once on this directory, or move the files away", from, strings.Join(left, ", "))
		}
		return nil
	}
	if err := e.mover(ctx, from, Clients{Dir: dir, SegmentBytes: e.cfg.SegmentBytes}, e.logger); err != nil {
		return fmt.Errorf("log_storage: file_storage_directory %s: %w", from, err)
	}
	return nil
}

// release gives the directory back.
func (e *logStorage) release() {
	if e.lock != nil {
		_ = e.lock.Close()
		e.lock = nil
	}
}

// fileStorageFiles names the files a move would take from dir: regular
// files, not a dot file, nor one kept aside (damaged or migrated).
func fileStorageFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if e.Type().IsRegular() && !strings.HasPrefix(name, ".") && !strings.Contains(name, ".damaged-") && !strings.Contains(name, ".migrated-") {
			out = append(out, name)
		}
	}
	return out, nil
}
