package e2e

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// sideBySideConfig receives OTLP once and feeds two pipelines: one with
// dedup, one without, each with its own sink and spanmetrics connector, so
// one run shows the doubling and its fix side by side.
func sideBySideConfig(health, grpcAddr, httpAddr, plainSink, dedupSink string) string {
	return fmt.Sprintf(`
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  dedup: {}
connectors:
  span_metrics/plain:
    metrics_flush_interval: 200ms
  span_metrics/dedup:
    metrics_flush_interval: 200ms
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
    traces/plain:
      receivers: [otlp]
      exporters: [otlp_grpc/plain, span_metrics/plain]
    traces/dedup:
      receivers: [otlp]
      processors: [dedup]
      exporters: [otlp_grpc/dedup, span_metrics/dedup]
    metrics/plain:
      receivers: [span_metrics/plain]
      exporters: [otlp_grpc/plain]
    metrics/dedup:
      receivers: [span_metrics/dedup]
      exporters: [otlp_grpc/dedup]
`, health, grpcAddr, httpAddr, plainSink, dedupSink)
}

type sideBySide struct {
	g                  *gateway
	grpcAddr, httpAddr string
	plain, dedup       *sink
}

func startSideBySide(t *testing.T) *sideBySide {
	t.Helper()
	s := &sideBySide{grpcAddr: freePort(t), httpAddr: freePort(t), plain: newSink(t), dedup: newSink(t)}
	health := freePort(t)
	s.g = startGatewayConfig(t, health, sideBySideConfig(health, s.grpcAddr, s.httpAddr, s.plain.srv.Addr(), s.dedup.srv.Addr()))
	return s
}

// check waits until both sinks hold what a client that made `spans` spans
// and exported each twice must produce, then asserts: without dedup every
// span twice and span-metrics doubled; with dedup every span once and
// span-metrics exact.
func (s *sideBySide) check(t *testing.T, spans int) {
	t.Helper()
	waitFor(t, 60*time.Second, "every copy to reach the plain sink and every span the dedup sink", func() bool {
		pt, _ := s.plain.counts()
		_, du := s.dedup.counts()
		return pt >= 2*spans && du >= spans
	})
	arrived := time.Now()
	const calls = "traces.span.metrics.calls"
	var plainCalls, dedupCalls float64
	waitFor(t, 60*time.Second, "span-metrics flushed after the last span", func() bool {
		var ok1, ok2 bool
		plainCalls, ok1 = s.plain.sumOf(calls, arrived)
		dedupCalls, ok2 = s.dedup.sumOf(calls, arrived)
		return ok1 && ok2 && plainCalls >= float64(2*spans) && dedupCalls >= float64(spans)
	})
	s.g.stop(t) // flush what the gateway still holds before counting
	pt, pu := s.plain.counts()
	dt, du := s.dedup.counts()
	t.Logf("without dedup: %d spans (%d distinct), calls=%v; with dedup: %d spans (%d distinct), calls=%v", pt, pu, plainCalls, dt, du, dedupCalls)
	if pu != spans || pt != 2*spans {
		t.Errorf("without dedup: %d spans, %d distinct; want %d copies of %d (the doubling this test must see)", pt, pu, 2*spans, spans)
	}
	if plainCalls != float64(2*spans) {
		t.Errorf("without dedup: span-metrics calls = %v, want %d (doubled)", plainCalls, 2*spans)
	}
	if du != spans || dt != spans {
		t.Errorf("with dedup: %d spans, %d distinct; want each of %d exactly once; copies: %v", dt, du, spans, s.dedup.copiesOver())
	}
	if dedupCalls != float64(spans) {
		t.Errorf("with dedup: span-metrics calls = %v, want %d", dedupCalls, spans)
	}
}

// TestGoSDKTwoBatchSpanProcessors: a Go program whose TracerProvider has two
// BatchSpanProcessors, each with its own OTLP exporter (the FastAPI 0.142
// failure), through the real gateway.
func TestGoSDKTwoBatchSpanProcessors(t *testing.T) {
	s := startSideBySide(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	var opts []sdktrace.TracerProviderOption
	for range 2 {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(s.grpcAddr), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)))
	}
	res := resource.NewSchemaless(semconv.ServiceName("go-double"))
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res))...)
	tr := tp.Tracer("e2e")
	const rollouts = 40
	for i := range rollouts {
		c, root := tr.Start(ctx, "rollout", trace.WithSpanKind(trace.SpanKindServer))
		_, child := tr.Start(c, "verify")
		child.End()
		root.End()
		if i%10 == 9 {
			_ = tp.ForceFlush(ctx) // several export rounds, as a live process has
		}
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("SDK shutdown (flushes both processors): %v", err)
	}
	s.check(t, 2*rollouts)
}

// TestGatewayBadInputs: malformed OTLP gets the protocol's error status and
// the gateway goes on; a batch mixing valid and zero-id spans is delivered
// whole.
func TestGatewayBadInputs(t *testing.T) {
	s := startSideBySide(t)
	base := "http://" + s.httpAddr
	for _, tc := range []struct {
		name, path, ct, body string
		want                 int
	}{
		{"garbage protobuf", "/v1/traces", "application/x-protobuf", "\xff\xff\xff\x01", 400},
		{"garbage json", "/v1/traces", "application/json", "{\"resourceSpans\": [", 400},
		{"json of the wrong shape", "/v1/traces", "application/json", `{"resourceSpans": 7}`, 400},
		{"unsupported content type", "/v1/traces", "text/plain", "hello", 415},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, base+tc.path, tc.ct, tc.body)
			if code != tc.want {
				t.Fatalf("status %d (%s), want %d", code, body, tc.want)
			}
		})
	}
	t.Run("grpc garbage", func(t *testing.T) {
		code := grpcRaw(t, s.grpcAddr, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", []byte("\xff\xff\xff\x01"))
		// gRPC's own status for a request message it cannot decode.
		if code != "Internal" {
			t.Fatalf("malformed gRPC request answered %s, want Internal", code)
		}
	})
	// Valid and zero-id spans in one request: all delivered.
	mixed := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"mixed"}}]},"scopeSpans":[{"spans":[
	 {"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"valid","startTimeUnixNano":"1","endTimeUnixNano":"2"},
	 {"traceId":"00000000000000000000000000000000","spanId":"0102030405060709","name":"zero-trace","startTimeUnixNano":"1","endTimeUnixNano":"2"},
	 {"traceId":"0102030405060708090a0b0c0d0e0f11","spanId":"","name":"no-span-id","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`
	if code, body := post(t, base+"/v1/traces", "application/json", mixed); code != 200 {
		t.Fatalf("mixed batch: status %d (%s), want 200", code, body)
	}
	waitFor(t, 30*time.Second, "the mixed batch at both sinks", func() bool {
		pt, _ := s.plain.counts()
		dt, _ := s.dedup.counts()
		return pt >= 3 && dt >= 3
	})
	if dt, _ := s.dedup.counts(); dt != 3 {
		t.Fatalf("dedup sink got %d spans of the mixed batch, want all 3", dt)
	}
}
