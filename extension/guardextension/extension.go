package guardextension

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/doubletake/doubletake/extension/guardextension/internal/metadata"
	"github.com/doubletake/doubletake/internal/admission"
	"github.com/doubletake/doubletake/internal/guard"
)

// fullWarnEvery is the least time between two warnings of requests
// refused for a full queue.
const fullWarnEvery = 10 * time.Second

type guardExt struct {
	cfg     Config
	refused metric.Int64Counter
	logger  *zap.Logger

	mu       sync.Mutex
	lastWarn time.Time
	unwarned int64 // queue-full refusals since the last warning
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
	return &guardExt{cfg: *cfg, refused: tb.GuardRefusedRequests, logger: set.Logger}, nil
}

// Start applies max_grpc_decompressions, process-wide.
func (g *guardExt) Start(context.Context, component.Host) error {
	guard.SetGRPCDecompressions(g.cfg.MaxGRPCDecompressions)
	return nil
}

func (*guardExt) Shutdown(context.Context) error { return nil }

// refusalAttrs labels a refusal by protocol and reason: depth (nesting
// beyond max_depth), in_flight (bodies beyond max_in_flight_bytes) or
// queue_full (the queue the request would enter has no room for it).
func refusalAttrs(protocol string, err error) attribute.Set {
	reason := "depth"
	var inFlight *guard.InFlightError
	var full *admission.FullError
	switch {
	case errors.As(err, &inFlight):
		reason = "in_flight"
	case errors.As(err, &full):
		reason = "queue_full"
	}
	return attribute.NewSet(attribute.String("protocol", protocol), attribute.String("reason", reason))
}

// onRefuse counts a refusal, and warns of those for a full queue at most
// every fullWarnEvery (they are retryable, and come by the thousand a
// second while a queue is full).
func (g *guardExt) onRefuse(protocol string, err error) {
	g.refused.Add(context.Background(), 1, metric.WithAttributeSet(refusalAttrs(protocol, err)))
	var full *admission.FullError
	if !errors.As(err, &full) {
		return
	}
	g.mu.Lock()
	g.unwarned++
	now := time.Now()
	if now.Sub(g.lastWarn) < fullWarnEvery {
		g.mu.Unlock()
		return
	}
	n := g.unwarned
	g.unwarned, g.lastWarn = 0, now
	g.mu.Unlock()
	g.logger.Warn("Refusing requests before decoding them: the sending queue they would enter is full; senders retry them (503 / Unavailable)",
		zap.String("queue", full.Queue), zap.Int64("refused_since_last_warning", n))
}

// onRouteVaried logs that a server's requests of one kind were seen
// entering different queues.
func (g *guardExt) onRouteVaried(protocol string) func(kind string) {
	return func(kind string) {
		g.logger.Info("Requests of one kind enter different queues (routing, filtering or batching before the exporter); they are no longer refused before decoding when a queue is full, only by the queue itself",
			zap.String("protocol", protocol), zap.String("kind", kind))
	}
}

// GetHTTPHandler wraps a server's handler; confighttp applies it after
// decompressing and bounding the body.
func (g *guardExt) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return guard.HTTPHandler(next, guard.HTTPConfig{
			MaxDepth:         g.cfg.MaxDepth,
			MaxInFlightBytes: g.cfg.MaxInFlightBytes,
			OnRefuse:         func(err error) { g.onRefuse("http", err) },
			OnRouteVaried:    g.onRouteVaried("http"),
		}), nil
	}, nil
}

// GetGRPCServerOptions returns the guard's codec and interceptor; each
// server gets its own. It also has the server handle requests on a pool of
// goroutines (streamWorkers) instead of a new one per request.
func (g *guardExt) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	gg := guard.NewGRPC(g.cfg.MaxDepth, nil, func(err error) { g.onRefuse("grpc", err) })
	gg.OnRouteVaried(g.onRouteVaried("grpc"))
	return append(gg.ServerOptions(), grpc.NumStreamWorkers(streamWorkers())), nil
}

// streamWorkers is how many goroutines each gRPC server keeps for its
// requests. A request handled on a new goroutine grows that goroutine's
// stack, by copying, through the whole pipeline below the receiver (the
// gateway's pipeline runs on the request's goroutine down to its durable
// write): about 3% of the gateway's CPU with 64-span requests at 10k
// spans/s. A worker keeps its grown stack (grpc-go resets it every 65,536
// requests); a request arriving while every worker is busy gets a new
// goroutine, as without them. Sixteen per CPU, at least 32: idle ones cost
// their stacks only.
func streamWorkers() uint32 {
	return uint32(max(32, 16*runtime.GOMAXPROCS(0)))
}
