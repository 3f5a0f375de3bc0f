// Package capture is an in-process OTLP receiver: gRPC, HTTP/protobuf and
// HTTP/JSON on one port. It hands every request it accepts to a callback,
// which may refuse it with a gRPC status (mapped to the HTTP status the OTLP
// specification gives for it).
package capture

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/doubletake/doubletake/internal/guard"
)

// Signal names a kind of telemetry.
type Signal string

// The three signals OTLP carries.
const (
	Traces  Signal = "traces"
	Metrics Signal = "metrics"
	Logs    Signal = "logs"
)

// Protocol names how a request arrived.
type Protocol string

// The protocols the receiver serves.
const (
	GRPC         Protocol = "grpc"
	HTTPProtobuf Protocol = "http/protobuf"
	HTTPJSON     Protocol = "http/json"
)

// Request is one accepted export request. Exactly one of Traces, Metrics
// and Logs is set, by Signal.
type Request struct {
	Seq      uint64 // arrival order, from 1
	Signal   Signal
	Protocol Protocol
	Received time.Time
	Peer     string // remote address
	Traces   ptrace.Traces
	Metrics  pmetric.Metrics
	Logs     plog.Logs
}

// Items is the number of spans, data points or log records in r.
func (r *Request) Items() int {
	switch r.Signal {
	case Traces:
		return r.Traces.SpanCount()
	case Metrics:
		return r.Metrics.DataPointCount()
	default:
		return r.Logs.LogRecordCount()
	}
}

// Handler is called for every well-formed request, one call at a time. A
// non-nil error refuses the request: a *grpc status error keeps its code,
// anything else is Internal.
type Handler func(*Request) error

// MaxBodyBytes is the largest HTTP request body accepted (after gzip).
const MaxBodyBytes = 64 << 20

// Server is a running receiver.
type Server struct {
	ln      net.Listener
	httpSrv *http.Server
	grpcSrv *grpc.Server
	handle  Handler

	mu       sync.Mutex // serialises Handler calls and seq
	seq      uint64
	lastSeen time.Time
	rejected uint64 // malformed requests
	done     chan struct{}
	serveErr error
}

// Listen starts a receiver on addr ("127.0.0.1:0" for a free port).
func Listen(addr string, h Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return Serve(ln, h), nil
}

// Serve starts a receiver on ln.
func Serve(ln net.Listener, h Handler) *Server {
	s := &Server{ln: ln, handle: h, done: make(chan struct{})}
	// gRPC decodes a request before any service sees it: the guard's
	// codec refuses requests nesting too deep before decoding them, and
	// the counting codec counts those it cannot decode, as the HTTP
	// handler does.
	g := guard.NewGRPC(guard.DefaultMaxDepth,
		countingCodec{CodecV2: encoding.GetCodecV2("proto"), onError: s.malformed},
		func(error) { s.malformed() })
	s.grpcSrv = grpc.NewServer(append(g.ServerOptions(), grpc.MaxRecvMsgSize(MaxBodyBytes))...)
	ptraceotlp.RegisterGRPCServer(s.grpcSrv, &traceService{s: s})
	pmetricotlp.RegisterGRPCServer(s.grpcSrv, &metricService{s: s})
	plogotlp.RegisterGRPCServer(s.grpcSrv, &logService{s: s})

	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", s.httpHandler(Traces))
	mux.HandleFunc("/v1/metrics", s.httpHandler(Metrics))
	mux.HandleFunc("/v1/logs", s.httpHandler(Logs))

	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	s.httpSrv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				s.grpcSrv.ServeHTTP(w, r)
				return
			}
			mux.ServeHTTP(w, r)
		}),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.done)
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	return s
}

// Addr is the address the receiver listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Endpoint is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (s *Server) Endpoint() string { return "http://" + s.Addr() }

// LastReceived is when the last request (accepted or malformed) arrived;
// zero if none did.
func (s *Server) LastReceived() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen
}

// Malformed counts requests refused because they could not be decoded.
func (s *Server) Malformed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// Close stops the receiver at once; calls in flight are cut off.
func (s *Server) Close() error {
	err := s.httpSrv.Close()
	s.grpcSrv.Stop()
	<-s.done
	return errors.Join(err, s.serveErr)
}

// Shutdown stops accepting and waits for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.httpSrv.Shutdown(ctx)
	<-s.done
	return errors.Join(err, s.serveErr)
}

func (s *Server) deliver(r *Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r.Seq = s.seq
	r.Received = time.Now()
	s.lastSeen = r.Received
	if s.handle == nil {
		return nil
	}
	return s.handle(r)
}

func (s *Server) malformed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected++
	s.lastSeen = time.Now()
}

func peerOf(ctx context.Context) string {
	if p, ok := peerFromContext(ctx); ok {
		return p
	}
	return ""
}

// --- gRPC ---

type traceService struct {
	ptraceotlp.UnimplementedGRPCServer
	s *Server
}

func (t *traceService) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r := &Request{Signal: Traces, Protocol: GRPC, Peer: peerOf(ctx), Traces: req.Traces()}
	return ptraceotlp.NewExportResponse(), grpcError(t.s.deliver(r))
}

type metricService struct {
	pmetricotlp.UnimplementedGRPCServer
	s *Server
}

func (m *metricService) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	r := &Request{Signal: Metrics, Protocol: GRPC, Peer: peerOf(ctx), Metrics: req.Metrics()}
	return pmetricotlp.NewExportResponse(), grpcError(m.s.deliver(r))
}

type logService struct {
	plogotlp.UnimplementedGRPCServer
	s *Server
}

func (l *logService) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	r := &Request{Signal: Logs, Protocol: GRPC, Peer: peerOf(ctx), Logs: req.Logs()}
	return plogotlp.NewExportResponse(), grpcError(l.s.deliver(r))
}

// countingCodec is the registered proto codec, counting the requests it
// cannot decode.
type countingCodec struct {
	encoding.CodecV2
	onError func()
}

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err != nil {
		c.onError()
	}
	return err
}

func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := grpcstatus.FromError(err); ok {
		return err
	}
	return grpcstatus.Error(codes.Internal, err.Error())
}

// --- HTTP ---

const (
	ctProtobuf = "application/x-protobuf"
	ctJSON     = "application/json"
)

func (s *Server) httpHandler(sig Signal) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeStatus(w, ctProtobuf, http.StatusMethodNotAllowed, codes.InvalidArgument, r.Method+" is not allowed; OTLP/HTTP takes POST")
			return
		}
		ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
		ct = strings.TrimSpace(ct)
		var proto Protocol
		switch ct {
		case ctProtobuf:
			proto = HTTPProtobuf
		case ctJSON:
			proto = HTTPJSON
		default:
			writeStatus(w, ctProtobuf, http.StatusUnsupportedMediaType, codes.InvalidArgument,
				fmt.Sprintf("unsupported content type %q; want %s or %s", ct, ctProtobuf, ctJSON))
			return
		}
		body, err := readBody(r)
		if err != nil {
			s.malformed()
			writeStatus(w, ct, http.StatusBadRequest, codes.InvalidArgument, err.Error())
			return
		}
		// pdata's decoders recurse once per nested message: refuse what
		// nests too deep before decoding.
		format, root := guard.Protobuf, rootOf(sig)
		if proto == HTTPJSON {
			format = guard.JSON
		}
		if err := guard.Check(body, format, root, guard.DefaultMaxDepth); err != nil {
			s.malformed()
			writeStatus(w, ct, http.StatusBadRequest, codes.InvalidArgument, fmt.Sprintf("refusing %s %s request: %v", proto, sig, err))
			return
		}
		req := &Request{Signal: sig, Protocol: proto, Peer: r.RemoteAddr}
		var resp interface {
			MarshalProto() ([]byte, error)
			MarshalJSON() ([]byte, error)
		}
		switch sig {
		case Traces:
			er := ptraceotlp.NewExportRequest()
			err = unmarshal(er.UnmarshalProto, er.UnmarshalJSON, proto, body)
			req.Traces = er.Traces()
			resp = ptraceotlp.NewExportResponse()
		case Metrics:
			er := pmetricotlp.NewExportRequest()
			err = unmarshal(er.UnmarshalProto, er.UnmarshalJSON, proto, body)
			req.Metrics = er.Metrics()
			resp = pmetricotlp.NewExportResponse()
		case Logs:
			er := plogotlp.NewExportRequest()
			err = unmarshal(er.UnmarshalProto, er.UnmarshalJSON, proto, body)
			req.Logs = er.Logs()
			resp = plogotlp.NewExportResponse()
		}
		if err != nil {
			s.malformed()
			writeStatus(w, ct, http.StatusBadRequest, codes.InvalidArgument, fmt.Sprintf("decoding %s %s request: %v", proto, sig, err))
			return
		}
		if err := s.deliver(req); err != nil {
			st, _ := grpcstatus.FromError(grpcError(err))
			writeStatus(w, ct, httpStatus(st.Code()), st.Code(), st.Message())
			return
		}
		var out []byte
		if proto == HTTPJSON {
			out, err = resp.MarshalJSON()
		} else {
			out, err = resp.MarshalProto()
		}
		if err != nil {
			writeStatus(w, ct, http.StatusInternalServerError, codes.Internal, err.Error())
			return
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
	}
}

func rootOf(sig Signal) guard.Message {
	switch sig {
	case Traces:
		return guard.TracesRequest
	case Metrics:
		return guard.MetricsRequest
	default:
		return guard.LogsRequest
	}
}

func unmarshal(fromProto, fromJSON func([]byte) error, p Protocol, b []byte) error {
	if p == HTTPJSON {
		return fromJSON(b)
	}
	return fromProto(b)
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("reading gzip body: %w", err)
		}
		defer gz.Close()
		rd = io.LimitReader(gz, MaxBodyBytes+1)
	default:
		return nil, fmt.Errorf("unsupported content encoding %q; want gzip or none", enc)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rd); err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if buf.Len() > MaxBodyBytes {
		return nil, fmt.Errorf("body larger than %d bytes", MaxBodyBytes)
	}
	return buf.Bytes(), nil
}

// httpStatus maps a gRPC code to the HTTP status OTLP/HTTP uses for it:
// retryable codes become 503 (or 429), the rest 400 or 500.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unavailable, codes.Aborted, codes.Canceled, codes.DeadlineExceeded, codes.OutOfRange, codes.DataLoss:
		return http.StatusServiceUnavailable
	case codes.InvalidArgument, codes.FailedPrecondition, codes.Unimplemented:
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// writeStatus answers with a google.rpc.Status body in the request's
// encoding, as OTLP/HTTP asks.
func writeStatus(w http.ResponseWriter, ct string, httpCode int, code codes.Code, msg string) {
	st := &status.Status{Code: int32(code), Message: msg}
	var body []byte
	if ct == ctJSON {
		body = []byte(fmt.Sprintf(`{"code":%d,"message":%q}`, code, msg))
	} else {
		ct = ctProtobuf
		body, _ = proto.Marshal(st)
	}
	w.Header().Set("Content-Type", ct)
	if httpCode == http.StatusServiceUnavailable || httpCode == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(httpCode)
	_, _ = w.Write(body)
}
