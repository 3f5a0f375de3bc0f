package guard

import (
	"io"
	"mime"
	"net/http"
	"strings"
)

// The OTLP/HTTP content types.
const (
	contentProtobuf = "application/x-protobuf"
	contentJSON     = "application/json"
)

// HTTPHandler checks the body of every OTLP/HTTP request (protobuf or JSON,
// told by Content-Type) as next reads it: the body is walked as it streams
// through, nothing is buffered or copied, and once it nests deeper than
// maxDepth the read fails with a *DepthError, which is a gRPC
// InvalidArgument status: the OTLP receiver, which reads the whole body
// before decoding any of it, answers 400 with its message. Bodies of other
// content types pass untouched. The body must already be decompressed and
// bounded in size (confighttp's server does both before its middlewares);
// onRefuse, if not nil, is called with each refusal.
func HTTPHandler(next http.Handler, maxDepth int, onRefuse func(error)) http.Handler {
	if maxDepth <= 0 || maxDepth > MaxDepthLimit {
		maxDepth = DefaultMaxDepth
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			switch ct {
			case contentProtobuf:
				r.Body = newProtoReader(r.Body, rootOfPath(r.URL.Path), maxDepth, onRefuse)
			case contentJSON:
				j := &jsonWalker{limit: 2 * maxDepth}
				r.Body = &checkingReader{body: r.Body, feed: j.feed, err: j.err, onRefuse: onRefuse}
			}
		}
		next.ServeHTTP(w, r)
	})
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

func newProtoReader(body io.ReadCloser, root Message, maxDepth int, onRefuse func(error)) io.ReadCloser {
	roots := []Message{root}
	if root == Unknown {
		roots = []Message{TracesRequest, MetricsRequest, LogsRequest}
	}
	walkers := make([]protoWalker, len(roots))
	stacks := make([]frame, len(roots)*maxDepth)
	for i, r := range roots {
		walkers[i] = protoWalker{limit: maxDepth, stack: stacks[i*maxDepth : (i+1)*maxDepth]}
		walkers[i].reset(r, unboundedEnd)
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
		err:      func() error { return refused.err() },
		onRefuse: onRefuse,
	}
}

// checkingReader walks what is read through it and fails the read once the
// walk refuses.
type checkingReader struct {
	body     io.ReadCloser
	feed     func([]byte) bool
	err      func() error
	onRefuse func(error)
	refusal  error
}

func (c *checkingReader) Read(p []byte) (int, error) {
	if c.refusal != nil {
		return 0, c.refusal
	}
	n, err := c.body.Read(p)
	if n > 0 && !c.feed(p[:n]) {
		c.refusal = c.err()
		if c.onRefuse != nil {
			c.onRefuse(c.refusal)
		}
		return 0, c.refusal
	}
	return n, err
}

func (c *checkingReader) Close() error { return c.body.Close() }
