package guardextension

import (
	"context"
	"net/http"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	"github.com/doubletake/doubletake/internal/guard"
)

type guardExt struct {
	maxDepth int
	refused  metric.Int64Counter
}

var (
	_ extensionmiddleware.HTTPServer = (*guardExt)(nil)
	_ extensionmiddleware.GRPCServer = (*guardExt)(nil)
)

func newGuard(set extension.Settings, cfg *Config) (*guardExt, error) {
	refused, err := set.MeterProvider.Meter("github.com/doubletake/doubletake/extension/guardextension").Int64Counter(
		"otelcol_guard_refused_requests",
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused before decoding because they nest deeper than max_depth, by protocol."),
	)
	if err != nil {
		return nil, err
	}
	return &guardExt{maxDepth: cfg.MaxDepth, refused: refused}, nil
}

func (*guardExt) Start(context.Context, component.Host) error { return nil }

func (*guardExt) Shutdown(context.Context) error { return nil }

var (
	httpAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("protocol", "http")))
	grpcAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("protocol", "grpc")))
)

// GetHTTPHandler wraps a server's handler; confighttp applies it after
// decompressing and bounding the body.
func (g *guardExt) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return guard.HTTPHandler(next, g.maxDepth, func(error) {
			g.refused.Add(context.Background(), 1, httpAttrs)
		}), nil
	}, nil
}

// GetGRPCServerOptions returns the guard's codec and interceptor; each
// server gets its own.
func (g *guardExt) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	return guard.NewGRPC(g.maxDepth, nil, func(error) {
		g.refused.Add(context.Background(), 1, grpcAttrs)
	}).ServerOptions(), nil
}
