package e2e

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

// smallTraces is one ordinary OTLP/protobuf trace request.
func smallTraces(t *testing.T) []byte {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	sp := req.Traces().ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("after")
	sp.SetTraceID([16]byte{9, 9})
	sp.SetSpanID([8]byte{9})
	b, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postOTLP sends body to an OTLP/HTTP endpoint and returns the status code
// and the google.rpc.Status of the answer, if any.
func postOTLP(t *testing.T, url, contentType, encoding string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if contentType == "application/x-protobuf" && resp.StatusCode != http.StatusOK {
		var st status.Status
		if proto.Unmarshal(out, &st) == nil {
			return resp.StatusCode, st.Message
		}
	}
	return resp.StatusCode, string(out)
}

// grpcDeep calls the trace service with payload as the raw request message
// and returns the status.
func grpcCall(t *testing.T, addr string, payload []byte) *grpcstatus.Status {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var reply []byte
	err = conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &payload, &reply, grpc.ForceCodec(rawCodec{}))
	return grpcstatus.Convert(err)
}

// TestGuardDeepNesting: one request nesting an attribute value 1.25M
// ArrayValues deep (12 MB, under the 16 MiB limit) ended the default
// gateway with a stack overflow in pdata's decoder. The guard refuses it
// before decoding, over OTLP/HTTP protobuf, OTLP/HTTP JSON and OTLP/gRPC,
// with 400 / InvalidArgument saying why, and the gateway goes on serving.
func TestGuardDeepNesting(t *testing.T) {
	d := startDefault(t)
	deep := guardtest.DeepTraces(1_250_000)
	deepJSON := guardtest.DeepTracesJSON(500_000) // 14 MB
	if len(deep) > 16<<20 || len(deepJSON) > 16<<20 {
		t.Fatalf("payloads of %d and %d bytes exceed the 16 MiB limit", len(deep), len(deepJSON))
	}
	alive := func(after string) {
		t.Helper()
		select {
		case <-d.g.done:
			t.Fatalf("the gateway died after %s: %v\n%s", after, d.g.err, lastLines(d.g.stderr.String(), 20))
		default:
		}
		if code, msg := postOTLP(t, "http://"+d.http+"/v1/traces", "application/x-protobuf", "", smallTraces(t)); code != http.StatusOK {
			t.Fatalf("a normal request after %s: %d %s", after, code, msg)
		}
		if st := grpcCall(t, d.grpc, smallTraces(t)); st.Code() != codes.OK {
			t.Fatalf("a normal gRPC request after %s: %v", after, st)
		}
	}

	code, msg := postOTLP(t, "http://"+d.http+"/v1/traces", "application/x-protobuf", "", deep)
	if code != http.StatusBadRequest || !strings.Contains(msg, "more than 128 nested messages") {
		t.Errorf("HTTP protobuf: %d %q, want 400 saying it nests more than 128 messages", code, msg)
	}
	alive("the HTTP protobuf request")

	code, msg = postOTLP(t, "http://"+d.http+"/v1/traces", "application/json", "", deepJSON)
	if code != http.StatusBadRequest || !strings.Contains(msg, "more than 256 nested JSON") {
		t.Errorf("HTTP JSON: %d %q, want 400 saying it nests more than 256 JSON containers", code, msg)
	}
	alive("the HTTP JSON request")

	// Compressed, the guard sees the decompressed bytes.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(deep)
	_ = zw.Close()
	code, msg = postOTLP(t, "http://"+d.http+"/v1/traces", "application/x-protobuf", "gzip", gz.Bytes())
	if code != http.StatusBadRequest || !strings.Contains(msg, "too deep") {
		t.Errorf("HTTP protobuf, gzip: %d %q, want 400 saying why", code, msg)
	}
	alive("the gzip request")

	st := grpcCall(t, d.grpc, deep)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "more than 128 nested messages") {
		t.Errorf("gRPC: %v, want InvalidArgument saying it nests more than 128 messages", st)
	}
	alive("the gRPC request")

	self := get(t, "http://"+d.tel+"/metrics")
	for _, want := range []string{`otelcol_guard_refused_requests{protocol="http"`, `otelcol_guard_refused_requests{protocol="grpc"`} {
		if _, ok := promValue(self, want); !ok {
			t.Errorf("no %s in the gateway's metrics:\n%s", want, grepLines(self, "guard"))
		}
	}
}

// bomb compresses size zero bytes with enc.
func bomb(t *testing.T, enc string, size int) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	switch enc {
	case "gzip":
		w, _ = gzip.NewWriterLevel(&b, gzip.BestCompression)
	case "deflate":
		w, _ = zlib.NewWriterLevel(&b, zlib.BestCompression)
	case "lz4":
		w = lz4.NewWriter(&b)
	case "x-snappy-framed":
		w = snappy.NewBufferedWriter(&b)
	case "snappy":
		// The block format states its decoded length up front, and the
		// server refuses one over its body limit: stay just under 16 MiB.
		return snappy.Encode(nil, make([]byte, 16<<20-1<<10))
	case "zstd":
		// A large window, declared by the client.
		zw, err := zstd.NewWriter(&b, zstd.WithWindowSize(32<<20), zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		t.Fatalf("no bomb for %q", enc)
	}
	zero := make([]byte, 1<<20)
	for range size >> 20 {
		if _, err := w.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGuardDecompressionBombs: 96 concurrent OTLP/HTTP requests whose small
// bodies expand past the 16 MiB body limit (snappy's block format: just
// under it), against a fresh default gateway per encoding. The
// collector's HTTP server keeps a zstd decoder per concurrent request with
// a window the client chooses (~36 MB each, pooled: 250 such requests left
// 9 GB), an lz4 reader with blocks of up to 4 MB, and decodes a snappy
// block whole before any middleware sees it: the default config refuses
// those three encodings (400, naming them). gzip, deflate and framed
// snappy stream through small decoders; what they produce is bounded by
// the 16 MiB body limit per request and by the guard's
// max_in_flight_bytes (128 MiB) in total, past which requests get 503.
// The gateway's peak RSS stays under 768 MiB (128 MiB in flight, the
// receiver's buffers up to twice what it read, and the Go runtime's own),
// and it answers a normal request afterwards. The gateway runs with
// GOMEMLIMIT=512MiB so that the figure is what the process holds, not how
// far the garbage collector let the heap run ahead: without it, the peak
// of the same binary varied from 508 to 867 MiB between runs (96
// goroutines allocating while it marks), on the code before and after the
// fifth session alike. A gateway that held more than the bound (zstd's
// decoders: 9 GB) still fails, as no collection can free what is live.
func TestGuardDecompressionBombs(t *testing.T) {
	const (
		concurrent = 96
		rssBound   = 768 << 20
	)
	for _, c := range []struct {
		enc      string
		expanded int
		refused  bool // by the default config
	}{
		{"zstd", 64 << 20, true}, {"lz4", 256 << 20, true}, {"snappy", 16 << 20, true},
		{"gzip", 256 << 20, false}, {"deflate", 256 << 20, false}, {"x-snappy-framed", 32 << 20, false},
	} {
		t.Run(c.enc, func(t *testing.T) {
			d := startDefaultEnv(t, []string{"GOMEMLIMIT=512MiB"})
			body := bomb(t, c.enc, c.expanded)
			var wg sync.WaitGroup
			codes := make([]int, concurrent)
			msgs := make([]string, concurrent)
			for i := range concurrent {
				wg.Go(func() {
					codes[i], msgs[i] = postOTLP(t, "http://"+d.http+"/v1/traces", "application/x-protobuf", c.enc, body)
				})
			}
			wg.Wait()
			peak := vmHWM(t, d.g.cmd.Process.Pid)
			t.Logf("%d concurrent %s bombs of %d bytes: peak RSS %d MiB", concurrent, c.enc, len(body), peak>>20)
			if peak > rssBound {
				t.Fatalf("after %d concurrent %s bombs the gateway's peak RSS is %d MiB, want under %d MiB", concurrent, c.enc, peak>>20, rssBound>>20)
			}
			for i, code := range codes {
				if c.refused && (code != http.StatusBadRequest || !strings.Contains(msgs[i], c.enc)) {
					t.Fatalf("%s bomb: %d %q, want 400 naming the encoding", c.enc, code, msgs[i])
				}
				if code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge && code != http.StatusServiceUnavailable {
					t.Fatalf("%s bomb (%d bytes): %d %q, want 400, 413 or 503", c.enc, len(body), code, msgs[i])
				}
			}
			if code, msg := postOTLP(t, "http://"+d.http+"/v1/traces", "application/x-protobuf", "", smallTraces(t)); code != http.StatusOK {
				t.Fatalf("a normal request after the %s bombs: %d %s", c.enc, code, msg)
			}
		})
	}
}

// zstdCompressor is a client-side gRPC zstd compressor whose window the
// test sets (the gateway takes up to 8 MiB).
type zstdCompressor struct{}

// zstdWindow is the window zstdCompressor declares; subtests set it in turn.
var zstdWindow atomic.Int64

func (zstdCompressor) Name() string { return "zstd" }

func (zstdCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	return zstd.NewWriter(w, zstd.WithWindowSize(int(zstdWindow.Load())), zstd.WithEncoderLevel(zstd.SpeedFastest))
}

func (zstdCompressor) Decompress(r io.Reader) (io.Reader, error) {
	d, err := zstd.NewReader(r)
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// TestGuardGRPCDecompressionBombs: 96 concurrent gRPC requests of a few KB,
// compressed with zstd (a 32 MiB and a 4 MiB window) or gzip, each
// expanding past the 16 MiB message limit. grpc-go decompresses before any
// middleware; the guard bounds how many messages the process decompresses
// at once (max_grpc_decompressions, 8) and pools zstd decoders of at most
// 8 MiB windows, so the gateway's peak RSS stays under 768 MiB (the
// previous default: 2.1 GB with the 32 MiB window, 1.1 GB with 4 MiB;
// gzip stayed near 300 MiB), every request is refused (the 32 MiB window
// at once), and a normal request is served afterwards.
func TestGuardGRPCDecompressionBombs(t *testing.T) {
	const (
		concurrent = 96
		rssBound   = 768 << 20
	)
	// The client must compress with the window the subtest chooses: another
	// package linked into this test binary (the collector's configgrpc) may
	// have registered its own zstd compressor, which writes 512 KiB windows.
	// No e2e test runs in parallel, so swapping it for this test is safe.
	if prev := encoding.GetCompressor("zstd"); prev != nil {
		t.Cleanup(func() { encoding.RegisterCompressor(prev) })
	}
	encoding.RegisterCompressor(zstdCompressor{})
	payload := make([]byte, 17<<20) // zeros: a few KB compressed
	for _, c := range []struct {
		name, enc string
		window    int64
		want      codes.Code
		msg       string
	}{
		{"zstd-32MiB-window", "zstd", 32 << 20, codes.Internal, "window size exceeded"},
		{"zstd-4MiB-window", "zstd", 4 << 20, codes.ResourceExhausted, "larger than max"},
		{"gzip", "gzip", 0, codes.ResourceExhausted, "larger than max"},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc := c.enc
			zstdWindow.Store(c.window)
			d := startDefault(t)
			conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var wg sync.WaitGroup
			got := make([]error, concurrent)
			for i := range concurrent {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					var reply []byte
					got[i] = conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &payload, &reply,
						grpc.ForceCodec(rawCodec{}), grpc.UseCompressor(enc))
				})
			}
			wg.Wait()
			peak := vmHWM(t, d.g.cmd.Process.Pid)
			t.Logf("%d concurrent gRPC %s bombs: peak RSS %d MiB", concurrent, enc, peak>>20)
			if peak > rssBound {
				t.Fatalf("peak RSS %d MiB, want under %d MiB", peak>>20, rssBound>>20)
			}
			for _, err := range got {
				if st := grpcstatus.Convert(err); st.Code() != c.want || !strings.Contains(st.Message(), c.msg) {
					t.Fatalf("a %s bomb: %v, want %s saying %q", c.name, err, c.want, c.msg)
				}
			}
			if st := grpcCall(t, d.grpc, smallTraces(t)); st.Code() != codes.OK {
				t.Fatalf("a normal gRPC request after the bombs: %v", st)
			}
		})
	}
}
