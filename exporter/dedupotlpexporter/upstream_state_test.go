package dedupotlpexporter

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
)

// acceptingUpstream is a real OTLP/gRPC trace server that takes everything.
type acceptingUpstream struct {
	ptraceotlp.UnimplementedGRPCServer
}

func (*acceptingUpstream) Export(context.Context, ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	return ptraceotlp.NewExportResponse(), nil
}

// TestUpstreamStateMetric: otelcol_exporter_dedup_upstream_state says, while
// the exporter runs, the state its last send found the upstream in: unknown
// before any send, unreachable while nothing listens, reachable once an
// upstream takes the queued spans, unreachable again once it is gone and
// a span waits; nothing once the exporter is shut down.
func TestUpstreamStateMetric(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every send fails and is retried

	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	exp, _ := newUpstreamTraces(t, map[string]any{
		"endpoint": addr, "tls": map[string]any{"insecure": true}, "dedup": "dedup",
		"retry_on_failure": map[string]any{"enabled": true, "initial_interval": "50ms", "max_interval": "200ms", "max_elapsed_time": 0},
		"sending_queue":    map[string]any{"enabled": true},
	}, tel)
	// states reads the gauge: each state's value, for this exporter's
	// traces; nil when it is not observed.
	states := func() map[string]int64 {
		m, err := tel.GetMetric("otelcol_exporter_dedup_upstream_state")
		if err != nil {
			return nil
		}
		out := map[string]int64{}
		for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			e, _ := dp.Attributes.Value("exporter")
			d, _ := dp.Attributes.Value("data_type")
			s, _ := dp.Attributes.Value("state")
			if e.AsString() != "dedup_otlp_grpc/upstream" || d.AsString() != "traces" {
				t.Fatalf("a point of another exporter: %v", dp.Attributes.ToSlice())
			}
			out[s.AsString()] = dp.Value
		}
		return out
	}
	only := func(state string) bool {
		s := states()
		if len(s) != 4 {
			return false
		}
		for k, v := range s {
			if (k == state) != (v == 1) || (v != 0 && v != 1) {
				return false
			}
		}
		return true
	}
	waitFor := func(state string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !only(state) {
			if time.Now().After(deadline) {
				t.Fatalf("the upstream state is not %s within a minute: %v", state, states())
			}
			time.Sleep(10 * time.Millisecond) // a poll interval
		}
	}

	if s := states(); s != nil {
		t.Fatalf("states %v before the exporter started", s)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if !only("unknown") {
		t.Fatalf("states %v before any send, want unknown", states())
	}
	if err := exp.ConsumeTraces(context.Background(), spansOf(3, func(int) string { return "op" })); err != nil {
		t.Fatal(err)
	}
	waitFor("unreachable")

	serve := func() *grpc.Server {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the upstream's port was taken meanwhile: %v", err)
		}
		srv := grpc.NewServer()
		ptraceotlp.RegisterGRPCServer(srv, &acceptingUpstream{})
		go func() { _ = srv.Serve(ln) }()
		return srv
	}
	srv := serve()
	waitFor("reachable")
	srv.Stop()
	if err := exp.ConsumeTraces(context.Background(), spansOf(1, func(int) string { return "later" })); err != nil {
		t.Fatal(err)
	}
	waitFor("unreachable")
	srv = serve()
	defer srv.Stop()
	waitFor("reachable")

	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := states(); len(s) != 0 {
		t.Errorf("states %v after the exporter shut down", s)
	}
}
