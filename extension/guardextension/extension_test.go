package guardextension

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doubletake/doubletake/internal/admission"
	"github.com/doubletake/doubletake/internal/guard"
	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		mutate func(*Config)
		err    string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.MaxDepth = 7 }, "max_depth must be between 8 and 1024, got 7"},
		{func(c *Config) { c.MaxDepth = 1025 }, "max_depth must be between 8 and 1024, got 1025"},
		{func(c *Config) { c.MaxInFlightBytes = -1 }, "max_in_flight_bytes must not be negative, got -1"},
		{func(c *Config) { c.MaxInFlightBytes = 0 }, ""},
		{func(c *Config) { c.MaxGRPCDecompressions = 0 }, "max_grpc_decompressions must be at least 1, got 0"},
	} {
		cfg := createDefaultConfig()
		c.mutate(cfg)
		err := cfg.Validate()
		if (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("got %v, want %q", err, c.err)
		}
	}
}

// The extension, made by its factory, is both middlewares, and its HTTP
// one refuses a deep body as the receiver reads it.
func TestMiddlewares(t *testing.T) {
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(Type), f.CreateDefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ext.Shutdown(context.Background()) }()
	g := ext.(*guardExt)
	opts, err := g.GetGRPCServerOptions(context.Background())
	if err != nil || len(opts) != 3 {
		t.Fatalf("gRPC options: %d, %v; want the codec, the interceptor and the stream workers", len(opts), err)
	}
	if n := streamWorkers(); n < 32 || n < uint32(16*runtime.GOMAXPROCS(0)) {
		t.Fatalf("%d stream workers, want at least 32 and 16 per CPU", n)
	}
	wrap, err := g.GetHTTPHandler(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h, err := wrap(context.Background(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(guardtest.DeepTraces(200)))
	req.Header.Set("Content-Type", "application/x-protobuf")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "more than 128 nested messages") {
		t.Fatalf("%d %q, want 400 saying why", rec.Code, rec.Body.String())
	}
}

// Each refusal is counted under its reason; those for a full queue, which
// come by the thousand a second while it is full, are warned of once per
// fullWarnEvery with how many there were.
func TestRefusalsCountedAndFullQueueWarnedSparingly(t *testing.T) {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{&guard.DepthError{}, "depth"},
		{&guard.InFlightError{Limit: 1}, "in_flight"},
		{&admission.FullError{Queue: "q"}, "queue_full"},
	} {
		attrs := refusalAttrs("grpc", c.err)
		if got, _ := attrs.Value("reason"); got.AsString() != c.reason {
			t.Errorf("%T: reason %q, want %q", c.err, got.AsString(), c.reason)
		}
	}
	core, logs := observer.New(zap.InfoLevel)
	set := extensiontest.NewNopSettings(Type)
	set.Logger = zap.New(core)
	g, err := newGuard(set, createDefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		g.onRefuse("grpc", &admission.FullError{Queue: "dedup_otlp_grpc/upstream"})
		g.onRefuse("http", &guard.InFlightError{Limit: 1})
	}
	if logs.Len() != 1 {
		t.Fatalf("%d log entries for 100 queue-full refusals within %s, want 1", logs.Len(), fullWarnEvery)
	}
	g.lastWarn = g.lastWarn.Add(-fullWarnEvery)
	g.onRefuse("grpc", &admission.FullError{Queue: "dedup_otlp_grpc/upstream"})
	all := logs.All()
	if len(all) != 2 || all[1].ContextMap()["refused_since_last_warning"] != int64(100) || all[1].ContextMap()["queue"] != "dedup_otlp_grpc/upstream" {
		t.Fatalf("entries %v; want a second one counting the 100 refusals since the first", all)
	}
}
