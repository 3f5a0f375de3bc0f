package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Issue 36, case 2: the seed with OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_
// PREFERENCE=delta. Both readers export deltas; a second reader's deltas
// cover the same measurements again, so without dedup every sum doubles
// and no reset shows it. Delta sums do not go to Prometheus (its remote
// write takes cumulative streams): the gateway's output goes to two
// capturing OTLP sinks, without and with dedup, and the test adds up every
// delta point.

// fastAPIDeltaConfig: metrics without and with dedup to two OTLP sinks.
func fastAPIDeltaConfig(health, httpAddr, plainSink, dedupSink string) string {
	return fmt.Sprintf(`
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  dedup: {}
exporters:
  otlp_grpc/plain:
    endpoint: %s
    tls: {insecure: true}
  otlp_grpc/dedup:
    endpoint: %s
    tls: {insecure: true}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics/plain:
      receivers: [otlp]
      exporters: [otlp_grpc/plain]
    metrics/dedup:
      receivers: [otlp]
      processors: [dedup]
      exporters: [otlp_grpc/dedup]
`, health, httpAddr, plainSink, dedupSink)
}

// deltaService is the delta case's service.name.
const deltaService = "seed-delta"

// deltaSums adds up, over every export the sink received, the delta points
// of deltaService's Sum metric name (value) or Histogram name (count and
// sum).
func (s *sink) deltaSums(name string) (value, count, sum float64, points int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.metrics {
		rms := e.md.ResourceMetrics()
		for a := 0; a < rms.Len(); a++ {
			if v, _ := rms.At(a).Resource().Attributes().Get("service.name"); v.Str() != deltaService {
				continue
			}
			sms := rms.At(a).ScopeMetrics()
			for b := 0; b < sms.Len(); b++ {
				ms := sms.At(b).Metrics()
				for c := 0; c < ms.Len(); c++ {
					m := ms.At(c)
					if m.Name() != name {
						continue
					}
					switch m.Type() {
					case pmetric.MetricTypeSum:
						if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
							continue
						}
						for d := 0; d < m.Sum().DataPoints().Len(); d++ {
							dp := m.Sum().DataPoints().At(d)
							points++
							if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
								value += float64(dp.IntValue())
							} else {
								value += dp.DoubleValue()
							}
						}
					case pmetric.MetricTypeHistogram:
						if m.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
							continue
						}
						for d := 0; d < m.Histogram().DataPoints().Len(); d++ {
							dp := m.Histogram().DataPoints().At(d)
							points++
							count += float64(dp.Count())
							sum += dp.Sum()
						}
					}
				}
			}
		}
	}
	return value, count, sum, points
}

// TestFastAPISeedDelta: FastAPI 0.142.4 under uvicorn with delta
// temporality. Without dedup every delta sum is the truth plus FastAPI's
// reader's share again; with dedup the sums are the truth.
func TestFastAPISeedDelta(t *testing.T) {
	venv := pyVenv(t, "fastapi-0.142")
	plain, dedup := newSink(t), newSink(t)
	httpAddr, health := freePort(t), freePort(t)
	g := startGatewayConfig(t, health, fastAPIDeltaConfig(health, httpAddr, plain.srv.Addr(), dedup.srv.Addr()))
	const service = deltaService
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	s := startPyServer(t, "uvicorn delta", addr, pyEnv(venv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+httpAddr, "SEED_SERVICE="+service,
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta", seedInterval),
		filepath.Join(venv, "bin", "python"), "-m", "uvicorn", "seed_app:app", "--host", "127.0.0.1", "--port", port, "--no-access-log")
	truths, err := seedWorkload(s, seedRequests)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	g.stop(t)
	var truth *seedTruth
	for _, v := range truths {
		truth = v
	}
	pv, _, _, pp := plain.deltaSums("seed.jobs")
	dv, _, _, dp := dedup.deltaSums("seed.jobs")
	_, pc, ps, php := plain.deltaSums("seed.job.duration")
	_, dc, ds, dhp := dedup.deltaSums("seed.job.duration")
	t.Logf("seed.jobs (truth %d): without dedup %v in %d delta points; with dedup %v in %d", truth.jobs, pv, pp, dv, dp)
	t.Logf("seed.job.duration (truth count %d, sum %v): without dedup count %v sum %v in %d delta points; with dedup count %v sum %v in %d",
		truth.samples, truth.histSum, pc, ps, php, dc, ds, dhp)
	// Without dedup FastAPI's reader adds every measurement after startup
	// again: the truth less the pre-start value, doubled, plus it.
	if want := float64(2*truth.jobs - seedPrestart); pv != want {
		t.Errorf("seed.jobs without dedup: %v, want %v (every request counted twice: the failure this test must see)", pv, want)
	}
	if dv != float64(truth.jobs) || dc != float64(truth.samples) || ds != truth.histSum {
		t.Errorf("with dedup: seed.jobs %v, histogram count %v sum %v; want %d, %d, %v", dv, dc, ds, truth.jobs, truth.samples, truth.histSum)
	}
}
