package e2e

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/doubletake/doubletake/internal/capture"
)

// outage is how long the upstream is down: the 60 s.
const outage = 60 * time.Second

// TestUpstreamOutage: the embedded default with --upstream, while the
// upstream is down for 60 s under load with duplicates, then back: every
// span is delivered exactly once, from the persistent queue.
func TestUpstreamOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a 60 s outage; not in -short runs")
	}
	upstream, free := heldPort(t) // refused, and no one else's, until it comes back
	d := startDefault(t, "--upstream", "http://"+upstream)

	ctx := ctxTimeout(t, 3*time.Minute)
	var opts []sdktrace.TracerProviderOption
	// Two exporters on one provider: every span is sent twice.
	for range 2 {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(d.grpc), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond)))
	}
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("outage"))))...)
	made := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(outage); time.Now().Before(end); {
		<-tick.C
		_, s := tp.Tracer("outage").Start(ctx, "op")
		s.End()
		made++
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("SDK shutdown: %v (the gateway must accept while the upstream is down)", err)
	}

	// The upstream comes back.
	sk := &sink{spans: map[[24]byte]int{}}
	free()
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	waitFor(t, 2*time.Minute, "the queue to drain into the upstream", func() bool { _, u := sk.counts(); return u >= made })
	d.g.stop(t)
	total, unique := sk.counts()
	t.Logf("%d spans made during a %s outage, each sent twice; upstream received %d (%d distinct)", made, outage, total, unique)
	if total != made || unique != made {
		t.Fatalf("upstream got %d spans, %d distinct; want each of %d once; copies: %v", total, unique, made, sk.copiesOver())
	}
}
