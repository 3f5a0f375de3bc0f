package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/capture"
)

// sink is a capturing OTLP endpoint standing for the user's backend.
type sink struct {
	srv *capture.Server

	mu      sync.Mutex
	spans   map[[24]byte]int // copies per (trace_id, span_id)
	total   int              // spans received, copies included
	logs    int
	metrics []metricExport
	largest int // most spans in one request
}

type metricExport struct {
	at time.Time
	md pmetric.Metrics
}

func newSink(t *testing.T) *sink {
	t.Helper()
	s := &sink{spans: map[[24]byte]int{}}
	srv, err := capture.Listen("127.0.0.1:0", s.handle)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *sink) handle(r *capture.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Signal {
	case capture.Traces:
		s.largest = max(s.largest, r.Traces.SpanCount())
		rss := r.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					var key [24]byte
					tid, sid := sp.TraceID(), sp.SpanID()
					copy(key[:16], tid[:])
					copy(key[16:], sid[:])
					s.spans[key]++
					s.total++
				}
			}
		}
	case capture.Logs:
		s.logs += r.Logs.LogRecordCount()
	case capture.Metrics:
		s.metrics = append(s.metrics, metricExport{at: r.Received, md: r.Metrics})
	}
	return nil
}

// counts returns the spans received (copies included) and the distinct
// span ids.
func (s *sink) counts() (total, unique int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, len(s.spans)
}

// copiesOver lists span ids received more than once.
func (s *sink) copiesOver() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, n := range s.spans {
		if n > 1 {
			out = append(out, fmt.Sprintf("%x/%x x%d", k[:16], k[16:], n))
		}
	}
	return out
}

// sumOf adds up, in the newest metrics export received after since, the
// values of every Sum data point of the named metric. ok is false when no
// export after since carries it.
func (s *sink) sumOf(name string, since time.Time) (sum float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.metrics) - 1; i >= 0; i-- {
		e := s.metrics[i]
		if !e.at.After(since) {
			break
		}
		found := false
		rms := e.md.ResourceMetrics()
		for a := 0; a < rms.Len(); a++ {
			sms := rms.At(a).ScopeMetrics()
			for b := 0; b < sms.Len(); b++ {
				ms := sms.At(b).Metrics()
				for c := 0; c < ms.Len(); c++ {
					m := ms.At(c)
					if m.Name() != name || m.Type() != pmetric.MetricTypeSum {
						continue
					}
					found = true
					dps := m.Sum().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						dp := dps.At(d)
						if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
							sum += float64(dp.IntValue())
						} else {
							sum += dp.DoubleValue()
						}
					}
				}
			}
		}
		if found {
			return sum, true
		}
	}
	return 0, false
}

// largestRequest is the most spans the sink took in one request.
func (s *sink) largestRequest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.largest
}
