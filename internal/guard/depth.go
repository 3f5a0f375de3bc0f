package guard

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultMaxDepth is the default limit on message nesting. Real OTLP nests at
// most 9 messages (request, resource metrics, scope metrics, metric,
// histogram, data point, exemplar, attribute, value); each level of an
// attribute value costs 2 (an array) or 3 (a map) more. 128 leaves room for
// about 40 levels of maps inside maps, far beyond any real telemetry, and
// keeps the decoder's recursion trivially small.
const DefaultMaxDepth = 128

// MaxDepthLimit is the largest limit that can be configured: the walker's
// fixed stack has this many frames.
const MaxDepthLimit = 1024

// ErrTooDeep is wrapped by every refusal.
var ErrTooDeep = errors.New("request nests too deep")

// DepthError is a refusal: the input nests deeper than Limit.
type DepthError struct {
	Format string // "protobuf" or "JSON"
	Limit  int    // the limit that was exceeded (JSON: the container limit)
	Offset int    // byte offset where the limit was exceeded
}

func (e *DepthError) Error() string {
	unit := "nested messages"
	if e.Format == "JSON" {
		unit = "nested JSON objects and arrays"
	}
	return fmt.Sprintf("%s: more than %d %s (at byte %d); refused before decoding", ErrTooDeep, e.Limit, unit, e.Offset)
}

func (e *DepthError) Unwrap() error { return ErrTooDeep }

// GRPCStatus makes a refusal an InvalidArgument wherever a gRPC status is
// looked for (the OTLP receiver maps it to HTTP 400).
func (e *DepthError) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.Error())
}

// Format is the encoding of a request body.
type Format uint8

// The encodings the guard reads.
const (
	Protobuf Format = iota
	JSON
)

// Check refuses b with a *DepthError when it nests deeper than maxDepth
// messages. root names the request's message type; use Unknown when it is
// not known, and every OTLP request type is tried.
func Check(b []byte, f Format, root Message, maxDepth int) error {
	if maxDepth <= 0 || maxDepth > MaxDepthLimit {
		maxDepth = DefaultMaxDepth
	}
	if f == JSON {
		return CheckJSON(b, 2*maxDepth)
	}
	return CheckProto(b, root, maxDepth)
}
