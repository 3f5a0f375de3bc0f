package guardextension

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	"github.com/doubletake/doubletake/extension/guardextension/internal/metadata"
	"github.com/doubletake/doubletake/internal/guard"
)

type guardExt struct {
	cfg     Config
	refused metric.Int64Counter
}

var (
	_ extensionmiddleware.HTTPServer = (*guardExt)(nil)
	_ extensionmiddleware.GRPCServer = (*guardExt)(nil)
)

func newGuard(set extension.Settings, cfg *Config) (*guardExt, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	refused := tb.GuardRefusedRequests
	return &guardExt{cfg: *cfg, refused: refused}, nil
}

// Start applies max_grpc_decompressions, process-wide.
func (g *guardExt) Start(context.Context, component.Host) error {
	guard.SetGRPCDecompressions(g.cfg.MaxGRPCDecompressions)
	return nil
}

func (*guardExt) Shutdown(context.Context) error { return nil }

// refusalAttrs labels a refusal by protocol and reason: depth (nesting
// beyond max_depth) or in_flight (bodies beyond max_in_flight_bytes).
func refusalAttrs(protocol string, err error) attribute.Set {
	reason := "depth"
	var inFlight *guard.InFlightError
	if errors.As(err, &inFlight) {
		reason = "in_flight"
	}
	return attribute.NewSet(attribute.String("protocol", protocol), attribute.String("reason", reason))
}

// GetHTTPHandler wraps a server's handler; confighttp applies it after
// decompressing and bounding the body.
func (g *guardExt) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return guard.HTTPHandler(next, guard.HTTPConfig{
			MaxDepth:         g.cfg.MaxDepth,
			MaxInFlightBytes: g.cfg.MaxInFlightBytes,
			OnRefuse: func(err error) {
				g.refused.Add(context.Background(), 1, metric.WithAttributeSet(refusalAttrs("http", err)))
			},
		}), nil
	}, nil
}

// GetGRPCServerOptions returns the guard's codec and interceptor; each
// server gets its own.
func (g *guardExt) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	return guard.NewGRPC(g.cfg.MaxDepth, nil, func(err error) {
		g.refused.Add(context.Background(), 1, metric.WithAttributeSet(refusalAttrs("grpc", err)))
	}).ServerOptions(), nil
}
