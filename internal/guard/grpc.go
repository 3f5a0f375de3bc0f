package guard

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/admission"
)

// maxPending bounds the refusals recorded by the codec and not yet answered
// by the interceptor. One is left behind only when an interceptor before
// the guard's (authentication) refuses the call first.
const maxPending = 1024

// GRPC guards a gRPC server: its codec checks each request's bytes before
// unmarshalling them, and its interceptor answers a refused request with
// InvalidArgument, or Unavailable when the queue the server's requests of
// its kind enter is full (admission). (A codec's own error would reach the
// client as Internal: grpc-go wraps it.)
type GRPC struct {
	maxDepth int
	delegate encoding.CodecV2
	onRefuse func(error)
	// routes learns, per kind of request (TracesRequest, MetricsRequest,
	// LogsRequest), the queues its requests enter.
	routes [LogsRequest + 1]admission.Learner

	mu       sync.Mutex
	pending  map[any]error // refused request messages, by pointer
	npending atomic.Int64  // len(pending), read without the lock
}

// NewGRPC returns a guard for messages nesting deeper than maxDepth.
// delegate decodes what passes (nil: the registered "proto" codec, pdata's);
// onRefuse, if not nil, is called with each refusal.
func NewGRPC(maxDepth int, delegate encoding.CodecV2, onRefuse func(error)) *GRPC {
	if delegate == nil {
		delegate = encoding.GetCodecV2("proto")
	}
	return &GRPC{maxDepth: maxDepth, delegate: delegate, onRefuse: onRefuse, pending: map[any]error{}}
}

// OnRouteVaried sets what is called once per kind of request whose
// requests are first seen entering different queues (kind: traces, metrics
// or logs); from then on they are never refused for a full queue before
// decoding. Call before the server starts.
func (g *GRPC) OnRouteVaried(f func(kind string)) {
	for _, m := range [...]Message{TracesRequest, MetricsRequest, LogsRequest} {
		g.routes[m].OnVaried = func() { f(m.kind()) }
	}
}

// ServerOptions installs the guard: the codec and the unary interceptor
// must be used together.
func (g *GRPC) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec{g}),
		grpc.ChainUnaryInterceptor(g.intercept),
	}
}

func (g *GRPC) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if g.npending.Load() > 0 {
		g.mu.Lock()
		err, refused := g.pending[req]
		if refused {
			delete(g.pending, req)
			g.npending.Store(int64(len(g.pending)))
		}
		g.mu.Unlock()
		if refused {
			if s, ok := status.FromError(err); ok {
				return nil, s.Err()
			}
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	root := rootOfValue(req)
	if root == Unknown {
		return next(ctx, req)
	}
	ctx, route := admission.NewContext(ctx)
	resp, err := next(ctx, req)
	if err == nil && !route.Reached() && empty(req) {
		// The receiver answers a request without items itself.
		return resp, err
	}
	g.routes[root].Observe(route, err)
	return resp, err
}

// empty says whether a decoded request message encodes to no bytes: no
// resource at all, so no items (pdata's request types size themselves).
func empty(req any) bool {
	s, ok := req.(interface{ SizeProto() int })
	return ok && s.SizeProto() == 0
}

type codec struct{ g *GRPC }

func (c codec) Name() string { return c.g.delegate.Name() }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.g.delegate.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		b = buf.ReadOnlyData()
		data = mem.BufferSlice{buf}
	}
	// A full queue is checked first: it costs no walk of the bytes.
	root := rootOfValue(v)
	var err error
	if root != Unknown {
		if q := c.g.routes[root].Full(int64(len(b))); q != nil {
			err = &admission.FullError{Queue: q.Name()}
		}
	}
	if err == nil {
		err = CheckProto(b, root, c.g.maxDepth)
	}
	if err != nil {
		// Leave v empty; the interceptor refuses the call.
		if c.g.onRefuse != nil {
			c.g.onRefuse(err)
		}
		c.g.mu.Lock()
		if len(c.g.pending) >= maxPending {
			clear(c.g.pending)
		}
		c.g.pending[v] = err
		c.g.npending.Store(int64(len(c.g.pending)))
		c.g.mu.Unlock()
		return nil
	}
	if c.g.npending.Load() > 0 {
		// pdata may pool request messages: one refused earlier, whose
		// refusal an earlier interceptor answered, may come back here for
		// a new request.
		c.g.mu.Lock()
		delete(c.g.pending, v)
		c.g.npending.Store(int64(len(c.g.pending)))
		c.g.mu.Unlock()
	}
	return c.g.delegate.Unmarshal(data, v)
}

// roots maps the request types gRPC unmarshals into (pdata's internal
// ones, named as in OTLP) to their Message.
var roots sync.Map // reflect.Type -> Message

func rootOfValue(v any) Message {
	t := reflect.TypeOf(v)
	if m, ok := roots.Load(t); ok {
		return m.(Message)
	}
	n := t.String()
	if t.Kind() == reflect.Pointer {
		n = t.Elem().Name()
	}
	m := Unknown
	switch n {
	case "ExportTraceServiceRequest":
		m = TracesRequest
	case "ExportMetricsServiceRequest":
		m = MetricsRequest
	case "ExportLogsServiceRequest":
		m = LogsRequest
	}
	roots.Store(t, m)
	return m
}
