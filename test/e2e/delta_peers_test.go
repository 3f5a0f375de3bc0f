package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// deltaConfig is a gateway with the default dedup config writing what it
// forwards to a file, as OTLP JSON lines (the stand-in for a delta
// backend), and what it receives to raw, without dedup (for audit).
func deltaConfig(health, grpcAddr, path, raw string) string {
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
  file/raw:
    path: %s
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      processors: [dedup]
      exporters: [file]
    metrics/raw:
      receivers: [otlp]
      exporters: [file/raw]
`, health, grpcAddr, path, raw)
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
// (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta), the JS and Go
// SDKs, through the default dedup config into a file: the counts
// forwarded,
// every series added up, equal the events recorded: one reader; a second
// reader joined (a copy: dropped); 2 and 4 processes sharing one identity,
// each counting its own (peers: kept). And audit, reading what the
// gateway received, names each case as the gateway judges it (auditDelta).
func TestDefaultDeltaWriters(t *testing.T) {
	// The JS client honours the temporality variable too. 4 JS processes
	// on one beat, counting alike, are told apart by their histograms'
	// sums within the intervals' extremes (docs/metrics.md, "Delta
	// writers"). DOUBLETAKE_E2E_DELTA_KEEP=DIR keeps what the gateway
	// received and forwarded in each case.
	jsClient(t)
	goClient(t)
	sdks := []peersSDK{{"js", runJSWorker}, {"go", runGoWorker}}
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
				dir := t.TempDir()
				path, raw := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "raw.jsonl")
				g := startGatewayConfig(t, health, deltaConfig(health, grpcAddr, path, raw))
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
				if keep := os.Getenv("DOUBLETAKE_E2E_DELTA_KEEP"); keep != "" {
					// What the gateway received and forwarded, kept to
					// replay (a failing run's timing is not made again).
					outcome := "ok"
					if got != truth {
						outcome = "short"
					}
					for _, f := range []string{raw, path} {
						if b, err := os.ReadFile(f); err == nil {
							name := fmt.Sprintf("%s-%d-%s-%d-%s", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().Unix(), outcome, got, filepath.Base(f))
							_ = os.WriteFile(filepath.Join(keep, name), b, 0o644)
						}
					}
				}
				auditDelta(t, raw, tc.mode, tc.workers)
			})
		}
	}
}

// auditDelta audits what the gateway received (raw, before dedup) and
// checks that audit names the delta case as the gateway judges it: one
// reader, no later chain; a second reader, a copy (or not decided yet),
// never a peer; processes sharing one identity, peers; in its JSON
// (writer_rules) and its text's writer-rules line.
func auditDelta(t *testing.T, raw, mode string, workers int) {
	t.Helper()
	code, stdout, stderr := runAudit(t, "otlp", raw, "--format", "json")
	var rep struct {
		Analysis struct {
			Metrics struct {
				WriterRules *struct {
					Copies    int `json:"delta_copies"`
					Peers     int `json:"delta_peers"`
					Undecided int `json:"delta_undecided"`
				} `json:"writer_rules"`
			} `json:"metrics"`
		} `json:"analysis"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("audit (exit %d): %v\n%s\n%s", code, err, stdout, stderr)
	}
	w := rep.Analysis.Metrics.WriterRules
	t.Logf("audit of what the gateway received: writer rules %+v", w)
	switch {
	case workers == 1 && mode == "metrics-single":
		if w != nil {
			t.Errorf("one reader: audit names writer rules %+v", *w)
		}
		return
	case w == nil:
		t.Fatalf("audit names no delta chains:\n%s", stdout)
	case workers == 1 && (w.Peers != 0 || w.Copies+w.Undecided == 0):
		t.Errorf("a second reader: audit's delta chains %+v, want a copy or undecided, no peer", *w)
	case workers > 1 && w.Peers == 0:
		t.Errorf("%d processes: audit's delta chains %+v, want peers", workers, *w)
	}
	_, text, _ := runAudit(t, "otlp", raw)
	if !strings.Contains(text, "writer rules: delta chains: ") {
		t.Errorf("audit's text has no writer-rules line:\n%s", text)
	}
	if t.Failed() {
		t.Logf("audit of what the gateway received:\n%s", text)
	}
}
