package analyze

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzAnalyze feeds whatever decodes as an OTLP request, twice, and checks
// that the analysis neither panics nor loses count, and that every renderer
// copes with what it produces.
func FuzzAnalyze(f *testing.F) {
	seed := func(b []byte, err error) {
		if err == nil {
			f.Add(b)
		}
	}
	tm := &ptrace.ProtoMarshaler{}
	seed(tm.MarshalTraces(traces("svc", span{1, 1, "a", 0}, span{0, 2, "b", 0})))
	mm := &pmetric.ProtoMarshaler{}
	seed(mm.MarshalMetrics(counter("i", pt{0, time.Second, 3}, pt{time.Second, 2 * time.Second, 1})))
	lm := &plog.ProtoMarshaler{}
	seed(lm.MarshalLogs(logs("svc", "x", "")))
	nan := counter("", pt{0, time.Second, 1})
	nan.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).SetDoubleValue(math.NaN())
	seed(mm.MarshalMetrics(nan))
	f.Add([]byte{0x0a, 0x00})

	f.Fuzz(func(t *testing.T, b []byte) {
		// With arrival times (verify) and without (files, backends).
		for _, noArrival := range []bool{false, true} {
			fuzzOnce(t, b, noArrival)
		}
	})
}

func fuzzOnce(t *testing.T, b []byte, noArrival bool) {
	{
		a := New(Options{MaxExamples: 2, MaxStreams: 8, NoArrival: noArrival})
		fed := 0
		if td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b); err == nil {
			a.AddTraces(at(1, 0, "p"), td)
			a.AddTraces(at(2, time.Millisecond, "q"), td)
			fed += 2 * td.SpanCount()
		}
		if md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b); err == nil {
			a.AddMetrics(at(3, 0, "p"), md)
			a.AddMetrics(at(4, 10*time.Second, "p"), md)
		}
		if ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b); err == nil {
			a.AddLogs(at(5, 0, "p"), ld)
			a.AddLogs(at(6, 0, "p"), ld)
		}
		r := a.Report()
		if r.Spans.Received != fed || r.Spans.Unique+r.Spans.ExtraCopies != r.Spans.Received {
			t.Fatalf("spans: received %d (fed %d), unique %d + extra %d", r.Spans.Received, fed, r.Spans.Unique, r.Spans.ExtraCopies)
		}
		if r.Logs.Unique+r.Logs.ExtraCopies != r.Logs.Received {
			t.Fatalf("logs: unique %d + extra %d != received %d", r.Logs.Unique, r.Logs.ExtraCopies, r.Logs.Received)
		}
		if ratio := r.DuplicateRatio(); ratio < 0 || ratio > 1 {
			t.Fatalf("ratio %v", ratio)
		}
		var buf bytes.Buffer
		if err := WriteText(&buf, r); err != nil {
			t.Fatal(err)
		}
		if err := WriteJUnit(&buf, "x", 0, JUnitCases(r, 0, false)); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		if noArrival && (r.Requests.Connections != 0 || strings.Contains(text, "connection") || strings.Contains(text, "later ones") || strings.Contains(text, "export interval")) {
			t.Fatalf("a report without arrival times speaks of connections or delays:\n%s", text)
		}
	}
}
