package dedupprocessor

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// TestConfigValidate validates as the collector does (confmap.Validate
// walks the config and calls each section's Validate): every error names
// its field under the section's path, exactly once.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // the error, or a prefix of it, with its path; "" for valid
	}{
		{"default", func(*Config) {}, ""},
		{"detect", func(c *Config) { c.Mode = ModeDetect }, ""},
		{"bad mode", func(c *Config) { c.Mode = "dedupe" }, `mode must be "drop" or "detect", got "dedupe"`},
		{"zero window", func(c *Config) { c.Traces.Window = 0 }, "traces: window must be positive, got 0s"},
		{"zero logs window", func(c *Config) { c.Logs.Window = 0 }, "logs: window must be positive, got 0s"},
		{"zero max_spans", func(c *Config) { c.Traces.MaxSpans = 0 }, "traces: max_spans must be between 1 and"},
		{"huge max_spans", func(c *Config) { c.Traces.MaxSpans = 1 << 30 }, "traces: max_spans must be between 1 and"},
		{"bad on_conflict", func(c *Config) { c.Traces.OnConflict = "last" }, `traces: on_conflict must be "keep_first" or "pass", got "last"`},
		{"collapse without detect", func(c *Config) { c.Traces.CollapseNested = true }, "traces: collapse_nested needs nested::detect"},
		{"negative logs window", func(c *Config) { c.Logs.Window = -time.Second }, "logs: window must be positive, got -1s"},
		{"zero max_records", func(c *Config) { c.Logs.MaxRecords = 0 }, "logs: max_records must be between 1 and"},
		{"zero max_services", func(c *Config) { c.Telemetry.MaxServices = 0 }, "telemetry: max_services must be at least 1, got 0"},
		{"zero warn_interval", func(c *Config) { c.Telemetry.WarnInterval = 0 }, "telemetry: warn_interval must be positive, got 0s"},
		{"negative summary", func(c *Config) { c.Telemetry.SummaryInterval = -1 }, "telemetry: summary_interval must not be negative"},
		{"negative nested max_bytes", func(c *Config) { c.Traces.Nested.MaxBytes = -1 }, "traces::nested: max_bytes must be at least 1, got -1"},
		// 0 is never "the default": a bound or tolerance at 0 is refused
		// in every section alike; 0 only switches off what can be off.
		{"zero nested max_spans", func(c *Config) { c.Traces.Nested.MaxSpans = 0 }, "traces::nested: max_spans must be between 1 and 16777216, got 0"},
		{"zero nested max_bytes", func(c *Config) { c.Traces.Nested.MaxBytes = 0 }, "traces::nested: max_bytes must be at least 1, got 0"},
		{"zero nested min_coverage", func(c *Config) { c.Traces.Nested.MinCoverage = 0 }, "traces::nested: min_coverage must be in (0, 1], got 0"},
		{"zero nested skew", func(c *Config) { c.Traces.Nested.Skew = 0 }, "traces::nested: skew must be positive, got 0s"},
		{"zero nested max_examples keeps none", func(c *Config) { c.Traces.Nested.MaxExamples = 0 }, ""},
		{"negative nested max_examples", func(c *Config) { c.Traces.Nested.MaxExamples = -1 }, "traces::nested: max_examples must not be negative (0 keeps none), got -1"},
		{"zero summary_interval is off", func(c *Config) { c.Telemetry.SummaryInterval = 0 }, ""},
		{"zero memory limit is off", func(c *Config) { c.MemorySoftLimitMiB = 0 }, ""},
		{"zero failover_after derives it", func(c *Config) { c.Metrics.FailoverAfter = 0 }, ""},
		{"zero status max_rows", func(c *Config) { statusOn(c); c.Status.MaxRows = 0 }, "status: max_rows must be between 1 and 1000, got 0"},
		{"zero status max_streams", func(c *Config) { statusOn(c); c.Status.MaxStreams = 0 }, "status: max_streams must be between 1 and 100000, got 0"},
		{"split", func(c *Config) { c.Metrics.Overlap = OverlapSplit }, ""},
		{"fixed failover", func(c *Config) { c.Metrics.FailoverAfter = time.Minute }, ""},
		{"zero max_streams", func(c *Config) { c.Metrics.MaxStreams = 0 }, "metrics: max_streams must be between 1 and"},
		{"huge max_streams", func(c *Config) { c.Metrics.MaxStreams = 1 << 40 }, "metrics: max_streams must be between 1 and"},
		{"zero max_stale", func(c *Config) { c.Metrics.MaxStale = 0 }, "metrics: max_stale must be positive, got 0s"},
		{"negative failover_after", func(c *Config) { c.Metrics.FailoverAfter = -time.Second }, "metrics: failover_after must not be negative"},
		{"bad overlap", func(c *Config) { c.Metrics.Overlap = "merge" }, `metrics: overlap must be "auto", "keep_one" or "split", got "merge"`},
		{"keep_one", func(c *Config) { c.Metrics.Overlap = OverlapKeepOne }, ""},
		{"no judged writers", func(c *Config) { c.Metrics.MaxJudgedWriters = 0 }, "metrics: max_judged_writers must be between 1 and 67108864, got 0"},
		{"zero max_held_bytes holds none", func(c *Config) { c.Metrics.MaxHeldBytes = 0 }, ""},
		{"zero copies max_waiting", func(c *Config) { c.Copies.MaxWaiting = 0 }, "copies: max_waiting must be at least 1, got 0"},
		{"zero copies max_waiting_bytes", func(c *Config) { c.Copies.MaxWaitingBytes = 0 }, "copies: max_waiting_bytes must be at least 1, got 0"},
		{"negative copies max_waiters_per_original", func(c *Config) { c.Copies.MaxWaitersPerOriginal = -1 }, "copies: max_waiters_per_original must be at least 1, got -1"},
		{"negative max_held_bytes", func(c *Config) { c.Metrics.MaxHeldBytes = -1 }, "metrics: max_held_bytes must be between 0 and 1099511627776, got -1"},
		{"zero max_export_times keeps none", func(c *Config) { c.Metrics.MaxExportTimes = 0 }, ""},
		{"negative max_export_times", func(c *Config) { c.Metrics.MaxExportTimes = -1 }, "metrics: max_export_times must be between 0 and 67108864, got -1"},
		{"empty split_attribute", func(c *Config) { c.Metrics.SplitAttribute = "" }, "metrics: split_attribute must not be empty"},
		{"negative memory limit", func(c *Config) { c.MemorySoftLimitMiB = -1 }, "memory_soft_limit_mib must not be negative, got -1"},
		{"zero checkpoint", func(c *Config) { c.CheckpointInterval = 0 }, "checkpoint_interval must be positive, got 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := createDefaultConfig()
			tc.mutate(c)
			err := confmap.Validate(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want %q", tc.want)
			case tc.want != "" && strings.Count(err.Error(), tc.want) != 1:
				t.Fatalf("error %q, want %q in it exactly once", err, tc.want)
			}
		})
	}
}

// TestConfigNestedErrorOnce loads a config with a bad
// traces.nested.min_coverage as the collector does (confmap unmarshal, then
// confmap.Validate): the error is reported once, under traces::nested.
// Before each section validated itself, Config.Validate also called the
// nested section's validator and the walk met it twice more (traces.nested:,
// traces::nested:, traces::nested::options:).
func TestConfigNestedErrorOnce(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewIDWithName(Type, "bad_nested").String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig()
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Traces.Nested.MinCoverage != 2 {
		t.Fatalf("min_coverage %v, want 2 as written", cfg.Traces.Nested.MinCoverage)
	}
	err = confmap.Validate(cfg)
	if err == nil {
		t.Fatal("min_coverage 2 accepted")
	}
	const want = "traces::nested: min_coverage must be in (0, 1], got 2"
	if err.Error() != want {
		t.Fatalf("error %q\nwant    %q", err, want)
	}
	if n := strings.Count(err.Error(), "min_coverage"); n != 1 {
		t.Fatalf("min_coverage reported %d times: %q", n, err)
	}
}

func TestConfigLoadsFromYAML(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewIDWithName(Type, "custom").String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig()
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != ModeDetect || cfg.Traces.Window != 10*time.Minute || cfg.Traces.MaxSpans != 5000 ||
		cfg.Traces.OnConflict != ConflictPass || cfg.Logs.MaxRecords != 100 || cfg.Telemetry.SummaryInterval != 30*time.Second {
		t.Fatalf("config not loaded as written: %+v", cfg)
	}
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
}

func TestConfigMetricsFromYAML(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "metrics", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewIDWithName(Type, "fleet").String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig()
	if err := sub.Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	want := MetricsConfig{MaxStreams: 5000, MaxStale: 10 * time.Minute, FailoverAfter: 90 * time.Second, Overlap: OverlapSplit, MaxJudgedWriters: 10000, MaxHeldBytes: 16 << 20, MaxExportTimes: 1 << 15, SplitAttribute: "writer", InterpolateChangeover: false}
	if cfg.Metrics != want {
		t.Fatalf("metrics config %+v, want %+v", cfg.Metrics, want)
	}
	p := cfg.Metrics.policy()
	if p.MaxStreams != 5000 || p.MaxStale != 10*time.Minute || p.FailoverAfter != 90*time.Second || !p.Split || p.Interpolate {
		t.Fatalf("policy %+v", p)
	}
	def := createDefaultConfig().Metrics
	if def.MaxStreams != 100_000 || def.MaxStale != 5*time.Minute || def.FailoverAfter != 0 || def.Overlap != OverlapAuto || def.MaxJudgedWriters != 10000 || def.MaxHeldBytes != 16<<20 || def.policy().MaxHeldBytes != 16<<20 || def.MaxExportTimes != 1<<15 || def.policy().MaxExportTimes != 1<<15 || !def.policy().Auto || def.SplitAttribute != "service.instance.id" || !def.InterpolateChangeover || !def.policy().Interpolate {
		t.Fatalf("defaults %+v", def)
	}
}

// TestCopiesDefaults: the copies section's defaults are the README's.
func TestCopiesDefaults(t *testing.T) {
	want := CopiesConfig{MaxWaiting: 1024, MaxWaitingBytes: 64 << 20, MaxWaitersPerOriginal: 8}
	if got := createDefaultConfig().Copies; got != want {
		t.Fatalf("copies defaults %+v, want %+v", got, want)
	}
}
