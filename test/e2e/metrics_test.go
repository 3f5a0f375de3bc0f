package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// metricsRun is a gateway in front of a real Prometheus, with a pipeline
// without dedup and one with it, and the JS client's endpoint.
type metricsRun struct {
	prom     *prometheus
	g        *gateway
	endpoint string
	grpcAddr string
}

func startMetricsRun(t *testing.T, dedupYAML string) *metricsRun {
	t.Helper()
	jsClient(t) // install before starting anything
	prom := startPrometheus(t)
	grpcAddr, httpAddr, health := freePort(t), freePort(t), freePort(t)
	g := startGatewayConfig(t, health, metricsSideBySideConfig(health, grpcAddr, httpAddr, prom.writeURL(), dedupYAML))
	return &metricsRun{prom: prom, g: g, endpoint: "http://" + grpcAddr, grpcAddr: grpcAddr}
}

// jsMetrics runs the JS client's metric workload: rollouts iterations,
// recording one counter add and one histogram sample each.
func (m *metricsRun) jsMetrics(t *testing.T, mode string, rollouts int, extra ...string) jsResult {
	t.Helper()
	env := append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + m.endpoint, "CLIENT_PROTOCOL=grpc", "CLIENT_MODE=" + mode,
		"CLIENT_ROLLOUTS=" + strconv.Itoa(rollouts), "CLIENT_ROLLOUT_MS=100",
		// The second pipeline joins half an interval from the first one's
		// exports: joined right after one, with its first export arriving
		// before the first one's next, it looks like a restart for that
		// point (docs/metrics.md, "What the rule cannot do"); half a
		// second either side keeps scheduling delays from making that case.
		"CLIENT_METRIC_INTERVAL_MS=1000", "CLIENT_SECOND_DELAY_MS=1500", "CLIENT_SERVICE=rollout-svc",
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

// TestRestartKeepsItsReset: a process exports a counter through the Go
// SDK's periodic reader and shuts down (a final flush), and a new process
// takes over the same identity, as after a restart. A restart is not an
// overlap: with dedup Prometheus stores every point of both lives, as
// without, and the one genuine reset. The new life exports every 150 ms,
// the old one every 400 ms, so its first point comes sooner after the old
// life's flush than one of the old writer's intervals: the old rule (wait
// until the elected writer looks quiet for its interval) dropped it, as it
// did on a loaded machine with equal intervals when one late export had
// raised the old writer's observed interval (the deterministic cases:
// streams' TestRestartInterleavings and the golden case
// restart_late_tick). The test sets the values (the old life ends at 15,
// the new one stays below) and waits for exports by condition, so the reset
// and the counts do not depend on timing, and the Go reader exports one
// request at a time (nothing arrives out of order).
func TestRestartKeepsItsReset(t *testing.T) {
	m := startMetricsRun(t, "    mode: drop")
	ctx := ctxTimeout(t, 2*time.Minute)
	res := resource.NewSchemaless(attribute.String("service.name", "rollout-svc"))
	exported := 0
	life := func(interval time.Duration, adds ...int64) {
		exp, err := otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(m.grpcAddr), otlpmetricgrpc.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		c := &countingExporter{Exporter: exp}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(c, sdkmetric.WithInterval(interval))))
		rollouts, err := mp.Meter("doubletake-e2e").Int64Counter("rollouts", metric.WithUnit("1"))
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range adds {
			rollouts.Add(ctx, n)
			waitFor(t, 30*time.Second, fmt.Sprintf("periodic export %d", i+1), func() bool { return c.points() > i })
		}
		if err := mp.Shutdown(ctx); err != nil { // the final flush
			t.Fatal(err)
		}
		exported += c.points()
	}
	life(400*time.Millisecond, 5, 5, 5) // 5, 10, 15 and, at the flush, 15
	life(150*time.Millisecond, 1, 1, 1) // 1, 2, 3 and 3: one reset
	waitFor(t, 60*time.Second, "every exported point without dedup", func() bool {
		p, ok := m.prom.scalar(t, "count_over_time("+sel(counter, "plain")+anyRange+")")
		return ok && p >= float64(exported)
	})
	m.g.stop(t) // its exporters' queues drain as it stops
	if d := m.prom.mustScalar(t, "resets("+sel(counter, "dedup")+anyRange+")"); d != 1 {
		t.Errorf("with dedup: resets() = %v, want exactly the one genuine restart", d)
	}
	plainN := m.prom.mustScalar(t, "count_over_time("+sel(counter, "plain")+anyRange+")")
	dedupN := m.prom.mustScalar(t, "count_over_time("+sel(counter, "dedup")+anyRange+")")
	if plainN != float64(exported) || dedupN != float64(exported) {
		t.Errorf("with dedup %v samples stored, without %v, exported %d: a restart must lose no point", dedupN, plainN, exported)
	}
	t.Logf("restart: %d points exported; stored without dedup %v, with %v", exported, plainN, dedupN)
}

// countingExporter counts the points of the counter "rollouts" that its
// exporter delivered.
type countingExporter struct {
	sdkmetric.Exporter
	mu sync.Mutex
	n  int
}

func (c *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := c.Exporter.Export(ctx, rm); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if sum, ok := md.Data.(metricdata.Sum[int64]); ok && md.Name == "rollouts" {
				c.n += len(sum.DataPoints)
			}
		}
	}
	return nil
}

func (c *countingExporter) points() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestSplitKeepsEveryWriter: two processes share one identity (no
// service.instance.id). With overlap: split each keeps its own series, so the
// sum of the last values is every measurement made.
func TestSplitKeepsEveryWriter(t *testing.T) {
	m := startMetricsRun(t, "    metrics:\n      overlap: split")
	const rollouts = 20
	var wg sync.WaitGroup
	results := make([]jsResult, 2)
	// The JS SDK stamps a stream's start in milliseconds at its first
	// measurement: two processes started together can stamp one start,
	// and are then one writer that nothing in OTLP tells apart
	// (docs/metrics.md; it happened in CI here). Their workloads start
	// 200 ms apart, after a second for node to load.
	t0 := time.Now().Add(time.Second)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = m.jsMetrics(t, "metrics-single", rollouts, "CLIENT_ROLLOUT_MS="+strconv.Itoa(90+20*i),
				"CLIENT_START_AT_MS="+strconv.FormatInt(t0.Add(time.Duration(i)*200*time.Millisecond).UnixMilli(), 10))
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
