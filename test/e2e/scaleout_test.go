package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// scaleOut runs examples/scale-out as written: two front collectors with
// the loadbalancing exporter in front of two doubletake gateways, each
// forwarding to a sink of its own (so the test sees who got what).
type scaleOut struct {
	fronts []string // OTLP/gRPC addresses of the fronts
	sinks  []*sink  // one per gateway
	gws    []*gateway
}

func startScaleOut(t *testing.T) *scaleOut {
	t.Helper()
	dir := filepath.Join(repoRoot, "examples", "scale-out")
	s := &scaleOut{}
	gwAddrs := []string{freePort(t), freePort(t)}
	for _, addr := range gwAddrs {
		health := freePort(t)
		sk := newSink(t)
		s.sinks = append(s.sinks, sk)
		s.gws = append(s.gws, startGateway(t, health,
			[]string{"GATEWAY_GRPC=" + addr, "GATEWAY_HEALTH=" + health, "UPSTREAM=" + sk.srv.Addr()},
			"--config", filepath.Join(dir, "gateway.yaml")))
	}
	for range 2 {
		addr, health := freePort(t), freePort(t)
		startGateway(t, health,
			[]string{"FRONT_GRPC=" + addr, "FRONT_HEALTH=" + health, "GATEWAY_1=" + gwAddrs[0], "GATEWAY_2=" + gwAddrs[1]},
			"--config", filepath.Join(dir, "front.yaml"))
		s.fronts = append(s.fronts, addr)
	}
	return s
}

// TestScaleOutSpans: a process with two exporters, each sending to a
// different front: every span reaches a sink once, and both gateways took
// part.
func TestScaleOutSpans(t *testing.T) {
	s := startScaleOut(t)
	ctx := ctxTimeout(t, time.Minute)
	var opts []sdktrace.TracerProviderOption
	for _, front := range s.fronts {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(front), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("scaled"))))...)
	const traces = 100
	for range traces {
		c, root := tp.Tracer("scale").Start(ctx, "root")
		_, child := tp.Tracer("scale").Start(c, "child")
		child.End()
		root.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "every span at the sinks", func() bool { return s.unique() >= 2*traces })
	for _, g := range s.gws {
		g.stop(t) // flush what the gateways hold, copies included
	}
	all := map[[24]byte]int{}
	for i, sk := range s.sinks {
		sk.mu.Lock()
		for k, n := range sk.spans {
			all[k] += n
		}
		got := len(sk.spans)
		sk.mu.Unlock()
		t.Logf("gateway %d delivered %d spans", i, got)
		if got == 0 {
			t.Errorf("gateway %d got no spans: the front tier did not spread the load", i)
		}
	}
	if len(all) != 2*traces {
		t.Fatalf("%d distinct spans delivered, want %d", len(all), 2*traces)
	}
	for k, n := range all {
		if n != 1 {
			t.Fatalf("span %x delivered %d times", k, n)
		}
	}
}

// unique counts the distinct spans over every sink.
func (s *scaleOut) unique() int {
	n := 0
	for _, sk := range s.sinks {
		_, u := sk.counts()
		n += u
	}
	return n
}
