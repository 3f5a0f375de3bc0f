package audit

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// synthProm serves names*perName counter series without holding them:
// label sets and samples are generated on demand, so a benchmark measures
// the audit's memory, not the fake's. Every 1000th series is written by two
// interleaved writers.
type synthProm struct {
	names, perName, samples int
	step                    time.Duration
	end                     time.Time
	queries                 atomic.Int64
}

func (s *synthProm) LabelValues(context.Context, string, []string, time.Time, time.Time, ...promv1.Option) (model.LabelValues, promv1.Warnings, promv1.Infos, error) {
	vals := make(model.LabelValues, s.names)
	for i := range vals {
		vals[i] = model.LabelValue(fmt.Sprintf("synth_%03d_total", i))
	}
	return vals, nil, nil, nil
}

func (s *synthProm) labels(name string, i int) model.LabelSet {
	return model.LabelSet{model.MetricNameLabel: model.LabelValue(name), "instance": model.LabelValue("host-" + strconv.Itoa(i)), "job": "synth"}
}

func nameOf(sel string) string {
	i := strings.Index(sel, `__name__="`)
	rest := sel[i+len(`__name__="`):]
	return rest[:strings.IndexByte(rest, '"')]
}

func (s *synthProm) Series(_ context.Context, matches []string, _, _ time.Time, _ ...promv1.Option) ([]model.LabelSet, promv1.Warnings, promv1.Infos, error) {
	name := nameOf(matches[0])
	out := make([]model.LabelSet, s.perName)
	for i := range out {
		out[i] = s.labels(name, i)
	}
	return out, nil, nil, nil
}

func (s *synthProm) stream(name string, i int) *model.SampleStream {
	st := &model.SampleStream{Metric: model.Metric(s.labels(name, i)), Values: make([]model.SamplePair, s.samples)}
	first := s.end.Add(-time.Duration(s.samples) * s.step)
	for k := range st.Values {
		v := float64(k)
		if i%1000 == 7 && k%2 == 1 {
			v = float64(k / 4)
		}
		st.Values[k] = model.SamplePair{Timestamp: model.TimeFromUnixNano(first.Add(time.Duration(k) * s.step).UnixNano()), Value: model.SampleValue(v)}
	}
	return st
}

func (s *synthProm) Query(_ context.Context, q string, _ time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error) {
	s.queries.Add(1)
	name := nameOf(q)
	if i := strings.Index(q, `instance="host-`); i >= 0 {
		rest := q[i+len(`instance="host-`):]
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, '"')])
		return model.Matrix{s.stream(name, n)}, nil, nil, nil
	}
	m := make(model.Matrix, s.perName)
	for i := range m {
		m[i] = s.stream(name, i)
	}
	return m, nil, nil, nil
}

func (s *synthProm) Metadata(context.Context, string, string) (map[string][]promv1.Metadata, error) {
	return nil, nil
}

// peakHeap samples the heap in use until stop is closed.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// BenchmarkAuditPrometheus100k audits 100,000 series of 240 samples (an
// hour at 15 s): 20 names of 5,000 series, read one series per query, and
// 1,000 names of 100 series, read one query per name.
func BenchmarkAuditPrometheus100k(b *testing.B) {
	for _, c := range []struct {
		name           string
		names, perName int
	}{
		{"per-series", 20, 5000},
		{"per-name", 1000, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				s := &synthProm{names: c.names, perName: c.perName, samples: 240, step: 15 * time.Second, end: testEnd}
				runtime.GC()
				stop := make(chan struct{})
				peak := peakHeap(stop)
				start := time.Now()
				rep, err := AuditPrometheus(context.Background(), s, PromOptions{End: testEnd, Range: time.Hour, ChunkSeries: 100})
				elapsed := time.Since(start)
				close(stop)
				if err != nil {
					b.Fatal(err)
				}
				interleaved := 0
				for i := range c.perName {
					if i%1000 == 7 {
						interleaved += c.names
					}
				}
				if rep.Series != 100_000 || rep.Classes[ClassInterleaved] != interleaved {
					b.Fatalf("series %d, classes %v", rep.Series, rep.Classes)
				}
				b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(s.queries.Load()), "queries")
				b.ReportMetric(float64(rep.Series)/elapsed.Seconds(), "series/s")
			}
		})
	}
}
