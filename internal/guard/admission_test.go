package guard_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/admission"
	"github.com/doubletake/doubletake/internal/guard"
)

// fakeQueue is a queue whose room the test sets.
type fakeQueue struct{ free atomic.Int64 }

func (q *fakeQueue) Free() (int64, admission.Unit) { return q.free.Load(), admission.Bytes }
func (*fakeQueue) Name() string                    { return "dedup_otlp_grpc/upstream" }

// countingCodec is the proto codec, counting the messages it decodes.
type countingCodec struct {
	encoding.CodecV2
	decoded atomic.Int64
}

func (c *countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.decoded.Add(1)
	return c.CodecV2.Unmarshal(data, v)
}

// enteringSink is a traces service whose requests enter q (a pipeline
// ending in the dedup exporter) unless skip says otherwise.
type enteringSink struct {
	ptraceotlp.UnimplementedGRPCServer
	q        *fakeQueue
	skip     atomic.Bool
	requests atomic.Int64
}

func (s *enteringSink) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.requests.Add(1)
	// As the OTLP receiver: a request without spans is answered at once.
	if !s.skip.Load() && req.Traces().SpanCount() > 0 {
		admission.Enter(ctx, s.q)
	}
	return ptraceotlp.NewExportResponse(), nil
}

func startGRPC(t *testing.T, g *guard.GRPC, sink *enteringSink) ptraceotlp.GRPCClient {
	t.Helper()
	srv := grpc.NewServer(g.ServerOptions()...)
	ptraceotlp.RegisterGRPCServer(srv, sink)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return ptraceotlp.NewGRPCClient(cc)
}

// Once its requests have shown which queue they enter, the server refuses
// a request that queue has no room for with Unavailable, without decoding
// it, and takes requests again as soon as there is room.
func TestGRPCRefusesBeforeDecodingWhileTheQueueIsFull(t *testing.T) {
	codec := &countingCodec{CodecV2: encoding.GetCodecV2("proto")}
	var refusals []error
	var mu sync.Mutex
	g := guard.NewGRPC(guard.DefaultMaxDepth, codec, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		refusals = append(refusals, err)
	})
	sink := &enteringSink{q: &fakeQueue{}}
	sink.q.free.Store(1 << 30)
	client := startGRPC(t, g, sink)
	req := ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(2))
	size, _ := req.MarshalProto()
	ctx := context.Background()

	if _, err := client.Export(ctx, req); err != nil {
		t.Fatal(err)
	}
	// A request without items, which the receiver answers itself, says
	// nothing about where requests go.
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequest()); err != nil {
		t.Fatal(err)
	}
	sink.q.free.Store(int64(len(size)) - 1) // one byte short
	_, err := client.Export(ctx, req)
	st, _ := grpcstatus.FromError(err)
	if st.Code() != codes.Unavailable || st.Message() != "sending queue is full (dedup_otlp_grpc/upstream); retry later" {
		t.Fatalf("full queue: %v, want Unavailable naming the queue", err)
	}
	if d, r := codec.decoded.Load(), sink.requests.Load(); d != 2 || r != 2 {
		t.Fatalf("decoded %d, handled %d; want the refused request neither decoded nor handled", d, r)
	}
	var full *admission.FullError
	if len(refusals) != 1 || !errors.As(refusals[0], &full) {
		t.Fatalf("refusals %v, want one FullError", refusals)
	}
	sink.q.free.Store(int64(len(size))) // room for exactly this request
	if _, err := client.Export(ctx, req); err != nil {
		t.Fatalf("with room again: %v", err)
	}
	if codec.decoded.Load() != 3 || sink.requests.Load() != 3 {
		t.Fatal("the retry was not decoded and handled")
	}
}

// Requests that do not all enter the queue (some routed elsewhere) are
// never refused for it before decoding: the queue refuses its own.
func TestGRPCDoesNotRefuseWhenRoutesVary(t *testing.T) {
	var kinds []string
	g := guard.NewGRPC(guard.DefaultMaxDepth, nil, nil)
	g.OnRouteVaried(func(kind string) { kinds = append(kinds, kind) })
	sink := &enteringSink{q: &fakeQueue{}}
	sink.q.free.Store(1 << 30)
	client := startGRPC(t, g, sink)
	req := ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(2))
	ctx := context.Background()
	if _, err := client.Export(ctx, req); err != nil {
		t.Fatal(err)
	}
	sink.skip.Store(true)
	if _, err := client.Export(ctx, req); err != nil {
		t.Fatal(err)
	}
	sink.q.free.Store(0)
	if _, err := client.Export(ctx, req); err != nil {
		t.Fatalf("refused for a queue this request may not enter: %v", err)
	}
	if len(kinds) != 1 || kinds[0] != "traces" {
		t.Fatalf("OnRouteVaried calls %v, want one for traces", kinds)
	}
}

// Over HTTP the body is read whole (no decoding), then refused with 503 by
// the receiver's own error path, before anything decodes it.
func TestHTTPRefusesBeforeDecodingWhileTheQueueIsFull(t *testing.T) {
	q := &fakeQueue{}
	q.free.Store(1 << 30)
	var decoded atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			st, _ := grpcstatus.FromError(err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, st.Code().String()+": "+st.Message())
			return
		}
		decoded.Add(1)
		// As the OTLP receiver: a request without spans is answered at once.
		var td ptrace.Traces
		if r.Header.Get("Content-Type") == "application/json" {
			td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		} else {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		}
		if err == nil && td.SpanCount() > 0 {
			admission.Enter(r.Context(), q)
		}
	})
	var refused atomic.Int64
	srv := httptest.NewServer(guard.HTTPHandler(next, guard.HTTPConfig{OnRefuse: func(error) { refused.Add(1) }}))
	defer srv.Close()
	body := realTraces(t)
	post := func(path, ct string, body []byte) (int, string) {
		resp, err := http.Post(srv.URL+path, ct, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, msg := post("/v1/traces", "application/x-protobuf", body); code != http.StatusOK {
		t.Fatalf("%d %s", code, msg)
	}
	// Requests without items, which the receiver answers itself, say
	// nothing about where requests go.
	for _, empty := range []string{`{}`, `{"resourceSpans":[]}`} {
		if code, msg := post("/v1/traces", "application/json", []byte(empty)); code != http.StatusOK {
			t.Fatalf("%s: %d %s", empty, code, msg)
		}
	}
	q.free.Store(int64(len(body)) - 1)
	code, msg := post("/v1/traces", "application/x-protobuf", body)
	if code != http.StatusServiceUnavailable || msg != "Unavailable: sending queue is full (dedup_otlp_grpc/upstream); retry later" {
		t.Fatalf("full queue: %d %q, want 503 naming the queue", code, msg)
	}
	if decoded.Load() != 3 || refused.Load() != 1 {
		t.Fatalf("decoded %d, refused %d; want 3 and 1", decoded.Load(), refused.Load())
	}
	// JSON counts half its bytes: a body of twice the room fits, two bytes
	// more do not.
	room := len(body) - 1
	jsonBody := func(n int) []byte { return append(bytes.Repeat([]byte(" "), n-2), "{}"...) }
	if code, msg := post("/v1/traces", "application/json", jsonBody(2*room)); code != http.StatusOK {
		t.Fatalf("JSON body of twice the room: %d %q", code, msg)
	}
	if code, _ := post("/v1/traces", "application/json", jsonBody(2*room+2)); code != http.StatusServiceUnavailable {
		t.Fatalf("JSON body of more than twice the room: %d, want 503", code)
	}
	// Another kind of request has learned nothing: it passes.
	if code, _ := post("/v1/logs", "application/x-protobuf", nil); code != http.StatusOK {
		t.Fatalf("a logs request: %d", code)
	}
	q.free.Store(int64(len(body)))
	if code, msg := post("/v1/traces", "application/x-protobuf", body); code != http.StatusOK {
		t.Fatalf("with room again: %d %q", code, msg)
	}
	if decoded.Load() != 6 || refused.Load() != 2 {
		t.Fatalf("decoded %d, refused %d; want 6 and 2", decoded.Load(), refused.Load())
	}
}

// Over HTTP too, requests with items that do not enter the queue turn the
// refusals before decoding off.
func TestHTTPDoesNotRefuseWhenRoutesVary(t *testing.T) {
	q := &fakeQueue{}
	q.free.Store(1 << 30)
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.Header.Get("X-Route") == "" {
			admission.Enter(r.Context(), q)
		}
	})
	var kinds []string
	srv := httptest.NewServer(guard.HTTPHandler(next, guard.HTTPConfig{OnRouteVaried: func(kind string) { kinds = append(kinds, kind) }}))
	defer srv.Close()
	body := realTraces(t)
	post := func(route string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Route", route)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	post("")
	post("elsewhere")
	q.free.Store(0)
	if code := post(""); code != http.StatusOK {
		t.Fatalf("refused for a queue requests may skip: %d", code)
	}
	if len(kinds) != 1 || kinds[0] != "traces" {
		t.Fatalf("OnRouteVaried calls %v, want one for traces", kinds)
	}
}

// A request holding a resource but no spans is answered by the receiver
// without the pipeline, and the guard does not decode to tell it from one
// routed around the queue: it turns the refusals before decoding off, the
// safe side (the queue still refuses what it has no room for).
func TestGRPCResourceWithoutItemsTurnsRefusalsOff(t *testing.T) {
	var kinds []string
	g := guard.NewGRPC(guard.DefaultMaxDepth, nil, nil)
	g.OnRouteVaried(func(kind string) { kinds = append(kinds, kind) })
	sink := &enteringSink{q: &fakeQueue{}}
	sink.q.free.Store(1 << 30)
	client := startGRPC(t, g, sink)
	ctx := context.Background()
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(2))); err != nil {
		t.Fatal(err)
	}
	hollow := ptrace.NewTraces()
	hollow.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(hollow)); err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 1 || kinds[0] != "traces" {
		t.Fatalf("OnRouteVaried calls %v, want one for traces", kinds)
	}
	sink.q.free.Store(0)
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(2))); err != nil {
		t.Fatalf("refused before decoding after the refusals were turned off: %v", err)
	}
}
