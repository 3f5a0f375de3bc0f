package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// counterPoint is one point of a monotonic cumulative integer Sum, the
// only metric of a request, from a resource with service.name service.
func counterPoint(service, name string, start, at pcommon.Timestamp, v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", service)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	m.SetEmptySum().SetIsMonotonic(true)
	m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := m.Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(at)
	dp.SetIntValue(v)
	return md
}

// scaleOut runs examples/scale-out as written: two front collectors with
// the loadbalancing exporter in front of two doubletake gateways, each
// forwarding to a sink of its own (so the test sees who got what).
type scaleOut struct {
	fronts    []string // OTLP/gRPC addresses of the fronts
	frontProc []*gateway
	sinks     []*sink // one per gateway
	gws       []*gateway
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
		s.frontProc = append(s.frontProc, startGateway(t, health,
			[]string{"FRONT_GRPC=" + addr, "FRONT_HEALTH=" + health, "GATEWAY_1=" + gwAddrs[0], "GATEWAY_2=" + gwAddrs[1]},
			"--config", filepath.Join(dir, "front.yaml")))
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

// TestScaleOutMetricStreamHasOneWriter: two writers of one metric stream (a
// second pipeline with fresh state, started later) send through different
// fronts; routing by stream id brings both to one gateway, which keeps the
// earliest writer only.
func TestScaleOutMetricStreamHasOneWriter(t *testing.T) {
	s := startScaleOut(t)
	ctx := ctxTimeout(t, time.Minute)
	point := func(start, at uint64, v int64) pmetric.Metrics {
		return counterPoint("scaled", "rollouts", pcommon.Timestamp(start), pcommon.Timestamp(at), v)
	}
	var clients []pmetricotlp.GRPCClient
	for _, front := range s.fronts {
		conn, err := grpc.NewClient(front, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		clients = append(clients, pmetricotlp.NewGRPCClient(conn))
	}
	const sec = uint64(time.Second)
	base := uint64(time.Now().UnixNano()) / sec * sec
	atSinks := func() int {
		n := 0
		for _, sk := range s.sinks {
			sk.mu.Lock()
			for _, e := range sk.metrics {
				n += e.md.DataPointCount()
			}
			sk.mu.Unlock()
		}
		return n
	}
	// Writer A started at base (front 0), writer B 2.5 s later with fresh
	// state (front 1); they export in turn. A front answers before it has
	// forwarded (its exporter queues), so each of A's points is awaited at
	// the sinks before B's next one is sent: B's first point must not
	// overtake A's first (a gateway can only elect the writers it has
	// seen, and B really started later), nor A's points one another.
	for i := range uint64(6) {
		if _, err := clients[0].Export(ctx, pmetricotlp.NewExportRequestFromMetrics(point(base, base+(10+2*i)*sec, int64(10+i)))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("writer A's point %d at the sinks", i+1), func() bool { return atSinks() > int(i) })
		if _, err := clients[1].Export(ctx, pmetricotlp.NewExportRequestFromMetrics(point(base+2*sec+sec/2, base+(11+2*i)*sec, int64(1+i)))); err != nil {
			t.Fatal(err)
		}
	}
	// Stop the fronts first: they hand what they queued to the gateways,
	// so every point of B's has been judged before the gateways stop.
	for _, f := range s.frontProc {
		f.stop(t)
	}
	for _, g := range s.gws {
		g.stop(t)
	}
	starts := map[uint64]int{}
	gateways := 0
	for _, sk := range s.sinks {
		got := 0
		for _, e := range sk.metrics {
			rms := e.md.ResourceMetrics()
			for i := 0; i < rms.Len(); i++ {
				dps := rms.At(i).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
				for j := 0; j < dps.Len(); j++ {
					starts[uint64(dps.At(j).StartTimestamp())]++
					got++
				}
			}
		}
		if got > 0 {
			gateways++
		}
	}
	if gateways != 1 {
		t.Errorf("the stream's points came out of %d gateways, want 1 (routing by stream id)", gateways)
	}
	if len(starts) != 1 || starts[base] != 6 {
		t.Fatalf("points by writer start: %v; want writer A's 6 only", starts)
	}
}
