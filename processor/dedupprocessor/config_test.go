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

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; "" for valid
	}{
		{"default", func(*Config) {}, ""},
		{"detect", func(c *Config) { c.Mode = ModeDetect }, ""},
		{"bad mode", func(c *Config) { c.Mode = "dedupe" }, `mode must be "drop" or "detect", got "dedupe"`},
		{"zero window", func(c *Config) { c.Traces.Window = 0 }, "traces.window must be positive"},
		{"zero max_spans", func(c *Config) { c.Traces.MaxSpans = 0 }, "traces.max_spans must be between 1 and"},
		{"huge max_spans", func(c *Config) { c.Traces.MaxSpans = 1 << 30 }, "traces.max_spans must be between 1 and"},
		{"bad on_conflict", func(c *Config) { c.Traces.OnConflict = "last" }, "traces.on_conflict"},
		{"negative logs window", func(c *Config) { c.Logs.Window = -time.Second }, "logs.window must be positive"},
		{"zero max_records", func(c *Config) { c.Logs.MaxRecords = 0 }, "logs.max_records"},
		{"zero max_services", func(c *Config) { c.Telemetry.MaxServices = 0 }, "telemetry.max_services"},
		{"zero warn_interval", func(c *Config) { c.Telemetry.WarnInterval = 0 }, "telemetry.warn_interval"},
		{"negative summary", func(c *Config) { c.Telemetry.SummaryInterval = -1 }, "telemetry.summary_interval"},
		{"negative nested max_bytes", func(c *Config) { c.Traces.Nested.MaxBytes = -1 }, "traces.nested: max_bytes -1: must not be negative"},
		{"split", func(c *Config) { c.Metrics.Overlap = OverlapSplit }, ""},
		{"fixed failover", func(c *Config) { c.Metrics.FailoverAfter = time.Minute }, ""},
		{"zero max_streams", func(c *Config) { c.Metrics.MaxStreams = 0 }, "metrics.max_streams must be between 1 and"},
		{"huge max_streams", func(c *Config) { c.Metrics.MaxStreams = 1 << 40 }, "metrics.max_streams must be between 1 and"},
		{"zero max_stale", func(c *Config) { c.Metrics.MaxStale = 0 }, "metrics.max_stale must be positive, got 0s"},
		{"negative failover_after", func(c *Config) { c.Metrics.FailoverAfter = -time.Second }, "metrics.failover_after must not be negative"},
		{"bad overlap", func(c *Config) { c.Metrics.Overlap = "merge" }, `metrics.overlap must be "keep_one" or "split", got "merge"`},
		{"empty split_attribute", func(c *Config) { c.Metrics.SplitAttribute = "" }, "metrics.split_attribute must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := createDefaultConfig()
			tc.mutate(c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
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
	want := MetricsConfig{MaxStreams: 5000, MaxStale: 10 * time.Minute, FailoverAfter: 90 * time.Second, Overlap: OverlapSplit, SplitAttribute: "writer", InterpolateChangeover: false}
	if cfg.Metrics != want {
		t.Fatalf("metrics config %+v, want %+v", cfg.Metrics, want)
	}
	p := cfg.Metrics.policy()
	if p.MaxStreams != 5000 || p.MaxStale != 10*time.Minute || p.FailoverAfter != 90*time.Second || !p.Split || p.Interpolate {
		t.Fatalf("policy %+v", p)
	}
	def := createDefaultConfig().Metrics
	if def.MaxStreams != 100_000 || def.MaxStale != 5*time.Minute || def.FailoverAfter != 0 || def.Overlap != OverlapKeepOne || def.SplitAttribute != "service.instance.id" || !def.InterpolateChangeover || !def.policy().Interpolate {
		t.Fatalf("defaults %+v", def)
	}
}
