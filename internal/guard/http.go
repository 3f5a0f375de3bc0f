package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The OTLP/HTTP content types.
const (
	contentProtobuf = "application/x-protobuf"
	contentJSON     = "application/json"
)

// maxPrealloc caps the buffer allocated up front from a declared
// Content-Length: the length is the client's word, the body is read as it
// comes.
const maxPrealloc = 1 << 20

// HTTPHandler checks the body of every OTLP/HTTP request (protobuf or JSON,
// told by Content-Type) before next sees it. A body nesting deeper than
// maxDepth is refused with 400 and a google.rpc.Status saying why; others
// reach next unchanged, their body read once and handed on from memory.
// Bodies of other content types pass untouched. The request body must
// already be decompressed and bounded in size (confighttp's server does
// both before its middlewares); onRefuse, if not nil, is called with each
// refusal.
func HTTPHandler(next http.Handler, maxDepth int, onRefuse func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		var f Format
		switch ct {
		case contentProtobuf:
			f = Protobuf
		case contentJSON:
			f = JSON
		default:
			next.ServeHTTP(w, r)
			return
		}
		body, err := readAll(r)
		if err != nil {
			// A body over the server's size limit, or a broken stream:
			// the receiver would refuse it the same way.
			code := http.StatusBadRequest
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				code = http.StatusRequestEntityTooLarge
			}
			writeStatus(w, f, code, codes.InvalidArgument, fmt.Sprintf("reading request body: %v", err))
			return
		}
		if err := Check(body, f, rootOfPath(r.URL.Path), maxDepth); err != nil {
			if onRefuse != nil {
				onRefuse(err)
			}
			writeStatus(w, f, http.StatusBadRequest, codes.InvalidArgument, err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
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

func readAll(r *http.Request) ([]byte, error) {
	n := min(max(r.ContentLength, 0), maxPrealloc)
	buf := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	_ = r.Body.Close()
	return buf.Bytes(), err
}

// writeStatus answers as OTLP/HTTP specifies: the HTTP status and a
// google.rpc.Status in the request's encoding.
func writeStatus(w http.ResponseWriter, f Format, httpCode int, code codes.Code, msg string) {
	st := &status.Status{Code: int32(code), Message: msg}
	var out []byte
	ct := contentProtobuf
	if f == JSON {
		ct = contentJSON
		out, _ = protojson.Marshal(st)
	} else {
		out, _ = proto.Marshal(st)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(httpCode)
	_, _ = w.Write(out)
}
