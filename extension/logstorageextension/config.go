package logstorageextension

import (
	"errors"
	"fmt"
)

// Default and bounds of segment_bytes.
const (
	DefaultSegmentBytes = 64 << 20
	minSegmentBytes     = 4096
	maxSegmentBytes     = 1 << 30
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

	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{SegmentBytes: DefaultSegmentBytes}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Directory == "" {
		errs = append(errs, errors.New("directory must be set"))
	}
	if c.SegmentBytes < minSegmentBytes || c.SegmentBytes > maxSegmentBytes {
		errs = append(errs, fmt.Errorf("segment_bytes must be between %d and %d, not %d", minSegmentBytes, maxSegmentBytes, c.SegmentBytes))
	}
	return errors.Join(errs...)
}
