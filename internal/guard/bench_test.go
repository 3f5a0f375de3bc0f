package guard_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/doubletake/doubletake/internal/guard"
)

// benchTraces is an export request of n spans as SDKs send them: one
// resource with five attributes, spans with eight attributes (strings and
// ints, one array) and one event each.
func benchTraces(n int) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	for i, k := range []string{"service.name", "service.version", "host.name", "telemetry.sdk.name", "telemetry.sdk.version"} {
		rs.Resource().Attributes().PutStr(k, fmt.Sprintf("value-%d", i))
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("io.opentelemetry.http")
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("GET /api/orders/{id}")
		sp.SetTraceID([16]byte{byte(i), byte(i >> 8), 3})
		sp.SetSpanID([8]byte{byte(i), byte(i >> 8), 5})
		sp.SetStartTimestamp(1e18)
		sp.SetEndTimestamp(1e18 + 12345)
		a := sp.Attributes()
		a.PutStr("http.request.method", "GET")
		a.PutStr("url.path", "/api/orders/12345")
		a.PutInt("http.response.status_code", 200)
		a.PutStr("server.address", "orders.internal")
		a.PutInt("server.port", 8080)
		a.PutStr("user_agent.original", "Mozilla/5.0 (X11; Linux x86_64)")
		a.PutStr("network.protocol.version", "1.1")
		s := a.PutEmptySlice("tags")
		s.AppendEmpty().SetStr("a")
		s.AppendEmpty().SetStr("b")
		ev := sp.Events().AppendEmpty()
		ev.SetName("cache.miss")
		ev.Attributes().PutStr("cache.key", "orders:12345")
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

// BenchmarkGuard: the guard's cost on a 1000-span request against pdata's
// own decoding of it, per request and per span.
//
//	go test -run '^$' -bench . -benchmem -count 6 ./internal/guard
func BenchmarkGuard(b *testing.B) {
	const spans = 1000
	req := benchTraces(spans)
	pb, err := req.MarshalProto()
	if err != nil {
		b.Fatal(err)
	}
	js, err := req.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	perSpan := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/spans, "ns/span")
	}
	b.Run("protobuf/guard", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			if err := guard.CheckProto(pb, guard.TracesRequest, guard.DefaultMaxDepth); err != nil {
				b.Fatal(err)
			}
		}
		perSpan(b)
	})
	b.Run("protobuf/guard-unknown-signal", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			if err := guard.CheckProto(pb, guard.Unknown, guard.DefaultMaxDepth); err != nil {
				b.Fatal(err)
			}
		}
		perSpan(b)
	})
	b.Run("protobuf/pdata-decode", func(b *testing.B) {
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			if err := ptraceotlp.NewExportRequest().UnmarshalProto(pb); err != nil {
				b.Fatal(err)
			}
		}
		perSpan(b)
	})
	b.Run("json/guard", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			if err := guard.CheckJSON(js, 2*guard.DefaultMaxDepth); err != nil {
				b.Fatal(err)
			}
		}
		perSpan(b)
	})
	b.Run("json/pdata-decode", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			if err := ptraceotlp.NewExportRequest().UnmarshalJSON(js); err != nil {
				b.Fatal(err)
			}
		}
		perSpan(b)
	})
	// The HTTP middleware: the body read as the receiver reads it
	// (io.ReadAll), with and without the guard walking it on the way.
	for _, guarded := range []bool{false, true} {
		name := "http-read/plain"
		h := http.Handler(noopHandler{})
		if guarded {
			name = "http-read/guarded"
			h = guard.HTTPHandler(h, guard.HTTPConfig{MaxInFlightBytes: 128 << 20})
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(pb)))
			for b.Loop() {
				r := newRequest("/v1/traces", "application/x-protobuf", io.NopCloser(bytes.NewReader(pb)))
				h.ServeHTTP(discard{}, r)
			}
			perSpan(b)
		})
	}
}
