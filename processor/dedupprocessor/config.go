package dedupprocessor

import (
	"errors"
	"fmt"
	"time"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// Mode says what the processor does with what it finds.
type Mode string

const (
	// ModeDrop drops duplicates (and, for metrics, the points of writers
	// that lost the election).
	ModeDrop Mode = "drop"
	// ModeDetect counts everything and forwards everything: a dry run.
	ModeDetect Mode = "detect"
)

// ConflictPolicy says what happens to a span whose ids were seen before with
// different content.
type ConflictPolicy string

const (
	// ConflictKeepFirst drops the later version: the first one seen stands.
	ConflictKeepFirst ConflictPolicy = "keep_first"
	// ConflictPass forwards the later version too.
	ConflictPass ConflictPolicy = "pass"
)

const (
	defaultWindow          = 5 * time.Minute // exporterhelper's retry horizon (max_elapsed_time)
	defaultMaxSpans        = 2_000_000       // about 76 MB at 38 bytes per tracked span
	defaultMaxLogRecords   = 1_000_000       // about 22 MB at 22 bytes per tracked record
	defaultMaxServices     = 200
	defaultWarnInterval    = time.Minute
	defaultSummaryInterval = 0 // off
)

var (
	errMode        = errors.New(`mode must be "drop" or "detect"`)
	errOnConflict  = errors.New(`traces.on_conflict must be "keep_first" or "pass"`)
	errMaxServices = errors.New("telemetry.max_services must be at least 1")
	errWarn        = errors.New("telemetry.warn_interval must be positive")
	errSummary     = errors.New("telemetry.summary_interval must not be negative")
)

// Config is the dedup processor's configuration.
type Config struct {
	// Mode is drop (default) or detect.
	Mode Mode `mapstructure:"mode"`
	// Traces configures span deduplication.
	Traces TracesConfig `mapstructure:"traces"`
	// Logs configures log record deduplication.
	Logs LogsConfig `mapstructure:"logs"`
	// Telemetry configures the processor's own metrics and logs.
	Telemetry TelemetryConfig `mapstructure:"telemetry"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// TracesConfig bounds the span window.
type TracesConfig struct {
	// Window is how long a (trace_id, span_id) is remembered.
	Window time.Duration `mapstructure:"window"`
	// MaxSpans is the most span ids remembered; the oldest go first.
	MaxSpans int `mapstructure:"max_spans"`
	// OnConflict is keep_first (default) or pass.
	OnConflict ConflictPolicy `mapstructure:"on_conflict"`
}

// LogsConfig bounds the log record window.
type LogsConfig struct {
	// Window is how long a log record's digest is remembered.
	Window time.Duration `mapstructure:"window"`
	// MaxRecords is the most digests remembered; the oldest go first.
	MaxRecords int `mapstructure:"max_records"`
}

// TelemetryConfig configures the processor's self-telemetry.
type TelemetryConfig struct {
	// MaxServices caps the distinct service.name values on its metrics.
	MaxServices int `mapstructure:"max_services"`
	// WarnInterval is the least time between two warnings for one service.
	WarnInterval time.Duration `mapstructure:"warn_interval"`
	// SummaryInterval, when positive, logs what was received and dropped
	// every interval.
	SummaryInterval time.Duration `mapstructure:"summary_interval"`
}

func createDefaultConfig() *Config {
	return &Config{
		Mode: ModeDrop,
		Traces: TracesConfig{
			Window:     defaultWindow,
			MaxSpans:   defaultMaxSpans,
			OnConflict: ConflictKeepFirst,
		},
		Logs: LogsConfig{
			Window:     defaultWindow,
			MaxRecords: defaultMaxLogRecords,
		},
		Telemetry: TelemetryConfig{
			MaxServices:     defaultMaxServices,
			WarnInterval:    defaultWarnInterval,
			SummaryInterval: defaultSummaryInterval,
		},
	}
}

// Validate checks every field, naming the one that is wrong.
func (c *Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeDrop, ModeDetect:
	default:
		errs = append(errs, fmt.Errorf("%w, got %q", errMode, c.Mode))
	}
	if c.Traces.Window <= 0 {
		errs = append(errs, fmt.Errorf("traces.window must be positive, got %s", c.Traces.Window))
	}
	if c.Traces.MaxSpans < 1 || c.Traces.MaxSpans > window.MaxCapacity {
		errs = append(errs, fmt.Errorf("traces.max_spans must be between 1 and %d, got %d", window.MaxCapacity, c.Traces.MaxSpans))
	}
	switch c.Traces.OnConflict {
	case ConflictKeepFirst, ConflictPass:
	default:
		errs = append(errs, fmt.Errorf("%w, got %q", errOnConflict, c.Traces.OnConflict))
	}
	if c.Logs.Window <= 0 {
		errs = append(errs, fmt.Errorf("logs.window must be positive, got %s", c.Logs.Window))
	}
	if c.Logs.MaxRecords < 1 || c.Logs.MaxRecords > window.MaxCapacity {
		errs = append(errs, fmt.Errorf("logs.max_records must be between 1 and %d, got %d", window.MaxCapacity, c.Logs.MaxRecords))
	}
	if c.Telemetry.MaxServices < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxServices, c.Telemetry.MaxServices))
	}
	if c.Telemetry.WarnInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errWarn, c.Telemetry.WarnInterval))
	}
	if c.Telemetry.SummaryInterval < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errSummary, c.Telemetry.SummaryInterval))
	}
	return errors.Join(errs...)
}
