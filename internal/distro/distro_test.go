package distro

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"

	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

func TestComponentsCarryWhatTheGatewayPromises(t *testing.T) {
	f, err := Components()
	if err != nil {
		t.Fatal(err)
	}
	if f.Telemetry == nil {
		t.Fatal("Factories.Telemetry is not set")
	}
	has := func(kind string, m map[component.Type]bool, names ...string) {
		for _, n := range names {
			if !m[component.MustNewType(n)] {
				t.Errorf("%s %q missing", kind, n)
			}
		}
	}
	recv, proc, exp, conn, ext := map[component.Type]bool{}, map[component.Type]bool{}, map[component.Type]bool{}, map[component.Type]bool{}, map[component.Type]bool{}
	for k := range f.Receivers {
		recv[k] = true
	}
	for k := range f.Processors {
		proc[k] = true
	}
	for k := range f.Exporters {
		exp[k] = true
	}
	for k := range f.Connectors {
		conn[k] = true
	}
	for k := range f.Extensions {
		ext[k] = true
	}
	has("receiver", recv, "otlp")
	has("processor", proc, "dedup", "memory_limiter", "batch")
	has("exporter", exp, "otlp", "otlphttp", "dedup_otlp_grpc", "dedup_otlp_http", "debug", "file", "prometheus", "prometheusremotewrite", "loadbalancing")
	has("connector", conn, "spanmetrics")
	has("extension", ext, "health_check", "file_storage", "bearertokenauth")
}

func TestDefaultConfigRendersBothModes(t *testing.T) {
	local, err := DefaultConfig(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"endpoint: 127.0.0.1:4317", "file/traces:", "prometheus:", "storage: log_storage", "directory: ./doubletake-data/log", "file_storage_directory: ./doubletake-data/queue", "status:\n      http:\n        endpoint: 127.0.0.1:8890"} {
		if !strings.Contains(local, want) {
			t.Errorf("local default lacks %q", want)
		}
	}
	o := DefaultOptions()
	o.Upstream = "https://collector.example:4317"
	up, err := DefaultConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dedup_otlp_grpc/upstream:", "endpoint: collector.example:4317", "storage: log_storage", "max_delay: 0s", "sizer: bytes", "max_size: 4128768", "num_consumers: 1", "exporters: [dedup_otlp_grpc/upstream]"} {
		if !strings.Contains(up, want) {
			t.Errorf("upstream default lacks %q", want)
		}
	}
	if strings.Contains(up, "insecure: true\n    timeout") {
		t.Error("https upstream rendered with TLS off")
	}
}

func TestDefaultConfigRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Options)
		want   string
	}{
		{func(o *Options) { o.GRPCEndpoint = "4317" }, "--grpc-endpoint"},
		{func(o *Options) { o.Upstream = "collector:4317" }, "--upstream"},
		{func(o *Options) { o.Upstream = "http://c:1"; o.UpstreamProtocol = "udp" }, "--upstream-protocol"},
		{func(o *Options) { o.TelemetryEndpoint = "127.0.0.1:x" }, "--telemetry-endpoint"},
		{func(o *Options) { o.DataDir = "a\"b" }, "--data-dir"},
		{func(o *Options) { o.SummaryInterval = -1 }, "--summary-interval"},
		{func(o *Options) { o.UpstreamMaxRequestBytes = 10 }, "--upstream-max-request-bytes"},
		{func(o *Options) { o.StatusEndpoint = "8890" }, "--status-endpoint"},
	} {
		o := DefaultOptions()
		tc.mutate(&o)
		if _, err := DefaultConfig(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", o, err, tc.want)
		}
	}
}

// TestDefaultConfigRefusesUpstreamCredentials: credentials in --upstream
// are refused, not silently dropped, and the error never shows the
// password.
func TestDefaultConfigRefusesUpstreamCredentials(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		for _, up := range []string{"https://u:s3cret@collector:4317", "http://s3cret@collector:4318", "http://u:s3cret@collector:bad port"} {
			o := DefaultOptions()
			o.Upstream, o.UpstreamProtocol = up, proto
			yaml, err := DefaultConfig(o)
			if err == nil {
				t.Fatalf("%s %s: accepted, config:\n%s", proto, up, yaml)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s %s: the error shows the password: %v", proto, up, err)
			}
		}
	}
}

// TestDefaultConfigFSync: --fsync turns on file_storage's fsync, which
// both the queue and dedup's journal write through; off by default.
func TestDefaultConfigFSync(t *testing.T) {
	for _, on := range []bool{false, true} {
		o := DefaultOptions()
		o.FSync = on
		y, err := DefaultConfig(o)
		if err != nil {
			t.Fatal(err)
		}
		want := "    fsync: false\n"
		if on {
			want = "    fsync: true\n"
		}
		if !strings.Contains(y, want) {
			t.Errorf("FSync %t: the config lacks %q", on, want)
		}
	}
}

// TestDefaultConfigJudgesSecondWriters: the embedded default keeps the
// processor's own overlap policy (auto), in both modes, so that processes
// sharing one identity keep their counts where the gateway runs as shipped.
func TestDefaultConfigJudgesSecondWriters(t *testing.T) {
	want := dedupprocessor.NewFactory().CreateDefaultConfig().(*dedupprocessor.Config).Metrics.Overlap
	if want != dedupprocessor.OverlapAuto {
		t.Fatalf("the processor's default overlap is %q", want)
	}
	for _, upstream := range []string{"", "https://collector.example:4317"} {
		o := DefaultOptions()
		o.Upstream = upstream
		text, err := DefaultConfig(o)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
			t.Fatal(err)
		}
		procs, _ := raw["processors"].(map[string]any)
		conf := confmap.NewFromStringMap(procs["dedup"].(map[string]any))
		cfg := dedupprocessor.NewFactory().CreateDefaultConfig().(*dedupprocessor.Config)
		if err := conf.Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Metrics.Overlap != want {
			t.Errorf("upstream %q: the embedded default sets metrics.overlap %q, the processor's default is %q", upstream, cfg.Metrics.Overlap, want)
		}
	}
}
