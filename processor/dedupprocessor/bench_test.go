package dedupprocessor

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
)

const benchBatch = 1000

// benchTraces is a request of benchBatch spans over 10 resources, shaped
// like SDK output: a name, timing, a status and a few attributes each.
func benchTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range 10 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc-"+string(rune('a'+r)))
		rs.Resource().Attributes().PutStr("host.name", "host-1")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for range benchBatch / 10 {
			s := spans.AppendEmpty()
			s.SetName("GET /api/v1/rollouts/{id}")
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(1_700_000_000_000_000_000)
			s.SetEndTimestamp(1_700_000_000_250_000_000)
			s.Attributes().PutStr("http.route", "/api/v1/rollouts/{id}")
			s.Attributes().PutInt("http.response.status_code", 200)
			s.Attributes().PutStr("url.scheme", "https")
		}
	}
	return td
}

// setIDs gives every span of td a fresh random id, except that the first
// dupEvery-th fraction repeats the ids of prev (a span exported twice).
func setIDs(td ptrace.Traces, r *rand.Rand, prev [][24]byte, dupShare float64) [][24]byte {
	ids := prev[:0:0]
	n := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			var k [24]byte
			if len(prev) > 0 && float64(n) < dupShare*benchBatch {
				k = prev[len(prev)-1-n]
			} else {
				binary.LittleEndian.PutUint64(k[0:], r.Uint64())
				binary.LittleEndian.PutUint64(k[8:], r.Uint64())
				binary.LittleEndian.PutUint64(k[16:], r.Uint64())
			}
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			copy(tid[:], k[:16])
			copy(sid[:], k[16:])
			spans.At(j).SetTraceID(tid)
			spans.At(j).SetSpanID(sid)
			ids = append(ids, k)
			n++
		}
	}
	return ids
}

// BenchmarkTracesProcessor is the span path in steady state: the window is
// full (max_spans 2M, every new span evicts one), batches of 1000 spans, with
// none or half of each batch repeating the previous batch's spans; without
// the nested-duplicate detector (the default) and with it. The cached cases
// are the floor the full window is compared with: a window of 16,384 spans,
// whose index and ring stay in the CPU's cache.
func BenchmarkTracesProcessor(b *testing.B) {
	for _, bc := range []struct {
		name     string
		share    float64
		nested   bool
		maxSpans int // 0: the default, 2M
	}{
		{"dup=0%", 0, false, 0}, {"dup=50%", 0.5, false, 0}, {"dup=0%/nested=on", 0, true, 0}, {"dup=50%/nested=on", 0.5, true, 0},
		{"cached/dup=0%", 0, false, 1 << 14}, {"cached/dup=0%/nested=on", 0, true, 1 << 14}, {"cached/dup=50%", 0.5, false, 1 << 14},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := createDefaultConfig()
			cfg.Traces.Nested.Detect = bc.nested
			if bc.maxSpans > 0 {
				cfg.Traces.MaxSpans = bc.maxSpans
			}
			p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Shutdown(context.Background()) }()
			r := rand.New(rand.NewPCG(1, 2))
			tmpl := benchTraces()
			td := ptrace.NewTraces()
			var prev [][24]byte
			// Fill the window so every new span evicts one.
			for range cfg.Traces.MaxSpans/benchBatch + 1 {
				tmpl.CopyTo(td)
				prev = setIDs(td, r, nil, 0)
				_ = p.ConsumeTraces(context.Background(), td)
			}
			w := p.(*tracesProcessor).st.traces
			// The CPU time of this goroutine's thread in ConsumeTraces,
			// beside the wall time: on a machine shared with other work it
			// leaves out the time the thread waited for a core.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu int64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				tmpl.CopyTo(td)
				prev = setIDs(td, r, prev, bc.share)
				b.StartTimer()
				c0 := threadCPU()
				if err := p.ConsumeTraces(context.Background(), td); err != nil {
					b.Fatal(err)
				}
				cpu += threadCPU() - c0
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/span")
			if cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N*benchBatch), "cpu-ns/span")
			}
			b.ReportMetric(float64(w.set.Bytes())/float64(w.set.Capacity()), "bytes/tracked-span")
		})
	}
}

// BenchmarkDecodeFloor is a floor to compare with: pdata's OTLP protobuf
// decode of the same 1000-span request, per span.
func BenchmarkDecodeFloor(b *testing.B) {
	td := benchTraces()
	setIDs(td, rand.New(rand.NewPCG(1, 2)), nil, 0)
	buf, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	u := &ptrace.ProtoUnmarshaler{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := u.UnmarshalTraces(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/span")
}
