package serieslimitprometheusexporter

import (
	"errors"
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
)

// DefaultMaxSeries is max_series unless set: scrapes at the bound take
// well under a second (docs/benchmarks.md).
const DefaultMaxSeries = 10_000

// Config is the prometheus exporter's config and max_series.
type Config struct {
	prometheusexporter.Config `mapstructure:",squash"`
	// MaxSeries bounds the series served; points of further new series
	// are refused and counted.
	MaxSeries int `mapstructure:"max_series"`
}

// Validate checks max_series and the exporter's own settings.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxSeries < 1 {
		errs = append(errs, fmt.Errorf("max_series must be at least 1, got %d", c.MaxSeries))
	}
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
