package guard_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/doubletake/doubletake/internal/guard"
	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

func TestProtoDepthOfDeepTraces(t *testing.T) {
	for _, levels := range []int{0, 1, 5, 60} {
		b := guardtest.DeepTraces(levels)
		// The generator's output is what pdata decodes...
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			t.Fatalf("%d levels: pdata cannot decode the generated request: %v", levels, err)
		}
		if n := req.Traces().SpanCount(); n != 1 {
			t.Fatalf("%d levels: %d spans, want 1", levels, n)
		}
		// ...and nests 6 messages to the value, 2 more per level.
		if got, want := guard.ProtoDepth(b, guard.TracesRequest), 6+2*levels; got != want {
			t.Errorf("%d levels: depth %d, want %d", levels, got, want)
		}
		j := guardtest.DeepTracesJSON(levels)
		if err := req.UnmarshalJSON(j); err != nil {
			t.Fatalf("%d levels: pdata cannot decode the generated JSON: %v", levels, err)
		}
	}
}

func TestCheckProtoAtTheLimit(t *testing.T) {
	b := guardtest.DeepTraces(61) // depth 128
	if err := guard.CheckProto(b, guard.TracesRequest, 128); err != nil {
		t.Fatalf("depth 128 at limit 128: %v", err)
	}
	if err := guard.CheckProto(b, guard.TracesRequest, 127); !errors.Is(err, guard.ErrTooDeep) {
		t.Fatalf("depth 128 at limit 127: %v, want ErrTooDeep", err)
	}
	// A request of unknown signal is tried as every one.
	if err := guard.CheckProto(b, guard.Unknown, 127); !errors.Is(err, guard.ErrTooDeep) {
		t.Fatalf("unknown root: %v, want ErrTooDeep", err)
	}
	// Read as metrics or logs, the same bytes do not nest.
	if err := guard.CheckProto(b, guard.LogsRequest, 8); err != nil {
		t.Fatalf("as logs: %v", err)
	}
}

// The walk skips a message too short to nest past the limit (two bytes a
// level at the least). Here every level takes exactly two bytes, the
// tightest a decoder takes, so a bound one level too optimistic would pass
// a request one level too deep: at every limit the check refuses exactly
// the requests deeper than it, whether the deep value is the first or the
// last attribute of a long span.
func TestCheckProtoSkipsOnlyWhatCannotBeTooDeep(t *testing.T) {
	field := func(f int, inner []byte) []byte {
		if len(inner) > 127 {
			t.Fatalf("inner message of %d bytes: the lengths must stay one byte", len(inner))
		}
		return append([]byte{byte(f<<3 | 2), byte(len(inner))}, inner...)
	}
	filler := field(1, bytes.Repeat([]byte{'k'}, 100)) // a KeyValue with a long key
	for levels := 0; levels <= 28; levels++ {
		var v []byte // the innermost AnyValue, empty
		for range levels {
			v = field(5, field(1, v)) // AnyValue{array_value: ArrayValue{values: v}}
		}
		kv := field(2, v) // KeyValue{value: v}
		for _, last := range []bool{false, true} {
			var sp []byte
			if last {
				sp = append(append(sp, field(9, filler)...), field(9, kv)...)
			} else {
				sp = append(append(sp, field(9, kv)...), field(9, filler)...)
			}
			ss := append(binaryLen(2, len(sp)), sp...) // ScopeSpans{spans: sp}
			rs := append(binaryLen(2, len(ss)), ss...) // ResourceSpans{scope_spans: ss}
			b := append(binaryLen(1, len(rs)), rs...)  // the request
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(b); err != nil {
				t.Fatalf("%d levels: pdata cannot decode the request: %v", levels, err)
			}
			depth := guard.ProtoDepth(b, guard.TracesRequest)
			if want := 6 + 2*levels; depth != want {
				t.Fatalf("%d levels: depth %d, want %d", levels, depth, want)
			}
			for limit := 8; limit <= 70; limit++ {
				err := guard.CheckProto(b, guard.TracesRequest, limit)
				if refused := errors.Is(err, guard.ErrTooDeep); refused != (depth > limit) {
					t.Fatalf("depth %d (deep value last: %v) at limit %d: %v", depth, last, limit, err)
				}
			}
		}
	}
}

// binaryLen is a length-delimited field's tag and length.
func binaryLen(f, n int) []byte {
	b := []byte{byte(f<<3 | 2)}
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// The request that ends the process with a stack overflow in pdata's
// decoder today: refused at once, without allocating.
func TestCheckProtoRefusesAMillionLevels(t *testing.T) {
	b := guardtest.DeepTraces(1_250_000)
	if len(b) > 16<<20 {
		t.Fatalf("the request is %d bytes, over the 16 MiB default limit", len(b))
	}
	err := guard.CheckProto(b, guard.TracesRequest, guard.DefaultMaxDepth)
	var de *guard.DepthError
	if !errors.As(err, &de) || de.Limit != guard.DefaultMaxDepth {
		t.Fatalf("got %v, want a DepthError at %d", err, guard.DefaultMaxDepth)
	}
	if !strings.Contains(err.Error(), "more than 128 nested messages") {
		t.Errorf("message %q does not say why", err)
	}
	// Without a limit short of it, the walk goes to the end without
	// recursing: the depth is capped at MaxDepthLimit+1.
	if d := guard.ProtoDepth(b, guard.TracesRequest); d != guard.MaxDepthLimit+1 {
		t.Errorf("depth %d, want %d", d, guard.MaxDepthLimit+1)
	}
	// Walking it allocates nothing (a refusal allocates its error).
	ok := realTraces(t)
	j := guardtest.DeepTracesJSON(1000)
	noAlloc := testing.AllocsPerRun(5, func() {
		_ = guard.ProtoDepth(b, guard.TracesRequest)
		_ = guard.CheckProto(ok, guard.Unknown, guard.DefaultMaxDepth)
		_ = guard.CheckJSON(j, 1<<20)
	})
	if noAlloc != 0 {
		t.Errorf("%v allocations per check, want 0", noAlloc)
	}
}

func TestCheckJSON(t *testing.T) {
	j := guardtest.DeepTracesJSON(100_000)
	err := guard.Check(j, guard.JSON, guard.TracesRequest, 128)
	if !errors.Is(err, guard.ErrTooDeep) || !strings.Contains(err.Error(), "more than 256 nested JSON") {
		t.Fatalf("got %v, want a refusal at 256 containers", err)
	}
	// Brackets inside strings, escaped quotes included, do not count.
	s := []byte(`{"a":"[[[[\"[[[[","b":[{"c":"\\"},{}]}`)
	if err := guard.CheckJSON(s, 3); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if err := guard.CheckJSON(s, 2); !errors.Is(err, guard.ErrTooDeep) {
		t.Fatalf("%s at 2: %v, want ErrTooDeep", s, err)
	}
	// Real OTLP/JSON within twice the message depth.
	m := ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(3))
	rj, _ := m.MarshalJSON()
	if err := guard.Check(rj, guard.JSON, guard.TracesRequest, 16); err != nil {
		t.Fatalf("real JSON of depth 16: %v", err)
	}
}

// Real requests of every signal, with every kind of nested message, pass
// at the depth they have and are refused just below it.
func TestRealRequests(t *testing.T) {
	traces := ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(3))
	tb, _ := traces.MarshalProto()
	metrics := pmetricotlp.NewExportRequestFromMetrics(metricsWithExemplar())
	mb, _ := metrics.MarshalProto()
	logs := plogotlp.NewExportRequestFromLogs(logsWithMapBody())
	lb, _ := logs.MarshalProto()
	for _, c := range []struct {
		name  string
		b     []byte
		root  guard.Message
		depth int
	}{
		// request, resource spans, scope spans, span, event, attribute,
		// value, then the map (list, key-value, value) three times.
		{"traces", tb, guard.TracesRequest, 7 + 3*3},
		// request, resource metrics, scope metrics, metric, histogram,
		// point, exemplar, attribute, value.
		{"metrics", mb, guard.MetricsRequest, 9},
		// request, resource logs, scope logs, record, body, list, value.
		{"logs", lb, guard.LogsRequest, 7},
	} {
		if got := guard.ProtoDepth(c.b, c.root); got != c.depth {
			t.Errorf("%s: depth %d, want %d", c.name, got, c.depth)
		}
		if err := guard.CheckProto(c.b, c.root, c.depth); err != nil {
			t.Errorf("%s at its depth: %v", c.name, err)
		}
		if err := guard.CheckProto(c.b, c.root, c.depth-1); !errors.Is(err, guard.ErrTooDeep) {
			t.Errorf("%s below its depth: %v", c.name, err)
		}
		if err := guard.CheckProto(c.b, guard.Unknown, c.depth); err != nil {
			t.Errorf("%s as unknown: %v", c.name, err)
		}
	}
}

// The handler stands for the OTLP receiver: it reads the whole body, and
// answers a read error with the status it carries, as otlpreceiver does.
func TestHTTPHandler(t *testing.T) {
	var got []byte
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			st, _ := grpcstatus.FromError(err)
			out, _ := proto.Marshal(st.Proto())
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(out)
			return
		}
		got = body
		w.WriteHeader(http.StatusOK)
	})
	var refusals int
	srv := httptest.NewServer(guard.HTTPHandler(next, guard.HTTPConfig{MaxDepth: guard.DefaultMaxDepth, OnRefuse: func(error) { refusals++ }}))
	defer srv.Close()

	for _, c := range []struct {
		path, ct string
		body     []byte
	}{
		{"/v1/traces", "application/x-protobuf", guardtest.DeepTraces(100_000)},
		{"/custom/path", "application/x-protobuf", guardtest.DeepTraces(100_000)},
		{"/v1/traces", "application/json; charset=utf-8", guardtest.DeepTracesJSON(100_000)},
	} {
		got = nil
		resp, err := http.Post(srv.URL+c.path, c.ct, bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || got != nil {
			t.Fatalf("%s %s: status %d (body read whole: %v), want 400", c.path, c.ct, resp.StatusCode, got != nil)
		}
		var st status.Status
		if err := proto.Unmarshal(out, &st); err != nil || codes.Code(st.Code) != codes.InvalidArgument || !strings.Contains(st.Message, "too deep") {
			t.Fatalf("%s %s: status %v (%v), want InvalidArgument saying why", c.path, c.ct, &st, err)
		}
	}
	if refusals != 3 {
		t.Errorf("%d refusals counted, want 3", refusals)
	}
	for _, path := range []string{"/v1/traces", "/elsewhere"} {
		ok := realTraces(t)
		resp, err := http.Post(srv.URL+path, "application/x-protobuf", bytes.NewReader(ok))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, ok) {
			t.Fatalf("a normal request to %s: status %d, body passed intact: %v", path, resp.StatusCode, bytes.Equal(got, ok))
		}
	}
}

type traceSink struct {
	ptraceotlp.UnimplementedGRPCServer
	spans int
}

func (s *traceSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.spans += req.Traces().SpanCount()
	return ptraceotlp.NewExportResponse(), nil
}

func TestGRPC(t *testing.T) {
	var refusals int
	g := guard.NewGRPC(guard.DefaultMaxDepth, nil, func(error) { refusals++ })
	srv := grpc.NewServer(append(g.ServerOptions(), grpc.MaxRecvMsgSize(16<<20))...)
	sink := &traceSink{}
	ptraceotlp.RegisterGRPCServer(srv, sink)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	// The deep request, as raw bytes: pdata's own marshaller would recurse
	// as deep as its decoder.
	deep := guardtest.DeepTraces(1_000_000)
	m := rawMessage(deep)
	err = cc.Invoke(context.Background(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &m, new(rawMessage), grpc.ForceCodecV2(rawCodec{}))
	if st, _ := grpcstatus.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "too deep") {
		t.Fatalf("deep request: %v, want InvalidArgument saying why", err)
	}
	if refusals != 1 || sink.spans != 0 {
		t.Fatalf("refusals %d, spans delivered %d; want 1 and 0", refusals, sink.spans)
	}
	if _, err := ptraceotlp.NewGRPCClient(cc).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(2))); err != nil {
		t.Fatalf("a normal request: %v", err)
	}
	if sink.spans != 1 {
		t.Fatalf("%d spans delivered, want 1", sink.spans)
	}
}

// tracesWithDepth is one span with an event whose attribute is a map
// nested mapLevels deep.
func tracesWithDepth(mapLevels int) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("op")
	sp.SetTraceID([16]byte{1})
	sp.SetSpanID([8]byte{1})
	m := sp.Events().AppendEmpty().Attributes().PutEmptyMap("m")
	for range mapLevels - 1 {
		m = m.PutEmptyMap("m")
	}
	m.PutStr("leaf", "v")
	return td
}

func metricsWithExemplar() pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("h")
	dp := m.SetEmptyHistogram().DataPoints().AppendEmpty()
	dp.Exemplars().AppendEmpty().FilteredAttributes().PutStr("k", "v")
	return md
}

func logsWithMapBody() plog.Logs {
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetEmptySlice().AppendEmpty().SetStr("x")
	lr.Attributes().PutInt("n", 1)
	return ld
}

func realTraces(t testing.TB) []byte {
	b, err := ptraceotlp.NewExportRequestFromTraces(tracesWithDepth(2)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMessage))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMessage) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// noopHandler reads the whole body, as the OTLP receiver does.
type noopHandler struct{}

func (noopHandler) ServeHTTP(_ http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) }

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func newRequest(path, ct string, body io.ReadCloser) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, body)
	r.Header.Set("Content-Type", ct)
	return r
}

// The bodies of requests in flight share one budget: a request that would
// take them past it is refused with Unavailable (retryable), and a request
// gives its bytes back once answered.
func TestHTTPInFlightBudget(t *testing.T) {
	read, proceed := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			st, _ := grpcstatus.FromError(err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, st.Code().String()+": "+st.Message())
			return
		}
		if r.URL.Query().Has("hold") {
			read <- struct{}{}
			<-proceed
		}
	})
	var refused []error
	var mu sync.Mutex
	srv := httptest.NewServer(guard.HTTPHandler(next, guard.HTTPConfig{MaxInFlightBytes: 1000, OnRefuse: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, err)
	}}))
	defer srv.Close()
	post := func(query string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/traces"+query, "application/x-protobuf", bytes.NewReader(make([]byte, 600)))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	held := make(chan int)
	go func() { code, _ := post("?hold"); held <- code }()
	<-read // 600 bytes held
	if code, msg := post(""); code != http.StatusServiceUnavailable || !strings.Contains(msg, "Unavailable: request bodies in flight exceed 1000 bytes") {
		t.Fatalf("over the budget: %d %q, want 503 Unavailable", code, msg)
	}
	close(proceed)
	if code := <-held; code != http.StatusOK {
		t.Fatalf("the held request: %d", code)
	}
	if code, msg := post(""); code != http.StatusOK {
		t.Fatalf("after the held request was answered: %d %q, want 200", code, msg)
	}
	var inFlight *guard.InFlightError
	if len(refused) != 1 || !errors.As(refused[0], &inFlight) {
		t.Fatalf("refusals %v, want one InFlightError", refused)
	}
}
