package dedupprocessor

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/doubletake/doubletake/internal/nested"
	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
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

// OverlapPolicy says what happens to the points of a metric stream's
// writers that were not elected.
type OverlapPolicy string

const (
	// OverlapKeepOne keeps the elected writer's points only (the data
	// model's choice: presume a single writer and eliminate overlap).
	OverlapKeepOne OverlapPolicy = "keep_one"
	// OverlapSplit keeps every writer's points as its own series, told
	// apart by metrics.split_attribute on the points of the writers that
	// were not elected.
	OverlapSplit OverlapPolicy = "split"
	// OverlapAuto (the default) tells a second writer's case from its
	// values: a copy (a second metric reader in one process) is dropped as
	// with keep_one, a peer (a process sharing the identity) is kept as
	// its own series as with split; undecided, it is dropped.
	OverlapAuto OverlapPolicy = "auto"
)

const (
	defaultWindow          = 5 * time.Minute // exporterhelper's retry horizon (max_elapsed_time)
	defaultMaxSpans        = 2_000_000       // about 86 MB at 43 bytes per tracked span
	defaultMaxLogRecords   = 1_000_000       // about 27 MB at 27 bytes per tracked record
	defaultMaxServices     = 200
	defaultWarnInterval    = time.Minute
	defaultSummaryInterval = 0 // off
	defaultCheckpoint      = 5 * time.Second

	defaultMaxStreams     = streams.DefaultMaxStreams // about 15 MB at 150 bytes per tracked stream
	defaultMaxStale       = streams.DefaultMaxStale
	defaultSplitAttribute = "service.instance.id"
	// defaultMaxHeldBytes: a held point is its resource, scope, metric and
	// one point, usually under 1 KiB: room for every pair at the default
	// max_judged_writers.
	defaultMaxHeldBytes = 16 << 20
	// defaultMaxWaiting, defaultMaxWaitingBytes: a copy waits only while
	// its original is in the next component, one per original; a
	// gateway's senders rarely have more requests in flight than this.
	defaultMaxWaiting      = 1024
	defaultMaxWaitingBytes = 64 << 20
	// defaultMaxWaitersPerOriginal: room for the copies of a few export
	// pipelines sending the same items at once (the case dedup is for).
	defaultMaxWaitersPerOriginal = 8
)

var (
	errMode        = errors.New(`mode must be "drop" or "detect"`)
	errOnConflict  = errors.New(`on_conflict must be "keep_first" or "pass"`)
	errMaxServices = errors.New("max_services must be at least 1")
	errWarn        = errors.New("warn_interval must be positive")
	errSummary     = errors.New("summary_interval must not be negative")
	errOverlap     = errors.New(`overlap must be "auto", "keep_one" or "split"`)
	errSplitAttr   = errors.New("split_attribute must not be empty")
)

// Config is the dedup processor's configuration.
//
// 0 means one thing in every section: off. It switches off what can be off
// (telemetry.summary_interval, memory_soft_limit_mib, a fixed
// metrics.failover_after, traces.nested.max_examples); a bound or a
// tolerance refuses 0, and createDefaultConfig writes its default. Each
// section's Validate names its own fields only; the collector's
// confmap.Validate prefixes the section's path ("traces::nested: ...").
type Config struct {
	// Mode is drop (default) or detect.
	Mode Mode `mapstructure:"mode"`
	// Traces configures span deduplication.
	Traces TracesConfig `mapstructure:"traces"`
	// Logs configures log record deduplication.
	Logs LogsConfig `mapstructure:"logs"`
	// Metrics configures one writer per metric stream.
	Metrics MetricsConfig `mapstructure:"metrics"`
	// Telemetry configures the processor's own metrics and logs.
	Telemetry TelemetryConfig `mapstructure:"telemetry"`
	// Copies bounds the requests that wait for the originals of their
	// copies (copies.go).
	Copies CopiesConfig `mapstructure:"copies"`
	// Storage names a storage extension (file_storage) that keeps the span
	// and log windows across restarts; none by default.
	Storage *component.ID `mapstructure:"storage"`
	// CheckpointInterval is how often the stored windows are trimmed to
	// what the window still holds.
	CheckpointInterval time.Duration `mapstructure:"checkpoint_interval"`
	// MemorySoftLimitMiB, when positive, shrinks the span and log windows
	// by a quarter every second that the process's resident memory is above
	// it, so that dedup gives memory back before the process is at risk.
	MemorySoftLimitMiB int `mapstructure:"memory_soft_limit_mib"`
	// Status serves the status page (internal/statuspage); off by default.
	Status statuspage.Config `mapstructure:"status"`

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
	// Nested configures the detection of double instrumentation: one
	// operation recorded as two nested spans.
	Nested NestedConfig `mapstructure:"nested"`
	// CollapseNested removes the inner span of each nested duplicate
	// found within one request (mode drop only).
	CollapseNested bool `mapstructure:"collapse_nested"`
}

// NestedConfig turns the nested-duplicate detector on and tunes it.
type NestedConfig struct {
	// Detect counts nested duplicates (by service and scope pair).
	Detect bool `mapstructure:"detect"`
	// Options are the detector's: min_coverage, skew, max_spans,
	// max_bytes, max_examples, internal_in_server.
	nested.Options `mapstructure:",squash"`
}

// LogsConfig bounds the log record window.
type LogsConfig struct {
	// Window is how long a log record's digest is remembered.
	Window time.Duration `mapstructure:"window"`
	// MaxRecords is the most digests remembered; the oldest go first.
	MaxRecords int `mapstructure:"max_records"`
}

// MetricsConfig bounds the per-stream state and sets the election rules.
type MetricsConfig struct {
	// MaxStreams is the most streams tracked; points of further new streams
	// pass unjudged, counted.
	MaxStreams int `mapstructure:"max_streams"`
	// MaxStale is how long a stream is remembered after its newest point.
	MaxStale time.Duration `mapstructure:"max_stale"`
	// FailoverAfter is how long, in point time, the elected writer of a
	// cumulative stream may send nothing before the next writer is elected.
	// Zero derives it per stream: 3 times the writer's observed interval,
	// at least 1s.
	FailoverAfter time.Duration `mapstructure:"failover_after"`
	// Overlap is auto (default), keep_one or split.
	Overlap OverlapPolicy `mapstructure:"overlap"`
	// MaxJudgedWriters bounds overlap: auto: the most second writers of
	// streams under judgement (and the most writers pooled over their
	// streams); past it a second writer is judged as with keep_one,
	// counted.
	MaxJudgedWriters int `mapstructure:"max_judged_writers"`
	// MaxHeldBytes bounds overlap: auto's held points: the newest dropped
	// point of each undecided second writer of a stream, kept (encoded
	// size) until the writer is decided and sent if it is a peer, so that
	// a peer decided after its last point loses nothing. 0 holds none.
	MaxHeldBytes int `mapstructure:"max_held_bytes"`
	// MaxExportTimes bounds overlap: auto's record of the exports seen:
	// the newest (resource, time) pairs of metric points, by which an
	// interval a delta writer sent nothing for is known to have been
	// empty (its export arrived without a point of the stream) rather
	// than an export lost. Past it the oldest go, counted. 0 keeps none.
	MaxExportTimes int `mapstructure:"max_export_times"`
	// SplitAttribute is the point attribute that tells the writers apart
	// with overlap: split.
	SplitAttribute string `mapstructure:"split_attribute"`
	// InterpolateChangeover applies the data model's overlap interpolation
	// to monotonic cumulative Sums: after a failover to a writer that
	// started before the previous writer's newest point, that writer's
	// points start where the previous one ended, less the count
	// (interpolated) that both made in the overlap. Default true.
	InterpolateChangeover bool `mapstructure:"interpolate_changeover"`
}

// policy is the streams.Policy the config asks for.
func (c MetricsConfig) policy() streams.Policy {
	p := streams.DefaultPolicy()
	p.MaxStreams = c.MaxStreams
	p.MaxStale = c.MaxStale
	p.FailoverAfter = c.FailoverAfter
	p.Split = c.Overlap == OverlapSplit
	p.Auto = c.Overlap == OverlapAuto
	p.MaxJudged = c.MaxJudgedWriters
	p.MaxHeldBytes = c.MaxHeldBytes
	p.MaxExportTimes = c.MaxExportTimes
	p.Interpolate = c.InterpolateChangeover
	return p
}

// CopiesConfig bounds the requests that carry copies of items whose first
// copy is still being delivered: such a request is not answered before that
// first copy is. Past a bound it is answered at once with a retryable
// error, counted.
type CopiesConfig struct {
	// MaxWaiting is the most requests waiting, over every signal.
	MaxWaiting int `mapstructure:"max_waiting"`
	// MaxWaitingBytes is the most encoded bytes of waiting copies, over
	// every signal.
	MaxWaitingBytes int `mapstructure:"max_waiting_bytes"`
	// MaxWaitersPerOriginal is the most requests waiting for one request
	// still in the next component: a sender that retries without ending
	// its earlier attempts piles up no more than this.
	MaxWaitersPerOriginal int `mapstructure:"max_waiters_per_original"`
}

// Validate checks the copies section.
func (c *CopiesConfig) Validate() error {
	var errs []error
	if c.MaxWaiting < 1 {
		errs = append(errs, fmt.Errorf("max_waiting must be at least 1, got %d", c.MaxWaiting))
	}
	if c.MaxWaitingBytes < 1 {
		errs = append(errs, fmt.Errorf("max_waiting_bytes must be at least 1, got %d", c.MaxWaitingBytes))
	}
	if c.MaxWaitersPerOriginal < 1 {
		errs = append(errs, fmt.Errorf("max_waiters_per_original must be at least 1, got %d", c.MaxWaitersPerOriginal))
	}
	return errors.Join(errs...)
}

// TelemetryConfig configures the processor's self-telemetry.
type TelemetryConfig struct {
	// MaxServices caps the distinct service.name values on its metrics.
	MaxServices int `mapstructure:"max_services"`
	// WarnInterval is the least time between two warnings for one service.
	WarnInterval time.Duration `mapstructure:"warn_interval"`
	// SummaryInterval, when positive, logs what was received and dropped
	// every interval, or that nothing was.
	SummaryInterval time.Duration `mapstructure:"summary_interval"`
}

func createDefaultConfig() *Config {
	return &Config{
		Mode: ModeDrop,
		Traces: TracesConfig{
			Window:     defaultWindow,
			MaxSpans:   defaultMaxSpans,
			OnConflict: ConflictKeepFirst,
			// Off by default: it roughly doubles the span path's cost
			// (docs/benchmarks.md); the embedded default config turns it on.
			Nested: NestedConfig{Detect: false, Options: nested.Options{
				MinCoverage: nested.DefaultMinCoverage, Skew: nested.DefaultSkew,
				MaxSpans: nested.ProcessorMaxSpans, MaxBytes: nested.ProcessorMaxBytes,
				MaxExamples: nested.DefaultMaxExamples,
			}},
		},
		Logs: LogsConfig{
			Window:     defaultWindow,
			MaxRecords: defaultMaxLogRecords,
		},
		Metrics: MetricsConfig{
			MaxStreams:            defaultMaxStreams,
			MaxStale:              defaultMaxStale,
			FailoverAfter:         0, // derived per stream
			Overlap:               OverlapAuto,
			MaxJudgedWriters:      streams.DefaultMaxJudged,
			MaxHeldBytes:          defaultMaxHeldBytes,
			MaxExportTimes:        streams.DefaultMaxExportTimes,
			SplitAttribute:        defaultSplitAttribute,
			InterpolateChangeover: true,
		},
		Copies: CopiesConfig{MaxWaiting: defaultMaxWaiting, MaxWaitingBytes: defaultMaxWaitingBytes,
			MaxWaitersPerOriginal: defaultMaxWaitersPerOriginal},
		CheckpointInterval: defaultCheckpoint,
		Status:             statuspage.NewDefaultConfig(),
		Telemetry: TelemetryConfig{
			MaxServices:     defaultMaxServices,
			WarnInterval:    defaultWarnInterval,
			SummaryInterval: defaultSummaryInterval,
		},
	}
}

// Every section validates its own fields (confmap.Validator): the
// collector's config validation (confmap.Validate) walks the config and
// calls each section's Validate once, prefixing its path, e.g.
// "traces::nested: min_coverage must be in (0, 1], got 2". No Validate calls another
// section's, which would report its errors twice.

// Validate checks the top-level fields.
func (c *Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeDrop, ModeDetect:
	default:
		errs = append(errs, fmt.Errorf("%w, got %q", errMode, c.Mode))
	}
	if c.MemorySoftLimitMiB < 0 {
		errs = append(errs, fmt.Errorf("memory_soft_limit_mib must not be negative, got %d", c.MemorySoftLimitMiB))
	}
	if c.CheckpointInterval <= 0 {
		errs = append(errs, fmt.Errorf("checkpoint_interval must be positive, got %s", c.CheckpointInterval))
	}
	return errors.Join(errs...)
}

// Validate checks the traces section.
func (c *TracesConfig) Validate() error {
	var errs []error
	if c.Window <= 0 {
		errs = append(errs, fmt.Errorf("window must be positive, got %s", c.Window))
	}
	if c.MaxSpans < 1 || c.MaxSpans > window.MaxCapacity {
		errs = append(errs, fmt.Errorf("max_spans must be between 1 and %d, got %d", window.MaxCapacity, c.MaxSpans))
	}
	switch c.OnConflict {
	case ConflictKeepFirst, ConflictPass:
	default:
		errs = append(errs, fmt.Errorf("%w, got %q", errOnConflict, c.OnConflict))
	}
	if c.CollapseNested && !c.Nested.Detect {
		errs = append(errs, errors.New("collapse_nested needs nested::detect"))
	}
	return errors.Join(errs...)
}

// Validate checks the traces.nested section: the detector's options, each
// set (0 is refused for its bounds and tolerances, not a default).
func (c *NestedConfig) Validate() error {
	return c.CheckSet()
}

// Validate checks the logs section.
func (c *LogsConfig) Validate() error {
	var errs []error
	if c.Window <= 0 {
		errs = append(errs, fmt.Errorf("window must be positive, got %s", c.Window))
	}
	if c.MaxRecords < 1 || c.MaxRecords > window.MaxCapacity {
		errs = append(errs, fmt.Errorf("max_records must be between 1 and %d, got %d", window.MaxCapacity, c.MaxRecords))
	}
	return errors.Join(errs...)
}

// Validate checks the metrics section: the bounds and election rules are
// the streams.Policy's to check, the rest is the section's own.
func (c *MetricsConfig) Validate() error {
	errs := []error{c.policy().Validate()}
	switch c.Overlap {
	case OverlapAuto, OverlapKeepOne, OverlapSplit:
	default:
		errs = append(errs, fmt.Errorf("%w, got %q", errOverlap, c.Overlap))
	}
	// The Policy checks the range and takes 0 for its default; in the
	// config a bound at 0 is refused.
	if c.MaxJudgedWriters == 0 {
		errs = append(errs, fmt.Errorf("max_judged_writers must be between 1 and %d, got 0", streams.MaxStreamsLimit))
	}
	if c.SplitAttribute == "" {
		errs = append(errs, errSplitAttr)
	}
	return errors.Join(errs...)
}

// Validate checks the telemetry section.
func (c *TelemetryConfig) Validate() error {
	var errs []error
	if c.MaxServices < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxServices, c.MaxServices))
	}
	if c.WarnInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errWarn, c.WarnInterval))
	}
	if c.SummaryInterval < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errSummary, c.SummaryInterval))
	}
	return errors.Join(errs...)
}
