package analyze

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const benchBatch = 512 // spans per request, the Go SDK's default max export batch

// benchTraces builds requests holding unique spans in all: 10 services, 20
// span names each, three attributes per span.
func benchTraces(unique int) []ptrace.Traces {
	var out []ptrace.Traces
	n := 0
	for n < unique {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		svc := len(out) % 10
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", svc))
		rs.Resource().Attributes().PutStr("telemetry.sdk.language", "go")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("bench")
		spans := ss.Spans()
		spans.EnsureCapacity(benchBatch)
		for i := 0; i < benchBatch && n < unique; i++ {
			sp := spans.AppendEmpty()
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			for k := range 8 {
				tid[k] = byte(n >> (8 * k))
				sid[k] = byte((n * 7919) >> (8 * k))
			}
			tid[15] = 1
			sp.SetTraceID(tid)
			sp.SetSpanID(sid)
			sp.SetName(fmt.Sprintf("op-%d", n%20))
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(n)*1000))
			sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(n)*1000 + 500))
			sp.Attributes().PutStr("http.route", "/api/v1/items")
			sp.Attributes().PutInt("http.status_code", 200)
			sp.Attributes().PutInt("rollout.id", int64(n))
			n++
		}
		out = append(out, td)
	}
	return out
}

// benchMetrics builds requests of one point per stream each: streams
// streams, the first second of them with a second writer that starts later.
func benchMetrics(points, streams, second int) []pmetric.Metrics {
	var out []pmetric.Metrics
	n := 0
	for round := 0; n < points; round++ {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "bench")
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("bench")
		m := sm.Metrics().AppendEmpty()
		m.SetName("requests")
		m.SetUnit("1")
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		t := int64(1_700_000_000_000_000_000) + int64(round+1)*int64(time.Second)
		for s := 0; s < streams && n < points; s++ {
			dp := sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000))
			dp.SetTimestamp(pcommon.Timestamp(t))
			dp.SetIntValue(int64(round * 10))
			dp.Attributes().PutInt("shard", int64(s))
			n++
			if s < second && round > 2 && n < points {
				dp := sum.DataPoints().AppendEmpty()
				dp.SetStartTimestamp(pcommon.Timestamp(1_700_000_002_500_000_000))
				dp.SetTimestamp(pcommon.Timestamp(t + int64(time.Millisecond)))
				dp.SetIntValue(int64((round - 2) * 10))
				dp.Attributes().PutInt("shard", int64(s))
				n++
			}
		}
		out = append(out, md)
	}
	return out
}

// measure runs analyze b.N times and reports its retained heap and the
// bytes it allocated, in MB.
func measure(b *testing.B, analyze func() *Analyzer) {
	b.Helper()
	var before, after runtime.MemStats
	var retained, allocated float64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		a := analyze()
		b.StopTimer()
		runtime.ReadMemStats(&after)
		allocated += float64(after.TotalAlloc - before.TotalAlloc)
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(a)
		b.StartTimer()
	}
	b.ReportMetric(retained/float64(b.N)/1e6, "retained-MB")
	b.ReportMetric(allocated/float64(b.N)/1e6, "alloc-MB")
}

// BenchmarkAnalyzeSpans: 1M captured spans, in requests of 512. "unique"
// has 1M distinct spans; "twice" has 500k spans each exported twice, as two
// BatchSpanProcessors send them.
func BenchmarkAnalyzeSpans(b *testing.B) {
	for _, tc := range []struct {
		name   string
		unique int
		copies int
	}{{"unique", 1_000_000, 1}, {"twice", 500_000, 2}} {
		reqs := benchTraces(tc.unique)
		b.Run(tc.name, func(b *testing.B) {
			measure(b, func() *Analyzer {
				a := New(Options{})
				t0 := time.Unix(1_700_000_000, 0)
				seq := uint64(0)
				for i, td := range reqs {
					for c := range tc.copies {
						seq++
						a.AddTraces(Arrival{Seq: seq, Received: t0.Add(time.Duration(i)*time.Millisecond + time.Duration(c)*100*time.Microsecond), Peer: fmt.Sprint("p", c)}, td)
					}
				}
				if r := a.Report(); r.Spans.Received != 1_000_000 {
					b.Fatalf("received %d", r.Spans.Received)
				}
				return a
			})
		})
	}
}

// BenchmarkAnalyzeMetrics: 100k captured points, one request per export
// round. "1k-streams": 1000 streams of 100 points, 100 of them with a
// second writer that starts later; "100k-streams": 100k streams of one
// point each (the per-stream cost).
func BenchmarkAnalyzeMetrics(b *testing.B) {
	for _, tc := range []struct {
		name            string
		streams, second int
		wantOverlapping int
	}{{"1k-streams", 1000, 100, 100}, {"100k-streams", 100_000, 0, 0}} {
		reqs := benchMetrics(100_000, tc.streams, tc.second)
		b.Run(tc.name, func(b *testing.B) {
			measure(b, func() *Analyzer {
				a := New(Options{})
				t0 := time.Unix(1_700_000_000, 0)
				for i, md := range reqs {
					a.AddMetrics(Arrival{Seq: uint64(i + 1), Received: t0.Add(time.Duration(i) * time.Second), Peer: "p"}, md)
				}
				if r := a.Report(); r.Metrics.Points != 100_000 || r.Metrics.Overlapping != tc.wantOverlapping {
					b.Fatalf("points %d, overlapping %d", r.Metrics.Points, r.Metrics.Overlapping)
				}
				return a
			})
		})
	}
}

// BenchmarkAnalyzeAll: the 1M spans (500k twice) and the 100k points in
// one analysis, as verify would see them.
func BenchmarkAnalyzeAll(b *testing.B) {
	spans := benchTraces(500_000)
	mets := benchMetrics(100_000, 1000, 100)
	measure(b, func() *Analyzer {
		a := New(Options{})
		t0 := time.Unix(1_700_000_000, 0)
		seq := uint64(0)
		for i, td := range spans {
			for c := range 2 {
				seq++
				a.AddTraces(Arrival{Seq: seq, Received: t0.Add(time.Duration(i) * time.Millisecond), Peer: fmt.Sprint("p", c)}, td)
			}
		}
		for i, md := range mets {
			seq++
			a.AddMetrics(Arrival{Seq: seq, Received: t0.Add(time.Duration(i) * time.Second), Peer: "m"}, md)
		}
		a.Report()
		return a
	})
}
