package logstorageextension

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Default and bounds of segment_bytes.
const (
	DefaultSegmentBytes = 64 << 20
	// DefaultReadCacheBytes holds a second of a busy queue's entries.
	DefaultReadCacheBytes = 8 << 20
	minSegmentBytes       = 4096
	maxSegmentBytes       = 1 << 30
)

// Config is log_storage's configuration.
type Config struct {
	// Directory holds one directory per client. Created when absent.
	Directory string `mapstructure:"directory"`
	// FSync syncs every write to disk before it returns: what was
	// acknowledged then survives a power loss, not only a crash of the
	// process (every write reaches the kernel before it returns).
	FSync bool `mapstructure:"fsync"`
	// SegmentBytes is the size at which a client starts a new segment
	// file; a record larger than it gets a segment of its own.
	SegmentBytes int64 `mapstructure:"segment_bytes"`
	// ReadCacheBytes bounds the values (larger than 64 bytes) written by
	// this process that each client keeps in memory, the oldest dropped
	// first, so that reading an entry soon after writing it (the queue
	// does) needs no read from the file. 0: none.
	ReadCacheBytes int64 `mapstructure:"read_cache_bytes"`
	// FileStorageDirectory is a directory file_storage wrote (an earlier
	// version's or config's): at Start its files are checked (a damaged
	// one salvaged), their data moved into the clients of the same names
	// and each file kept as NAME.migrated-TIME. Empty: none.
	FileStorageDirectory string `mapstructure:"file_storage_directory"`

	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{SegmentBytes: DefaultSegmentBytes, ReadCacheBytes: DefaultReadCacheBytes}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Directory == "" {
		errs = append(errs, errors.New("directory must be set"))
	}
	if c.FileStorageDirectory != "" && filepath.Clean(c.FileStorageDirectory) == filepath.Clean(c.Directory) {
		errs = append(errs, errors.New("file_storage_directory must not be directory itself: file_storage's files and log_storage's clients have the same names"))
	}
	if c.SegmentBytes < minSegmentBytes || c.SegmentBytes > maxSegmentBytes {
		errs = append(errs, fmt.Errorf("segment_bytes must be between %d and %d, not %d", minSegmentBytes, maxSegmentBytes, c.SegmentBytes))
	}
	if c.ReadCacheBytes < 0 || c.ReadCacheBytes > maxSegmentBytes {
		errs = append(errs, fmt.Errorf("read_cache_bytes must be between 0 and %d, not %d", maxSegmentBytes, c.ReadCacheBytes))
	}
	return errors.Join(errs...)
}
