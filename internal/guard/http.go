package guard

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/admission"
)

// The OTLP/HTTP content types.
const (
	contentProtobuf = "application/x-protobuf"
	contentJSON     = "application/json"
)

// HTTPConfig configures HTTPHandler.
type HTTPConfig struct {
	// MaxDepth is the deepest message nesting accepted (JSON: twice as
	// many objects and arrays).
	MaxDepth int
	// MaxInFlightBytes bounds the (decompressed) body bytes read and held
	// by all requests in flight together; 0 leaves them unbounded.
	MaxInFlightBytes int64
	// OnRefuse, if not nil, is called with each refusal: a *DepthError,
	// an *InFlightError or an *admission.FullError.
	OnRefuse func(error)
	// OnRouteVaried, if not nil, is called once per kind of request
	// (traces, metrics, logs) whose requests are first seen entering
	// different queues; from then on they are never refused for a full
	// queue before decoding.
	OnRouteVaried func(kind string)
}

// HTTPHandler checks the body of every OTLP/HTTP request (protobuf or JSON,
// told by Content-Type) as next reads it: the body is walked as it streams
// through, nothing is buffered or copied, and once it nests deeper than
// MaxDepth the read fails with a *DepthError, which is a gRPC
// InvalidArgument status: the OTLP receiver, which reads the whole body
// before decoding any of it, answers 400 with its message. A read that
// would take the bodies of all requests in flight past MaxInFlightBytes
// fails with an *InFlightError (Unavailable: 503, retryable). Bodies of
// other content types pass untouched. The body must already be
// decompressed and bounded in size (confighttp's server does both before
// its middlewares).
//
// A request's bytes count until next returns, or until a read fails (the
// reader then drops what it read), so that a refused request's bytes are
// given back before it is answered.
//
// Requests to a path ending in /traces, /metrics or /logs are also given an
// admission.Route: once every such request of one kind has entered the same
// queues, the read that reaches the end of a body fails with an
// *admission.FullError (Unavailable: 503, retryable) when one of them has
// less room than the body (protobuf: its bytes; JSON: half of them, about
// what it encodes to), before anything decodes it.
func HTTPHandler(next http.Handler, cfg HTTPConfig) http.Handler {
	maxDepth := cfg.MaxDepth
	if maxDepth <= 0 || maxDepth > MaxDepthLimit {
		maxDepth = DefaultMaxDepth
	}
	inFlight := &budget{limit: cfg.MaxInFlightBytes}
	var routes [LogsRequest + 1]admission.Learner
	if cfg.OnRouteVaried != nil {
		for _, m := range [...]Message{TracesRequest, MetricsRequest, LogsRequest} {
			routes[m].OnVaried = func() { cfg.OnRouteVaried(m.kind()) }
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		var c *checkingReader
		root := rootOfPath(r.URL.Path)
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		encodedPer := int64(1) // body bytes per encoded (protobuf) byte
		switch ct {
		case contentProtobuf:
			size := unboundedEnd // decompressed, or chunked
			if r.ContentLength >= 0 {
				size = int(r.ContentLength)
			}
			c = newProtoReader(r.Body, root, maxDepth, size)
		case contentJSON:
			j := &jsonWalker{limit: 2 * maxDepth}
			c = &checkingReader{body: r.Body, feed: j.feed, err: j.err}
			encodedPer = 2
			// Nothing inside the resource list: no resource, no items.
			c.noItems = func() bool { return j.deepest <= 2 }
		default:
			next.ServeHTTP(w, r)
			return
		}
		if c.noItems == nil {
			c.noItems = func() bool { return c.read == 0 }
		}
		c.budget, c.onRefuse = inFlight, cfg.OnRefuse
		defer c.release()
		r.Body = c
		if root == Unknown {
			next.ServeHTTP(w, r)
			return
		}
		learner := &routes[root]
		c.atEnd = func(read int64) error {
			if q := learner.Full(read / encodedPer); q != nil {
				return &admission.FullError{Queue: q.Name()}
			}
			return nil
		}
		ctx, route := admission.NewContext(r.Context())
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		var err error
		if sw.code >= 300 {
			err = fmt.Errorf("answered %d", sw.code)
		}
		if err == nil && !route.Reached() && c.noItems() {
			// The receiver answers a request without items itself.
			return
		}
		learner.Observe(route, err)
	})
}

// statusWriter keeps the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// InFlightError refuses a request whose body would take the bytes held by
// requests in flight past their bound.
type InFlightError struct{ Limit int64 }

func (e *InFlightError) Error() string {
	return fmt.Sprintf("request bodies in flight exceed %d bytes; retry later", e.Limit)
}

// GRPCStatus makes the refusal Unavailable, which OTLP clients retry (the
// OTLP receiver answers 503).
func (e *InFlightError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// budget counts the body bytes held by requests in flight.
type budget struct {
	limit int64
	used  atomic.Int64
}

// rootOfPath tells the request's message type from its URL path, as the
// default OTLP/HTTP paths end; other paths are Unknown (every type is tried).
func rootOfPath(p string) Message {
	switch {
	case strings.HasSuffix(p, "/traces"):
		return TracesRequest
	case strings.HasSuffix(p, "/metrics"):
		return MetricsRequest
	case strings.HasSuffix(p, "/logs"):
		return LogsRequest
	}
	return Unknown
}

const unboundedEnd = int(^uint(0) >> 1)

// newProtoReader walks body as a root message of size bytes. When the size
// is not known (unboundedEnd), a field claiming more bytes than follow is
// walked as far as they go: more strictly than with the size known, and
// only on bodies the decoder refuses anyway.
func newProtoReader(body io.ReadCloser, root Message, maxDepth, size int) *checkingReader {
	roots := []Message{root}
	if root == Unknown {
		roots = []Message{TracesRequest, MetricsRequest, LogsRequest}
	}
	walkers := make([]protoWalker, len(roots))
	stacks := make([]frame, len(roots)*maxDepth)
	for i, r := range roots {
		walkers[i] = protoWalker{limit: maxDepth, stack: stacks[i*maxDepth : (i+1)*maxDepth]}
		walkers[i].reset(r, size)
	}
	var refused *protoWalker
	return &checkingReader{
		body: body,
		feed: func(p []byte) bool {
			for i := range walkers {
				if !walkers[i].feed(p) {
					refused = &walkers[i]
					return false
				}
			}
			return true
		},
		err: func() error { return refused.err() },
	}
}

// checkingReader walks what is read through it, and counts it against the
// budget, and fails the read once either refuses.
type checkingReader struct {
	body     io.ReadCloser
	feed     func([]byte) bool
	err      func() error
	budget   *budget
	held     int64
	onRefuse func(error)
	refusal  error
	// atEnd, if not nil, may refuse the body once it has been read whole
	// (read: its bytes), before the reader sees its end.
	atEnd func(read int64) error
	read  int64
	// noItems says whether the body read holds no resource, so no items
	// (protobuf: no bytes).
	noItems func() bool
}

func (c *checkingReader) Read(p []byte) (int, error) {
	if c.refusal != nil {
		return 0, c.refusal
	}
	n, err := c.body.Read(p)
	if err != nil && err != io.EOF {
		// The reader fails the request and drops what it read (a body
		// over the size limit, a broken stream): give it back now, before
		// the answer goes out.
		c.release()
		return n, err
	}
	if n > 0 {
		if b := c.budget; b != nil && b.limit > 0 {
			c.held += int64(n)
			if b.used.Add(int64(n)) > b.limit {
				return 0, c.refuse(&InFlightError{Limit: b.limit})
			}
		}
		if !c.feed(p[:n]) {
			return 0, c.refuse(c.err())
		}
		c.read += int64(n)
	}
	if err == io.EOF && c.atEnd != nil {
		if rerr := c.atEnd(c.read); rerr != nil {
			return 0, c.refuse(rerr)
		}
	}
	return n, err
}

func (c *checkingReader) refuse(err error) error {
	c.release()
	c.refusal = err
	if c.onRefuse != nil {
		c.onRefuse(err)
	}
	return err
}

// release gives the bytes read back to the budget: once the request is
// answered, or as soon as reading it fails.
func (c *checkingReader) release() {
	if c.budget != nil && c.held > 0 {
		c.budget.used.Add(-c.held)
		c.held = 0
	}
}

func (c *checkingReader) Close() error { return c.body.Close() }
