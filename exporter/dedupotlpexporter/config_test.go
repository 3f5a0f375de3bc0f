package dedupotlpexporter

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// TestUpstreamConfigKeepsOTLPKeys: the wrapper takes every otlp_grpc key
// plus its own, and refuses a batch that could exceed max_request_bytes.
func TestUpstreamConfigKeepsOTLPKeys(t *testing.T) {
	_, tb := dedupprocessor.NewFactoryWithTakeBack()
	f := NewGRPCFactory(tb)
	load := func(raw map[string]any) (*Config, error) {
		cfg := f.CreateDefaultConfig().(*Config)
		if err := confmap.NewFromStringMap(raw).Unmarshal(cfg); err != nil {
			return nil, err
		}
		return cfg, confmap.Validate(cfg)
	}
	cfg, err := load(map[string]any{
		"endpoint": "upstream:4317", "dedup": "dedup/x", "max_request_bytes": 1 << 20,
		"sending_queue": map[string]any{"enabled": true, "sizer": "bytes", "queue_size": 1 << 24,
			"batch": map[string]any{"flush_timeout": "100ms", "sizer": "bytes", "max_size": 1 << 20}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dedup != component.MustNewIDWithName("dedup", "x") || cfg.MaxRequestBytes != 1<<20 {
		t.Fatalf("own keys not read: %+v", cfg)
	}
	if q, _ := queueAndRetry(cfg.Exporter); !q.HasValue() || q.Get().QueueSize != 1<<24 {
		t.Fatal("the queue settings did not reach the exporter config")
	}
	for _, bad := range []map[string]any{
		{"endpoint": "u:1", "sending_queue": map[string]any{"batch": map[string]any{"flush_timeout": "1s", "sizer": "items", "max_size": 100}}},
		{"endpoint": "u:1", "max_request_bytes": 1 << 20, "sending_queue": map[string]any{"sizer": "bytes", "queue_size": 1 << 24, "batch": map[string]any{"flush_timeout": "1s", "max_size": 2 << 20}}},
	} {
		if _, err := load(bad); err == nil || !strings.Contains(err.Error(), "sending_queue::batch") {
			t.Errorf("%v: err = %v, want one naming sending_queue::batch", bad, err)
		}
	}
}
