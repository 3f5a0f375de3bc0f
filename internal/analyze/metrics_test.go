package analyze

import (
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// pt is one cumulative point: start and time as offsets from t0.
type pt struct {
	start, at time.Duration
	v         int64
}

// counter builds one request with the points of the monotonic cumulative
// sum "requests" of service svc (with instance, if not "").
func counter(instance string, pts ...pt) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	if instance != "" {
		rm.Resource().Attributes().PutStr("service.instance.id", instance)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("meter")
	m := sm.Metrics().AppendEmpty()
	m.SetName("requests")
	m.SetUnit("1")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, p := range pts {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(p.start)))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(p.at)))
		dp.SetIntValue(p.v)
		dp.Attributes().PutStr("route", "/")
	}
	return md
}

// lateWriter feeds a stream whose second writer starts 2.5s after the
// first, each exporting every second, interleaved in arrival order.
func lateWriter(a *Analyzer, instance string, secondStart time.Duration) {
	s := time.Second
	seq := uint64(0)
	add := func(p pt) {
		seq++
		a.AddMetrics(at(seq, p.at, "p"), counter(instance, p))
	}
	add(pt{0, 1 * s, 10})
	add(pt{0, 2 * s, 20})
	add(pt{0, 3 * s, 30})
	add(pt{secondStart, 3*s + s/2, 5})
	add(pt{0, 4 * s, 40})
	add(pt{secondStart, 4*s + s/2, 15})
	add(pt{0, 5 * s, 50})
	add(pt{secondStart, 5*s + s/2, 25})
	add(pt{0, 6 * s, 60})
}

func TestMetricsLateSecondWriter(t *testing.T) {
	a := New(Options{})
	lateWriter(a, "", 2500*time.Millisecond)
	r := a.Report()
	m := r.Metrics
	if m.Points != 9 || m.Streams != 1 || m.ExtraPoints != 3 || m.MultiWriter != 1 || m.Overlapping != 1 || m.Resets != 3 {
		t.Fatalf("metric totals = %+v", m)
	}
	if !reflect.DeepEqual(m.Dropped, map[string]int{"overlap": 3}) {
		t.Errorf("Dropped = %v", m.Dropped)
	}
	if len(m.List) != 1 {
		t.Fatalf("List = %+v", m.List)
	}
	s := m.List[0]
	s.ID = ""
	want := MetricStream{
		Name: "requests", Type: "sum/cumulative/monotonic", Unit: "1", Service: "svc", Scope: "meter", Attributes: "route=/",
		Points: 9, Overlap: true, Dropped: map[string]int{"overlap": 3},
		Prometheus: &PromSeries{Samples: 9, Rejected: 0, Resets: 3},
		Diagnosis:  DiagIdentityCollision,
		Writers: []MetricWriter{
			{Start: uint64(t0.UnixNano()), StartTime: "2026-03-01T12:00:00Z", Points: 6, FirstTime: "2026-03-01T12:00:01Z", LastTime: "2026-03-01T12:00:06Z", FirstValue: 10, LastValue: 60, Elected: true},
			{Start: uint64(t0.Add(2500 * time.Millisecond).UnixNano()), StartTime: "2026-03-01T12:00:02.5Z", Points: 3, FirstTime: "2026-03-01T12:00:03.5Z", LastTime: "2026-03-01T12:00:05.5Z", FirstValue: 5, LastValue: 25},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("stream:\n got %+v\nwant %+v", s, want)
	}
	wantF := []Finding{{
		Signal: SignalMetrics, Diagnosis: DiagIdentityCollision, Subject: `service "svc"`, Items: 3,
		Line: `metrics of service "svc": 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (3 points from writers not elected, 3 resets Prometheus would count), on a resource without service.instance.id: an identity collision (independent writers share one resource; give each process a unique service.instance.id, or, in one process, remove the second metric pipeline that joined later)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	if got, want := r.DuplicateRatio(), 3.0/9; got != want {
		t.Errorf("DuplicateRatio = %v, want %v", got, want)
	}
}

func TestMetricsWriterDiagnoses(t *testing.T) {
	// With service.instance.id the resource names one process: a second
	// pipeline joined it later.
	a := New(Options{})
	lateWriter(a, "pod-1", 2500*time.Millisecond)
	fs := a.Report().Findings
	want := `metrics of service "svc": 1 stream (requests) have a second writer that started 2.5s after the first and whose points interleave with it (3 points from writers not elected, 3 resets Prometheus would count), on a resource that names one process (service.instance.id "pod-1"): two exporters in one process (a second metric pipeline joined later with fresh state)`
	if len(fs) != 1 || fs[0].Diagnosis != DiagTwoExporters || fs[0].Line != want {
		t.Fatalf("findings = %+v\nwant line %s", fs, want)
	}
	// Start times a microsecond apart: readers created together.
	b := New(Options{})
	lateWriter(b, "", time.Microsecond)
	fs = b.Report().Findings
	if len(fs) != 1 || fs[0].Diagnosis != DiagTwoExporters {
		t.Fatalf("findings = %+v, want two exporters", fs)
	}
}

func TestMetricsResentRequest(t *testing.T) {
	a := New(Options{})
	batch := func() pmetric.Metrics { return counter("", pt{0, time.Second, 1}, pt{0, 2 * time.Second, 2}) }
	a.AddMetrics(at(1, 2*time.Second, "p1"), batch())
	a.AddMetrics(at(2, 3*time.Second, "p1"), counter("", pt{0, 3 * time.Second, 3}))
	a.AddMetrics(at(3, 14*time.Second, "p1"), batch()) // a retry, 12s later
	r := a.Report()
	if r.Metrics.ExtraPoints != 2 || !reflect.DeepEqual(r.Metrics.Dropped, map[string]int{"out_of_order": 2}) {
		t.Fatalf("metrics = %+v", r.Metrics)
	}
	if r.Requests.WholeRepeats != 1 {
		t.Errorf("WholeRepeats = %d, want 1", r.Requests.WholeRepeats)
	}
	wantF := []Finding{{
		Signal: SignalMetrics, Diagnosis: DiagResentBatch, Subject: `service "svc"`, Items: 2,
		Line: `metrics of service "svc": 2 points of requests repeated or arrived out of order (0 exact repeats, 2 out of order), 11s after their writer's previous point: a re-sent batch (later than the 5s export interval)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	// The newest point again is an exact repeat.
	b := New(Options{})
	b.AddMetrics(at(1, 0, "p1"), counter("", pt{0, time.Second, 1}))
	b.AddMetrics(at(2, 10*time.Millisecond, "p2"), counter("", pt{0, time.Second, 1}))
	fs := b.Report().Findings
	if len(fs) != 1 || fs[0].Diagnosis != DiagTwoExporters || fs[0].Items != 1 {
		t.Fatalf("findings = %+v", fs)
	}
}

func TestMetricsRestartIsClean(t *testing.T) {
	a := New(Options{})
	s := time.Second
	for i, p := range []pt{{0, 1 * s, 10}, {0, 2 * s, 20}, {0, 3 * s, 30}, {5 * s, 6 * s, 1}, {5 * s, 7 * s, 2}} {
		a.AddMetrics(at(uint64(i+1), p.at, "p"), counter("", p))
	}
	r := a.Report()
	if !r.Clean() || len(r.Findings) != 0 {
		t.Fatalf("a restart is not a finding: %+v", r.Findings)
	}
	m := r.Metrics
	if m.MultiWriter != 1 || m.Overlapping != 0 || m.Resets != 1 || len(m.List) != 1 || m.List[0].Overlap {
		t.Fatalf("metrics = %+v", m)
	}
	if w := m.List[0].Writers; len(w) != 2 || w[0].Elected || !w[1].Elected {
		t.Fatalf("the restarted writer should be elected: %+v", w)
	}
}

// TestMetricsSameCauseAsDoubledSpans: a service whose spans two exporters
// in one process doubled, and whose counter has two overlapping writers
// on a resource without service.instance.id, has one cause: the metric
// finding says so first, not "an identity collision".
func TestMetricsSameCauseAsDoubledSpans(t *testing.T) {
	a := New(Options{})
	a.AddTraces(at(100, 0, "p1"), traces("svc", span{1, 1, "op", 0}))
	a.AddTraces(at(101, 3*time.Millisecond, "p2"), traces("svc", span{1, 1, "op", 0}))
	lateWriter(a, "", 2500*time.Millisecond)
	r := a.Report()
	if len(r.Findings) != 2 || r.Findings[0].Signal != SignalSpans || r.Findings[0].Diagnosis != DiagTwoExporters {
		t.Fatalf("findings = %+v, want the doubled spans first", r.Findings)
	}
	m := r.Findings[1]
	want := `metrics of service "svc": the same cause as its doubled spans, two exporters in one process (a second exporter or metric reader, e.g. the SDK set up twice; remove it): 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (3 points from writers not elected, 3 resets Prometheus would count)`
	if m.Diagnosis != DiagTwoExporters || m.Line != want {
		t.Fatalf("metric finding = %+v\nwant line %s", m, want)
	}
	if d := r.Metrics.List[0].Diagnosis; d != DiagTwoExporters {
		t.Errorf("stream diagnosis %q, want two-exporters", d)
	}
	// Another service's doubled spans change nothing.
	b := New(Options{})
	b.AddTraces(at(100, 0, "p1"), traces("other", span{1, 1, "op", 0}))
	b.AddTraces(at(101, 3*time.Millisecond, "p2"), traces("other", span{1, 1, "op", 0}))
	lateWriter(b, "", 2500*time.Millisecond)
	for _, f := range b.Report().Findings {
		if f.Signal == SignalMetrics && f.Diagnosis != DiagIdentityCollision {
			t.Errorf("metric finding of svc with doubled spans of other: %+v", f)
		}
	}
}

// TestMetricsResentRequestFromAFile: without arrival times the same
// re-sent batch is diagnosed by its batching and cites the lines.
func TestMetricsResentRequestFromAFile(t *testing.T) {
	a := New(Options{NoArrival: true})
	batch := func() pmetric.Metrics { return counter("", pt{0, time.Second, 1}, pt{0, 2 * time.Second, 2}) }
	a.AddMetrics(Arrival{Seq: 1, File: "m.jsonl", Line: 1}, batch())
	a.AddMetrics(Arrival{Seq: 2, File: "m.jsonl", Line: 2}, counter("", pt{0, 3 * time.Second, 3}))
	a.AddMetrics(Arrival{Seq: 3, File: "m.jsonl", Line: 3}, batch())
	r := a.Report()
	want := `metrics of service "svc": 2 points of requests repeated or out of order (0 exact repeats, 2 out of order) in requests that repeat an earlier request item for item (e.g. m.jsonl line 3 repeats m.jsonl line 1 item for item): a re-sent batch, or two exporters that batched alike (the source records no arrival times to tell them apart)`
	if len(r.Findings) != 1 || r.Findings[0].Diagnosis != DiagResentBatch || r.Findings[0].Line != want {
		t.Fatalf("findings = %+v\nwant line %s", r.Findings, want)
	}
}
