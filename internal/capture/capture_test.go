package capture

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recorder struct {
	mu   sync.Mutex
	reqs []*Request
}

func (r *recorder) handle(req *Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return nil
}

func (r *recorder) spans(p Protocol) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.reqs {
		if q.Protocol == p && q.Signal == Traces {
			n += q.Traces.SpanCount()
		}
	}
	return n
}

func start(t *testing.T, h Handler) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// emit sends n spans through the Go SDK with exp and shuts it down, which
// flushes every span.
func emit(t *testing.T, exp sdktrace.SpanExporter, n int) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	for range n {
		_, s := tp.Tracer("capture-test").Start(context.Background(), "op")
		s.End()
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutting down the SDK: %v", err)
	}
}

func TestOneListenerServesGRPCAndHTTP(t *testing.T) {
	rec := &recorder{}
	s := start(t, rec.handle)
	ctx := context.Background()

	g, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(s.Addr()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	emit(t, g, 3)
	h, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(s.Addr()), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	emit(t, h, 4)

	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID([16]byte{1})
	sp.SetSpanID([8]byte{2})
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.Endpoint()+"/v1/traces", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("JSON export: status %d, want 200", resp.StatusCode)
	}

	for p, want := range map[Protocol]int{GRPC: 3, HTTPProtobuf: 4, HTTPJSON: 1} {
		if got := rec.spans(p); got != want {
			t.Errorf("%s: %d spans, want %d", p, got, want)
		}
	}
}

func TestMalformedRequestsGetProtocolErrors(t *testing.T) {
	s := start(t, (&recorder{}).handle)
	for _, tc := range []struct {
		name, path, ct string
		body           []byte
		method         string
		want           int
	}{
		{"garbage protobuf", "/v1/traces", "application/x-protobuf", []byte{0xff, 0xff, 0xff}, "POST", 400},
		{"garbage json", "/v1/metrics", "application/json", []byte("{not json"), "POST", 400},
		{"wrong content type", "/v1/logs", "text/plain", []byte("x"), "POST", 415},
		{"GET", "/v1/traces", "application/json", nil, "GET", 405},
		{"unknown path", "/v1/profiles", "application/json", []byte("{}"), "POST", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.Endpoint()+tc.path, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if s.Malformed() != 2 {
		t.Errorf("Malformed = %d, want 2", s.Malformed())
	}
}

func TestHandlerRefusalKeepsItsCode(t *testing.T) {
	s := start(t, func(*Request) error { return grpcstatus.Error(codes.Unavailable, "try later") })
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("x")
	body, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	resp, err := http.Post(s.Endpoint()+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// rawCodec sends bytes as they are, to put a malformed message on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

func TestMalformedGRPCRequestIsCounted(t *testing.T) {
	rec := &recorder{}
	s := start(t, rec.handle)
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var reply []byte
	err = conn.Invoke(context.Background(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
		[]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, &reply, grpc.ForceCodecV2(rawCodec{}))
	if err == nil {
		t.Fatal("a malformed gRPC export was accepted")
	}
	if s.Malformed() != 1 {
		t.Errorf("Malformed = %d, want 1", s.Malformed())
	}
	if n := rec.spans(GRPC); n != 0 {
		t.Errorf("the handler saw %d spans, want none", n)
	}
}

// A request nesting an attribute value a million ArrayValues deep ended
// the process with a stack overflow in pdata's decoder: it is refused
// before decoding, over HTTP protobuf, HTTP JSON and gRPC, counted as
// malformed, and the receiver goes on serving.
func TestDeepRequestsAreRefused(t *testing.T) {
	rec := &recorder{}
	s := start(t, rec.handle)
	deep := guardtest.DeepTraces(1_000_000)
	for _, c := range []struct {
		ct   string
		body []byte
	}{
		{"application/x-protobuf", deep},
		{"application/json", guardtest.DeepTracesJSON(500_000)},
	} {
		resp, err := http.Post(s.Endpoint()+"/v1/traces", c.ct, bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(out, []byte("too deep")) {
			t.Fatalf("%s: %d %q, want 400 saying why", c.ct, resp.StatusCode, out)
		}
	}
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var reply []byte
	err = conn.Invoke(context.Background(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", deep, &reply, grpc.ForceCodecV2(rawCodec{}))
	if st := grpcstatus.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "too deep") {
		t.Fatalf("gRPC: %v, want InvalidArgument saying why", err)
	}
	if got := s.Malformed(); got != 3 {
		t.Errorf("%d malformed requests counted, want 3", got)
	}
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID([16]byte{1})
	sp.SetSpanID([8]byte{1})
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatalf("a normal request afterwards: %v", err)
	}
	if rec.spans(GRPC) != 1 {
		t.Fatalf("%d spans received, want 1", rec.spans(GRPC))
	}
}
