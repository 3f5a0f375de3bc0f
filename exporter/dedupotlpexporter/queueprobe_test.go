package dedupotlpexporter

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/doubletake/doubletake/internal/admission"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// TestQueueDepthReachesDedup: the dedup_otlp_grpc exporter reports its
// sending queue to the dedup processor it names while it runs (what the
// status page shows), the same numbers as otelcol_exporter_queue_size and
// _capacity, while its upstream does not answer and the queue fills.
func TestQueueDepthReachesDedup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens: every send fails and is retried

	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	exp, tb := newUpstreamTraces(t, map[string]any{
		"endpoint": dead, "tls": map[string]any{"insecure": true}, "dedup": "dedup",
		"retry_on_failure": map[string]any{"enabled": true, "initial_interval": "10s", "max_elapsed_time": 0},
		"sending_queue":    map[string]any{"enabled": true, "sizer": "bytes", "queue_size": 1 << 20},
	}, tel)
	dedup := component.NewID(dedupprocessor.Type)
	if q := tb.Queues(dedup); len(q) != 0 {
		t.Fatalf("queues %+v before the exporter started", q)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	shut := false
	defer func() {
		if !shut {
			_ = exp.Shutdown(context.Background())
		}
	}()
	for range 3 {
		if err := exp.ConsumeTraces(context.Background(), spansOf(10, func(int) string { return "op" })); err != nil {
			t.Fatal(err)
		}
	}
	gauge := func(name string) int64 {
		m, err := tel.GetMetric(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value
	}
	var q []dedupprocessor.QueueStatus
	deadline := time.Now().Add(10 * time.Second)
	for {
		q = tb.Queues(dedup)
		if len(q) == 1 && q[0].Size > 0 && q[0].Size == gauge("otelcol_exporter_queue_size") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queues %+v, want the exporter's queue holding what it was sent (otelcol_exporter_queue_size %d)", q, gauge("otelcol_exporter_queue_size"))
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	if q[0].Exporter != "dedup_otlp_grpc/upstream" || q[0].Signal != "traces" || q[0].Sizer != "bytes" ||
		q[0].Capacity != 1<<20 || q[0].Capacity != gauge("otelcol_exporter_queue_capacity") {
		t.Errorf("queue %+v", q[0])
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	shut = true
	if q := tb.Queues(dedup); len(q) != 0 {
		t.Errorf("queues %+v after the exporter shut down", q)
	}
}

// newUpstreamTraces makes the traces exporter of a dedup_otlp_grpc/upstream
// configured by raw (validated), with the TakeBack it reports to, and the
// telemetry tel (nil: none, as with the service's metrics off); opts
// change its settings.
func newUpstreamTraces(t *testing.T, raw map[string]any, tel *componenttest.Telemetry, opts ...func(*exporter.Settings)) (exporter.Traces, *dedupprocessor.TakeBack) {
	t.Helper()
	_, tb := dedupprocessor.NewFactoryWithTakeBack()
	f := NewGRPCFactory(tb)
	cfg := f.CreateDefaultConfig().(*Config)
	if err := confmap.NewFromStringMap(raw).Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	set := exportertest.NewNopSettings(Type)
	set.ID = component.MustNewIDWithName("dedup_otlp_grpc", "upstream")
	if tel != nil {
		set.TelemetrySettings = tel.NewTelemetrySettings()
	}
	for _, o := range opts {
		o(&set)
	}
	exp, err := f.CreateTraces(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exp, tb
}

// TestFreeFollowsTheQueue: the room the receivers' servers see is the
// queue's capacity less what its gauge says it holds, read again only once
// the last reading is roomMaxAge old; a request that reaches the exporter
// enters its route (internal/admission).
func TestFreeFollowsTheQueue(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens: the queue keeps what it is given

	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	exp, _ := newUpstreamTraces(t, map[string]any{
		"endpoint": dead, "tls": map[string]any{"insecure": true}, "dedup": "dedup",
		"retry_on_failure": map[string]any{"enabled": true, "initial_interval": "10s", "max_elapsed_time": 0},
		"sending_queue":    map[string]any{"enabled": true, "sizer": "bytes", "queue_size": 1 << 20},
	}, tel)
	up := exp.(*tracesExporter).up
	clock := int64(1)
	up.room.now = func() int64 { return clock }
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	if free, unit := up.Free(); free != 1<<20 || unit != admission.Bytes {
		t.Fatalf("empty queue: free %d unit %v, want %d bytes", free, unit, 1<<20)
	}
	size := func() int64 {
		m, err := tel.GetMetric("otelcol_exporter_queue_size")
		if err != nil {
			t.Fatal(err)
		}
		return m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value
	}
	for range 3 {
		ctx, route := admission.NewContext(context.Background())
		if err := exp.ConsumeTraces(ctx, spansOf(10, func(int) string { return "op" })); err != nil {
			t.Fatal(err)
		}
		if !route.Reached() {
			t.Fatal("a request the exporter took did not enter its route")
		}
	}
	// The first entry may be taken from the queue for the first send; the
	// rest stay while the upstream does not answer.
	deadline := time.Now().Add(10 * time.Second)
	for s := size(); s == 0; s = size() {
		if time.Now().After(deadline) {
			t.Fatal("the queue never held what it was given")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	if free, _ := up.Free(); free != 1<<20 {
		t.Fatalf("free %d within roomMaxAge of the last reading, want that reading (%d)", free, 1<<20)
	}
	clock += int64(roomMaxAge)
	free, _ := up.Free()
	if want := int64(1<<20) - size(); free != want {
		t.Fatalf("free %d after roomMaxAge, want capacity less the gauge's size: %d", free, want)
	}
}
