package guardextension

import (
	"fmt"

	"github.com/doubletake/doubletake/internal/guard"
)

// Config is the guard's configuration.
type Config struct {
	// MaxDepth is the deepest message nesting accepted (the export request
	// is depth 1, a span's attribute value 6); JSON bodies may nest twice
	// as many objects and arrays.
	MaxDepth int `mapstructure:"max_depth"`

	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{MaxDepth: guard.DefaultMaxDepth}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.MaxDepth < 8 || c.MaxDepth > guard.MaxDepthLimit {
		return fmt.Errorf("max_depth must be between 8 and %d, got %d", guard.MaxDepthLimit, c.MaxDepth)
	}
	return nil
}
