package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// deltaConfig is a gateway with the default dedup config writing what it
// forwards to a file, as OTLP JSON lines (the stand-in for a delta
// backend).
func deltaConfig(health, grpcAddr, path string) string {
	return fmt.Sprintf(`
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
processors:
  dedup: {}
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:
  extensions: [health_check]
  pipelines:
    metrics:
      receivers: [otlp]
      processors: [dedup]
      exporters: [file]
`, health, grpcAddr, path)
}

// deltaCounted adds up the counter's delta points of service in the file,
// every series (labelled peers included).
func deltaCounted(t *testing.T, path, service string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var total int64
	var u pmetric.JSONUnmarshaler
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		md, err := u.UnmarshalMetrics(sc.Bytes())
		if err != nil {
			continue // a line being written
		}
		for _, rm := range md.ResourceMetrics().All() {
			if v, ok := rm.Resource().Attributes().Get("service.name"); !ok || v.Str() != service {
				continue
			}
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					if m.Name() != "rollouts" || m.Type() != pmetric.MetricTypeSum {
						continue
					}
					if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
						t.Fatalf("the counter is not delta: %v", m.Sum().AggregationTemporality())
					}
					for _, dp := range m.Sum().DataPoints().All() {
						switch dp.ValueType() {
						case pmetric.NumberDataPointValueTypeInt:
							total += dp.IntValue()
						case pmetric.NumberDataPointValueTypeDouble: // the JS SDK's counters
							total += int64(math.Round(dp.DoubleValue()))
						}
					}
				}
			}
		}
	}
	return total
}

// TestDefaultDeltaWriters: the cases with delta temporality
// (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta), the Go SDK,
// through the default dedup config into a file: the counts forwarded,
// every series added up, equal the events recorded: one reader; a second
// reader joined (a copy: dropped); 2 and 4 processes sharing one identity,
// each counting its own (peers: kept).
func TestDefaultDeltaWriters(t *testing.T) {
	// The Go SDK only: with the JS SDK (whose client honours the variable
	// too) a process of 2 or 4 was still undecided when every process
	// stopped in 2 of 9 runs here, and its counts were held, not sent
	// (docs/metrics.md, "Delta writers").
	goClient(t)
	sdks := []peersSDK{{"go", runGoWorker}}
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta") // the clients inherit it
	for _, sdk := range sdks {
		for _, tc := range []struct {
			name    string
			mode    string
			workers int
			events  int
		}{
			{"one reader", "metrics-single", 1, peersEvents},
			{"a second reader joins", "metrics-double", 1, copyEvents},
			{"2 workers", "metrics-single", 2, sharedEvents},
			{"4 workers", "metrics-single", 4, sharedEvents},
		} {
			t.Run(sdk.name+"/"+tc.name, func(t *testing.T) {
				grpcAddr, health := freePort(t), freePort(t)
				path := filepath.Join(t.TempDir(), "out.jsonl")
				g := startGatewayConfig(t, health, deltaConfig(health, grpcAddr, path))
				service := fmt.Sprintf("delta-%d-%s", tc.workers, tc.mode)
				ws := runWorkers(t, sdk, tc.workers, grpcAddr, tc.mode, service, tc.events, "0")
				truth := int64(0)
				for _, w := range ws {
					truth += int64(w.events)
				}
				// Every export is in before the clients exit; the file is
				// flushed every 100 ms: poll it, bounded.
				var got int64
				deadline := time.Now().Add(20 * time.Second)
				for got = deltaCounted(t, path, service); got != truth && time.Now().Before(deadline); got = deltaCounted(t, path, service) {
					time.Sleep(100 * time.Millisecond)
				}
				g.stop(t)
				if got = deltaCounted(t, path, service); got != truth {
					t.Errorf("%d counted in the file, want the %d events recorded", got, truth)
				}
			})
		}
	}
}
