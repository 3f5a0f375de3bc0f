package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

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
	return s.deltaSumsOf(deltaService, name)
}

// deltaSumsOf is deltaSums for service.
func (s *sink) deltaSumsOf(service, name string) (value, count, sum float64, points int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.metrics {
		rms := e.md.ResourceMetrics()
		for a := 0; a < rms.Len(); a++ {
			if v, _ := rms.At(a).Resource().Attributes().Get("service.name"); v.Str() != service {
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

// TestFastAPIWorkersDelta: the "processes share one resource"
// rows for the Python SDK with delta temporality: gunicorn -w 4 uvicorn
// workers, the SDK set up in each (after the fork), a hand-built resource
// (one identity), each worker counting the requests it serves (192, one
// every 100 ms, about 19 s) and the pre-start value it records at import.
// Every worker's deltas are its own: without dedup the sums are the truth
// (no copies), and with dedup they must still be (the workers are peers:
// kept, each as its own series). The Python SDK exports no delta point
// for an interval without measurements: each worker's chain goes on across
// such intervals, found and known empty by the worker's exports (the HTTP
// instrumentation's up-down counter is in every one: docs/metrics.md,
// "Empty intervals, known from the export"). DOUBLETAKE_E2E_DELTA_KEEP=DIR
// keeps what the gateway received.
func TestFastAPIWorkersDelta(t *testing.T) {
	venv := pyVenv(t, "fastapi-0.143")
	plain, dedup := newSink(t), newSink(t)
	httpAddr, health := freePort(t), freePort(t)
	g := startGatewayConfig(t, health, fastAPIDeltaConfig(health, httpAddr, plain.srv.Addr(), dedup.srv.Addr()))
	const service = "seed-workers-delta"
	addr := freePort(t)
	argv := []string{filepath.Join(venv, "bin", "python"), "-m", "gunicorn", "-w", strconv.Itoa(seedWorkers), "-k", "uvicorn.workers.UvicornWorker",
		"--bind", addr, "--graceful-timeout", "20", "seed_app:app"}
	s := startPyServer(t, "gunicorn delta", addr, pyEnv(venv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+httpAddr, "SEED_SERVICE="+service,
		"SEED_RESOURCE=hand", "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta", seedInterval), argv...)
	truths, err := seedWorkload(s, 8*seedRequests)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	g.stop(t)
	// Every worker records the pre-start value at import; those that
	// served no request report it alone.
	jobs, samples, histSum, served := seedWorkers*seedPrestart, seedWorkers, float64(seedWorkers*seedPrestart), 0
	for _, tr := range truths {
		served += tr.served
		jobs += tr.served
		samples += tr.served
		histSum += tr.histSum - seedPrestart
	}
	if keep := os.Getenv("DOUBLETAKE_E2E_DELTA_KEEP"); keep != "" {
		// What the gateway received (the plain pipeline's output, in
		// arrival order), kept to replay.
		plain.keepMetrics(t, filepath.Join(keep, fmt.Sprintf("%s-%d-raw.jsonl", t.Name(), time.Now().Unix())))
	}
	pv, _, _, pp := plain.deltaSumsOf(service, "seed.jobs")
	dv, _, _, dp := dedup.deltaSumsOf(service, "seed.jobs")
	_, pc, ps, _ := plain.deltaSumsOf(service, "seed.job.duration")
	_, dc, ds, _ := dedup.deltaSumsOf(service, "seed.job.duration")
	t.Logf("%d workers, %d of them served %d requests: seed.jobs (truth %d) without dedup %v in %d delta points, with dedup %v in %d; seed.job.duration (truth count %d, sum %v) without dedup %v/%v, with dedup %v/%v",
		seedWorkers, len(truths), served, jobs, pv, pp, dv, dp, samples, histSum, pc, ps, dc, ds)
	if pv != float64(jobs) || pc != float64(samples) || ps != histSum {
		t.Errorf("without dedup: seed.jobs %v, histogram count %v sum %v; want the truth %d, %d, %v (no copies: nothing to drop)", pv, pc, ps, jobs, samples, histSum)
	}
	if dv != float64(jobs) || dc != float64(samples) || ds != histSum {
		t.Errorf("with dedup: seed.jobs %v, histogram count %v sum %v; want the truth %d, %d, %v", dv, dc, ds, jobs, samples, histSum)
	}
}

// keepMetrics writes the metric exports s received, in order, as OTLP JSON
// lines to path.
func (s *sink) keepMetrics(t *testing.T, path string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var b []byte
	var m pmetric.JSONMarshaler
	for _, e := range s.metrics {
		line, err := m.MarshalMetrics(e.md)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Error(err)
	}
}
