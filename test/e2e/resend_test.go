package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/capture"
)

func dedupOnlyConfig(health, grpcAddr, sinkAddr string) string {
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
  otlp_grpc/sink:
    endpoint: %s
    tls: {insecure: true}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [dedup]
      exporters: [otlp_grpc/sink]
`, health, grpcAddr, sinkAddr)
}

// TestResentBatchesArriveOnce: a hop between the SDK and the gateway takes
// every batch, forwards it, and then answers Unavailable to every other
// request, so the SDK's exporter retries batches that had already arrived
// (opentelemetry-collector #11056). The sink sees each span once.
func TestResentBatchesArriveOnce(t *testing.T) {
	sk := newSink(t)
	grpcAddr, health := freePort(t), freePort(t)
	g := startGatewayConfig(t, health, dedupOnlyConfig(health, grpcAddr, sk.srv.Addr()))

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fwd := ptraceotlp.NewGRPCClient(conn)
	var mu sync.Mutex
	var requests, refused, forwardedSpans int
	flaky, err := capture.Listen("127.0.0.1:0", func(r *capture.Request) error {
		if r.Signal != capture.Traces {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := fwd.Export(ctx, ptraceotlp.NewExportRequestFromTraces(r.Traces)); err != nil {
			return status.Error(codes.Unavailable, "forwarding: "+err.Error())
		}
		mu.Lock()
		defer mu.Unlock()
		requests++
		forwardedSpans += r.Traces.SpanCount()
		if requests%2 == 1 {
			refused++
			return status.Error(codes.Unavailable, "delivered, but the answer is lost")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer flaky.Close()

	ctx := ctxTimeout(t, 2*time.Minute)
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(flaky.Addr()), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 20 * time.Millisecond, MaxInterval: 100 * time.Millisecond, MaxElapsedTime: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(10)))
	const spans = 60
	for range spans {
		_, s := tp.Tracer("resend").Start(ctx, "work")
		s.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("SDK shutdown: %v", err)
	}
	waitFor(t, 30*time.Second, "every span at the sink", func() bool { _, u := sk.counts(); return u >= spans })
	g.stop(t) // flushes whatever the gateway still holds, copies included

	mu.Lock()
	t.Logf("the hop forwarded %d spans in %d requests and refused %d of them after delivering", forwardedSpans, requests, refused)
	if forwardedSpans <= spans || refused == 0 {
		t.Fatalf("the hop forwarded %d spans for %d made: the test did not produce re-sent batches", forwardedSpans, spans)
	}
	mu.Unlock()
	if total, unique := sk.counts(); total != spans || unique != spans {
		t.Fatalf("sink: %d spans, %d distinct; want each of %d once; copies: %v", total, unique, spans, sk.copiesOver())
	}
}
