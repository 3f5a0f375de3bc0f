package dedupprocessor

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
)

const (
	benchMetricBatch   = 1000   // points per request
	benchMetricStreams = 10_000 // streams in all: 10 requests' worth
)

// benchMetricsRequest is request k of the 10 that together hold every
// stream once: 10 resources (services) x 1 scope x 10 counters x 10
// attribute sets, shaped like SDK output.
func benchMetricsRequest(k int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for r := range 10 {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		ra.PutStr("service.name", fmt.Sprintf("svc-%d-%d", k, r))
		ra.PutStr("telemetry.sdk.language", "python")
		ra.PutStr("host.name", "host-1")
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("opentelemetry.instrumentation.fastapi")
		sm.Scope().SetVersion("0.50b0")
		for c := range 10 {
			m := sm.Metrics().AppendEmpty()
			m.SetName(fmt.Sprintf("app.requests.%d", c))
			m.SetUnit("{request}")
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			for a := range 10 {
				dp := sum.DataPoints().AppendEmpty()
				dp.Attributes().PutStr("http.request.method", "GET")
				dp.Attributes().PutInt("http.response.status_code", int64(200+a))
				dp.Attributes().PutStr("http.route", "/api/v1/rollouts/{id}")
			}
		}
	}
	return md
}

// stamp sets every point's start, time and value: one export of one writer.
func stamp(md pmetric.Metrics, start, ts uint64, v int64) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			dps := ms.At(j).Sum().DataPoints()
			for k := 0; k < dps.Len(); k++ {
				dp := dps.At(k)
				dp.SetStartTimestamp(pcommon.Timestamp(start))
				dp.SetTimestamp(pcommon.Timestamp(ts))
				dp.SetIntValue(v)
			}
		}
	}
}

// BenchmarkMetrics is the metric path in steady state: 10k cumulative
// streams, requests of 1000 points, each stream exported every round by one
// writer, or by two (starts 100 s and 105 s: the second writer's requests
// are dropped whole). ns/point and allocs/point cover everything the
// processor does per request: identity, election, RemoveIf, telemetry.
//
// With the default overlap, auto, the second writer's values are the
// first's (a copy: dropped) or, in writers=2/peers, twice them (a peer:
// labelled and forwarded); writers=2/keep_one is the election alone. In
// writers=2/undecided both writers' values stay put: the second is never
// decided, and every point of it is dropped and held
// (writers=2/undecided/no_hold: metrics.max_held_bytes 0).
func BenchmarkMetrics(b *testing.B) {
	for _, bc := range []struct {
		writers int
		suffix  string
		overlap OverlapPolicy
		peers   bool
		idle    bool
		noHold  bool
	}{
		{writers: 1, overlap: OverlapAuto},
		{writers: 2, overlap: OverlapAuto},
		{writers: 2, suffix: "/peers", overlap: OverlapAuto, peers: true},
		{writers: 2, suffix: "/undecided", overlap: OverlapAuto, idle: true},
		{writers: 2, suffix: "/undecided/no_hold", overlap: OverlapAuto, idle: true, noHold: true},
		{writers: 2, suffix: "/keep_one", overlap: OverlapKeepOne},
	} {
		writers := bc.writers
		b.Run(fmt.Sprintf("streams=10k/writers=%d%s", writers, bc.suffix), func(b *testing.B) {
			cfg := createDefaultConfig()
			cfg.Metrics.Overlap = bc.overlap
			if bc.noHold {
				cfg.Metrics.MaxHeldBytes = 0
			}
			p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Shutdown(context.Background()) }()
			tmpl := make([]pmetric.Metrics, benchMetricStreams/benchMetricBatch)
			for k := range tmpl {
				tmpl[k] = benchMetricsRequest(k)
			}
			md := pmetric.NewMetrics()
			// Request i: template i%10 of writer (i/10)%writers in round
			// i/(10*writers).
			next := func(i int) {
				k := i % len(tmpl)
				w := (i / len(tmpl)) % writers
				round := uint64(i / (len(tmpl) * writers))
				tmpl[k].CopyTo(md)
				v := int64(round)
				switch {
				case bc.peers:
					v *= int64(w + 1)
				case bc.idle:
					v = 1
				}
				stamp(md, (100+5*uint64(w))*1e9, (110+10*round+uint64(w))*1e9, v)
			}
			warm := 2 * len(tmpl) * writers
			for i := range warm {
				next(i)
				if err := p.ConsumeMetrics(context.Background(), md); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				next(warm + i)
				b.StartTimer()
				if err := p.ConsumeMetrics(context.Background(), md); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchMetricBatch), "ns/point")
			if n := p.(*metricsProcessor).st.metrics.tracker.Len(); n != benchMetricStreams {
				b.Fatalf("%d streams tracked, want %d", n, benchMetricStreams)
			}
		})
	}
}

// BenchmarkMetricsDecodeFloor is a floor to compare with, measured in the
// same run: pdata's OTLP protobuf decode of one 1000-point request of
// BenchmarkMetrics, per point. Every request a collector receives pays it.
func BenchmarkMetricsDecodeFloor(b *testing.B) {
	md := benchMetricsRequest(0)
	stamp(md, 100e9, 110e9, 1)
	buf, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		b.Fatal(err)
	}
	u := &pmetric.ProtoUnmarshaler{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := u.UnmarshalMetrics(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchMetricBatch), "ns/point")
}
