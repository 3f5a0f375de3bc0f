package e2e

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// metricsRun is a gateway in front of a real Prometheus, with a pipeline
// without dedup and one with it, and the JS client's endpoint.
type metricsRun struct {
	prom     *prometheus
	g        *gateway
	endpoint string
}

func startMetricsRun(t *testing.T, dedupYAML string) *metricsRun {
	t.Helper()
	jsClient(t) // install before starting anything
	prom := startPrometheus(t)
	grpcAddr, httpAddr, health := freePort(t), freePort(t), freePort(t)
	g := startGatewayConfig(t, health, metricsSideBySideConfig(health, grpcAddr, httpAddr, prom.writeURL(), dedupYAML))
	return &metricsRun{prom: prom, g: g, endpoint: "http://" + grpcAddr}
}

// jsMetrics runs the JS client's metric workload: rollouts iterations,
// recording one counter add and one histogram sample each.
func (m *metricsRun) jsMetrics(t *testing.T, mode string, rollouts int, extra ...string) jsResult {
	t.Helper()
	env := append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + m.endpoint, "CLIENT_PROTOCOL=grpc", "CLIENT_MODE=" + mode,
		"CLIENT_ROLLOUTS=" + strconv.Itoa(rollouts), "CLIENT_ROLLOUT_MS=100",
		"CLIENT_METRIC_INTERVAL_MS=400", "CLIENT_SECOND_DELAY_MS=1500", "CLIENT_SERVICE=rollout-svc",
	}, extra...)
	return runJS(t, env...)
}

const (
	counter  = "rollouts_total"
	histSum  = "rollout_duration_ms_milliseconds_sum"
	histCnt  = "rollout_duration_ms_milliseconds_count"
	anyRange = "[1h]"
)

func sel(metric, pipeline string) string {
	return fmt.Sprintf(`%s{pipeline=%q}`, metric, pipeline)
}

// TestSecondMetricPipelineNoResets: the JS SDK exports every instrument
// through a second pipeline with fresh state, started 1.5 s after the first
// (the FastAPI 0.142 failure). Without dedup Prometheus sees counter resets
// at the interleaves; with dedup it sees none, and the counter ends at the
// number of measurements.
func TestSecondMetricPipelineNoResets(t *testing.T) {
	m := startMetricsRun(t, "    mode: drop")
	const rollouts = 30
	r := m.jsMetrics(t, "metrics-double", rollouts)
	if r.Rollouts != rollouts {
		t.Fatalf("client made %d measurements, want %d", r.Rollouts, rollouts)
	}
	waitFor(t, 60*time.Second, "the final counter value in Prometheus", func() bool {
		v, ok := m.prom.scalar(t, sel(counter, "dedup"))
		return ok && v >= rollouts
	})
	m.g.stop(t)
	for _, metric := range []string{counter, histSum, histCnt} {
		plain := m.prom.mustScalar(t, "resets("+sel(metric, "plain")+anyRange+")")
		dedup := m.prom.mustScalar(t, "resets("+sel(metric, "dedup")+anyRange+")")
		t.Logf("%s: resets without dedup %v, with dedup %v", metric, plain, dedup)
		if dedup != 0 {
			t.Errorf("%s with dedup: resets() = %v, want 0", metric, dedup)
		}
		if metric != histSum && plain == 0 {
			t.Errorf("%s without dedup: resets() = 0; the second writer did not interleave, so the test shows nothing", metric)
		}
	}
	if v := m.prom.mustScalar(t, sel(counter, "dedup")); v != rollouts {
		t.Errorf("counter with dedup ends at %v, want %d (one per measurement)", v, rollouts)
	}
	if v := m.prom.mustScalar(t, sel(histCnt, "dedup")); v != rollouts {
		t.Errorf("histogram count with dedup ends at %v, want %d", v, rollouts)
	}
}

// TestRestartKeepsItsReset: a pipeline shut down and a new one started (a
// process restart) is not an overlap: its one genuine reset and all of its
// points pass.
func TestRestartKeepsItsReset(t *testing.T) {
	m := startMetricsRun(t, "    mode: drop")
	r := m.jsMetrics(t, "metrics-restart", 30)
	waitFor(t, 60*time.Second, "samples after the restart in both pipelines", func() bool {
		p, ok1 := m.prom.scalar(t, "resets("+sel(counter, "plain")+anyRange+")")
		d, ok2 := m.prom.scalar(t, "resets("+sel(counter, "dedup")+anyRange+")")
		return ok1 && ok2 && p >= 1 && d >= 1
	})
	m.g.stop(t)
	if d := m.prom.mustScalar(t, "resets("+sel(counter, "dedup")+anyRange+")"); d != 1 {
		t.Errorf("with dedup: resets() = %v, want exactly the one genuine restart", d)
	}
	plainN := m.prom.mustScalar(t, "count_over_time("+sel(counter, "plain")+anyRange+")")
	dedupN := m.prom.mustScalar(t, "count_over_time("+sel(counter, "dedup")+anyRange+")")
	if plainN != dedupN {
		t.Errorf("with dedup %v samples stored, without %v: a restart must lose no point", dedupN, plainN)
	}
	t.Logf("restart: %d measurements, %v samples each way", r.Rollouts, dedupN)
}

// TestSplitKeepsEveryWriter: two processes share one identity (no
// service.instance.id). With overlap: split each keeps its own series, so the
// sum of the last values is every measurement made.
func TestSplitKeepsEveryWriter(t *testing.T) {
	m := startMetricsRun(t, "    metrics:\n      overlap: split")
	const rollouts = 20
	var wg sync.WaitGroup
	results := make([]jsResult, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = m.jsMetrics(t, "metrics-single", rollouts, "CLIENT_ROLLOUT_MS="+strconv.Itoa(90+20*i))
		}()
	}
	wg.Wait()
	total := float64(results[0].Rollouts + results[1].Rollouts)
	waitFor(t, 60*time.Second, "both writers' final values", func() bool {
		v, ok := m.prom.scalar(t, "sum("+sel(counter, "dedup")+")")
		return ok && v >= total
	})
	m.g.stop(t)
	if v := m.prom.mustScalar(t, "sum("+sel(counter, "dedup")+")"); v != total {
		t.Errorf("split: sum of last values = %v, want %v", v, total)
	}
	if v := m.prom.mustScalar(t, "count("+sel(counter, "dedup")+")"); v != 2 {
		t.Errorf("split: %v series, want 2 (one per writer)", v)
	}
	if v := m.prom.mustScalar(t, "sum(resets("+sel(counter, "dedup")+anyRange+"))"); v != 0 {
		t.Errorf("split: %v resets over both series, want 0", v)
	}
}
