package nested

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// benchBatch is 100 requests of 4 spans: client, two server spans (one
// doubled request in two), a handler child.
func benchBatch(trace0 int) ptrace.Traces {
	var spans []s
	route := map[string]any{"http.route": "/r/{id}", "http.request.method": "POST"}
	for i := 0; i < 100; i++ {
		tr := byte(trace0 + i)
		spans = append(spans,
			s{svc: "api", scope: otelhttpScope, trace: tr, id: 1, name: "POST", kind: client, start: 0, end: 20},
			s{svc: "api", scope: otelhttpScope, trace: tr, id: 2, parent: 1, name: "POST /r/{id}", kind: server, start: 1, end: 19, attrs: route},
			s{svc: "api", scope: otelhttpScope, trace: tr, id: 4, parent: 3, name: "load", kind: internal, start: 2, end: 18},
		)
		if i%2 == 0 {
			spans = append(spans, s{svc: "api", scope: otelhttpScope, trace: tr, id: 3, parent: 1, name: "POST /r/{id}", kind: server, start: 1.01, end: 18.99, attrs: route})
		}
	}
	td := build(spans...)
	// Distinct trace ids across batches.
	for _, sp := range td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().All() {
		id := sp.TraceID()
		id[1], id[2] = byte(trace0>>8), byte(trace0>>16)
		sp.SetTraceID(id)
	}
	return td
}

func BenchmarkDetectorAdd(b *testing.B) {
	batches := make([]ptrace.Traces, 64)
	for i := range batches {
		batches[i] = benchBatch(i * 256)
	}
	d := NewDetector(Options{MaxSpans: 10_000})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.Add(batches[i%len(batches)])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batches[0].SpanCount()), "ns/span")
}

func BenchmarkCollapse(b *testing.B) {
	src := benchBatch(0)
	st := NewState(0, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		td := ptrace.NewTraces()
		src.CopyTo(td)
		b.StartTimer()
		Collapse(td, Options{}, st)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*src.SpanCount()), "ns/span")
}

// TestDetectorMemory measures the bytes held per span at MaxSpans.
func TestDetectorMemory(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	const max = 20_000
	d := NewDetector(Options{MaxSpans: max})
	batches := make([]ptrace.Traces, 0, 100)
	for i := 0; i < 100; i++ {
		batches = append(batches, benchBatch(i*256))
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for _, td := range batches {
		d.Add(td)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := float64(m1.HeapAlloc-m0.HeapAlloc) / max
	t.Logf("%.0f bytes per held span (%d held)", per, d.Stats().Held)
	if per > 600 {
		t.Fatalf("%.0f bytes per held span", per)
	}
	runtime.KeepAlive(batches)
}

// BenchmarkDetectorAddFlat is the processor's shape: batches of 1000 spans
// over 10 resources with random ids and no parents, the detector full at
// the processor's default of 20,000 spans, so that every span is looked
// up, held and evicts one.
func BenchmarkDetectorAddFlat(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	batches := make([]ptrace.Traces, 64)
	for i := range batches {
		td := ptrace.NewTraces()
		for range 10 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", "svc")
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for range 100 {
				sp := spans.AppendEmpty()
				sp.SetName("GET /api/v1/rollouts/{id}")
				sp.SetKind(ptrace.SpanKindServer)
				sp.Attributes().PutStr("http.route", "/api/v1/rollouts/{id}")
				sp.Attributes().PutInt("http.response.status_code", 200)
				var t pcommon.TraceID
				var s pcommon.SpanID
				binary.LittleEndian.PutUint64(t[:], r.Uint64())
				binary.LittleEndian.PutUint64(t[8:], r.Uint64())
				binary.LittleEndian.PutUint64(s[:], r.Uint64())
				sp.SetTraceID(t)
				sp.SetSpanID(s)
			}
		}
		batches[i] = td
	}
	d := NewDetector(Options{MaxSpans: 20_000, MaxBytes: 16 << 20})
	for _, td := range batches {
		d.Add(td)
	}
	// The CPU time of this goroutine's thread too: on a machine shared with
	// other work it leaves out the time the thread waited for a core.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := threadCPU()
	for i := range b.N {
		d.Add(batches[i%len(batches)])
	}
	cpu := threadCPU() - c0
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/span")
	if cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N*1000), "cpu-ns/span")
	}
}
