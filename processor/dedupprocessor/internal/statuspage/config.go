// Package statuspage serves the dedup processor's status page: per
// service, who sends copies and why; the metric streams with more than
// one writer; the nested duplicates; the state's health. It owns the
// page's config, its JSON types, its order and bounds, the cleaning of
// client-chosen names and the HTTP server. What the page shows comes from
// one snapshot function the processor hands to New; the page takes no
// lock of the processor's.
package statuspage

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/config/confighttp"
)

// The page's bounds and defaults.
const (
	DefaultMaxRows    = 20   // max_rows
	MaxMaxRows        = 1000 // the most max_rows may be
	DefaultMaxStreams = 1000 // max_streams
	MaxMaxStreams     = 100000
)

// Config configures the status page. Off unless http.endpoint is set.
type Config struct {
	// HTTP is the server's address (loopback in the embedded default), TLS
	// and auth, as every collector HTTP server takes them.
	HTTP confighttp.ServerConfig `mapstructure:"http"`
	// MaxRows is the most rows each table shows, worst first.
	MaxRows int `mapstructure:"max_rows"`
	// MaxStreams is the most metric streams with more than one writer the
	// page remembers; events of streams past it are counted in
	// otelcol_processor_dedup_status_refused_events and not shown.
	MaxStreams int `mapstructure:"max_streams"`
}

// NewDefaultConfig is the page off, with its bounds' defaults.
func NewDefaultConfig() Config {
	return Config{HTTP: confighttp.NewDefaultServerConfig(), MaxRows: DefaultMaxRows, MaxStreams: DefaultMaxStreams}
}

// Enabled says whether the page is served.
func (c *Config) Enabled() bool { return c.HTTP.NetAddr.Endpoint != "" }

// Validate checks the bounds of a page that is served; the collector's
// config validation prefixes the section's path ("status: max_rows ...").
func (c *Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if c.MaxRows < 1 || c.MaxRows > MaxMaxRows {
		errs = append(errs, fmt.Errorf("max_rows must be between 1 and %d, got %d", MaxMaxRows, c.MaxRows))
	}
	if c.MaxStreams < 1 || c.MaxStreams > MaxMaxStreams {
		errs = append(errs, fmt.Errorf("max_streams must be between 1 and %d, got %d", MaxMaxStreams, c.MaxStreams))
	}
	return errors.Join(errs...)
}
