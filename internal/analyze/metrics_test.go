package analyze

import (
	"reflect"
	"strings"
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
func lateWriter(a *Analyzer) {
	const secondStart = 2500 * time.Millisecond
	s := time.Second
	seq := uint64(0)
	add := func(p pt) {
		seq++
		a.AddMetrics(at(seq, p.at, "p"), counter("", p))
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

// secondWriter feeds a stream with a first writer counting 10 a second
// from t0 (a point every second to last) and a second writer started at
// secondStart whose points, half a second after the first writer's, carry
// value(t): interleaved in arrival order.
func secondWriter(a *Analyzer, instance string, secondStart, last time.Duration, value func(t time.Duration) int64) {
	seq := uint64(0)
	add := func(p pt) {
		seq++
		a.AddMetrics(at(seq, p.at, "p"), counter(instance, p))
	}
	for t := time.Second; t <= last; t += time.Second {
		add(pt{0, t, int64(10 * t / time.Second)})
		if b := t + time.Second/2; b > secondStart && b < last {
			add(pt{secondStart, b, value(b)})
		}
	}
}

// copyOf is a second reader that joined at join: the first writer's count
// less the count at the join.
func copyOf(join time.Duration) func(time.Duration) int64 {
	return func(t time.Duration) int64 { return int64(10*t/time.Second) - int64(10*join/time.Second) }
}

// peerOf is another process started at start, counting 5 a second.
func peerOf(start time.Duration) func(time.Duration) int64 {
	return func(t time.Duration) int64 { return int64(5 * (t - start) / time.Second) }
}

// TestMetricsLateSecondWriter: three points of a second writer do not
// decide between a copy and a peer: the stream is diagnosed a second
// writer, undecided, with the evidence so far, and nothing about
// service.instance.id.
func TestMetricsLateSecondWriter(t *testing.T) {
	a := New(Options{})
	lateWriter(a)
	r := a.Report()
	m := r.Metrics
	if m.Points != 9 || m.Streams != 1 || m.ExtraPoints != 3 || m.PeerPoints != 0 || m.MultiWriter != 1 || m.Overlapping != 1 || m.Resets != 3 {
		t.Fatalf("metric totals = %+v", m)
	}
	if !reflect.DeepEqual(m.Dropped, map[string]int{"overlap": 3}) || !reflect.DeepEqual(m.Classes, map[string]int{"undecided": 1}) {
		t.Errorf("Dropped = %v, Classes = %v", m.Dropped, m.Classes)
	}
	if len(m.List) != 1 {
		t.Fatalf("List = %+v", m.List)
	}
	s := m.List[0]
	s.ID = ""
	// The evidence line is internal/streams' (its tests pin it).
	evidence := s.Writers[1].Evidence
	if !strings.HasPrefix(evidence, "undecided: ") {
		t.Errorf("evidence %q, want undecided", evidence)
	}
	want := MetricStream{
		Name: "requests", Type: "sum/cumulative/monotonic", Unit: "1", Service: "svc", Scope: "meter", Attributes: "route=/",
		Points: 9, Overlap: true, Dropped: map[string]int{"overlap": 3},
		Prometheus: &PromSeries{Samples: 9, Rejected: 0, Resets: 3},
		Diagnosis:  DiagSecondWriter,
		Writers: []MetricWriter{
			{Start: uint64(t0.UnixNano()), StartTime: "2026-03-01T12:00:00Z", Points: 6, FirstTime: "2026-03-01T12:00:01Z", LastTime: "2026-03-01T12:00:06Z", FirstValue: 10, LastValue: 60, Elected: true},
			{Start: uint64(t0.Add(2500 * time.Millisecond).UnixNano()), StartTime: "2026-03-01T12:00:02.5Z", Points: 3, FirstTime: "2026-03-01T12:00:03.5Z", LastTime: "2026-03-01T12:00:05.5Z", FirstValue: 5, LastValue: 25,
				Class: "undecided", Evidence: evidence},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("stream:\n got %+v\nwant %+v", s, want)
	}
	wantF := []Finding{{
		Signal: SignalMetrics, Diagnosis: DiagSecondWriter, Subject: `service "svc"`, Items: 3,
		Line: `metrics of service "svc": 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (3 points the gateway drops; 3 resets Prometheus would count without dedup): a second writer, not yet told a copy or a peer: a second metric reader in one process, or processes that share one identity (` + evidence + `)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	if got, want := r.DuplicateRatio(), 3.0/9; got != want {
		t.Errorf("DuplicateRatio = %v, want %v", got, want)
	}
}

// TestMetricsWriterDiagnoses: the cause is the classifier's judgement of
// the values, whether or not the resource has a service.instance.id.
func TestMetricsWriterDiagnoses(t *testing.T) {
	const join = 2500 * time.Millisecond
	cases := []struct {
		name, instance string
		start          time.Duration
		value          func(time.Duration) int64
		diag           Diagnosis
		class          string
		line           string
		extra, peer    int
	}{{
		// A second reader joined later, on a resource without
		// service.instance.id (which used to be called an identity
		// collision): its values are the first writer's less 25.
		name: "copy", start: join, value: copyOf(join), diag: DiagTwoExporters, class: "copy", extra: 37,
		line: `metrics of service "svc": 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (37 points the gateway drops; 37 resets Prometheus would count without dedup): a second metric reader in one process (a metric reader or exporter added to the same instruments, e.g. a framework attaching its own; remove it) (EVIDENCE)`,
	}, {
		// Another process with the same identity, on a resource that
		// has a service.instance.id (which used to be called a second
		// pipeline in one process): its values climb at their own rate.
		name: "peer", instance: "pod-1", start: join, value: peerOf(join), diag: DiagIdentityCollision, class: "peer", extra: 3, peer: 34,
		line: `metrics of service "svc": 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (3 points the gateway drops, 34 points it keeps as a peer's own series; 37 resets Prometheus would count without dedup): two processes share one identity: give each a service.instance.id (EVIDENCE)`,
	}, {
		// Readers created together (start times a microsecond apart):
		// a copy with c = 0.
		name: "together", start: time.Microsecond, value: copyOf(0), diag: DiagTwoExporters, class: "copy", extra: 39,
		line: `metrics of service "svc": 1 stream (requests) have writers whose start times are 1µs apart and whose points interleave (39 points the gateway drops; 0 resets Prometheus would count without dedup): a second metric reader in one process (a metric reader or exporter added to the same instruments, e.g. a framework attaching its own; remove it) (EVIDENCE)`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(Options{})
			secondWriter(a, c.instance, c.start, 40*time.Second, c.value)
			r := a.Report()
			m := r.Metrics
			if len(m.List) != 1 || len(m.List[0].Writers) != 2 {
				t.Fatalf("streams = %+v", m.List)
			}
			// The evidence line is internal/streams' (its tests pin it).
			line := strings.Replace(c.line, "EVIDENCE", m.List[0].Writers[1].Evidence, 1)
			fs := r.Findings
			if len(fs) != 1 || fs[0].Diagnosis != c.diag || fs[0].Line != line {
				t.Fatalf("findings = %+v\nwant %s: %s", fs, c.diag, line)
			}
			t.Log(fs[0].Line)
			if m.ExtraPoints != c.extra || m.PeerPoints != c.peer || !reflect.DeepEqual(m.Classes, map[string]int{c.class: 1}) {
				t.Errorf("extra %d, peer points %d, classes %v; want %d, %d, %s", m.ExtraPoints, m.PeerPoints, m.Classes, c.extra, c.peer, c.class)
			}
			if w := m.List[0].Writers; len(w) != 2 || w[1].Class != c.class || !strings.HasPrefix(w[1].Evidence, c.class+":") {
				t.Errorf("writers = %+v, want the second judged %s", w, c.class)
			}
			if r.Clean() {
				t.Error("a stream with a second writer is not clean")
			}
		})
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
// in one process doubled, and whose counter has a second writer not yet
// told a copy or a peer, has one cause: the metric finding says so first.
// Once the values show a peer, the evidence names the cause.
func TestMetricsSameCauseAsDoubledSpans(t *testing.T) {
	doubledSpans := func(a *Analyzer, service string) {
		a.AddTraces(at(100, 0, "p1"), traces(service, span{1, 1, "op", 0}))
		a.AddTraces(at(101, 3*time.Millisecond, "p2"), traces(service, span{1, 1, "op", 0}))
	}
	a := New(Options{})
	doubledSpans(a, "svc")
	lateWriter(a)
	r := a.Report()
	if len(r.Findings) != 2 || r.Findings[0].Signal != SignalSpans || r.Findings[0].Diagnosis != DiagTwoExporters {
		t.Fatalf("findings = %+v, want the doubled spans first", r.Findings)
	}
	m := r.Findings[1]
	want := `metrics of service "svc": the same cause as its doubled spans, two exporters in one process (a second exporter or metric reader, e.g. the SDK set up twice; remove it): 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (3 points the gateway drops; 3 resets Prometheus would count without dedup); judged from the values, ` + r.Metrics.List[0].Writers[1].Evidence
	if m.Diagnosis != DiagTwoExporters || m.Line != want {
		t.Fatalf("metric finding = %+v\nwant line %s", m, want)
	}
	if d := r.Metrics.List[0].Diagnosis; d != DiagTwoExporters {
		t.Errorf("stream diagnosis %q, want two-exporters", d)
	}
	// Another service's doubled spans change nothing.
	b := New(Options{})
	doubledSpans(b, "other")
	lateWriter(b)
	for _, f := range b.Report().Findings {
		if f.Signal == SignalMetrics && f.Diagnosis != DiagSecondWriter {
			t.Errorf("metric finding of svc with doubled spans of other: %+v", f)
		}
	}
	// A copy has the same cause, and the line says the values agree.
	d := New(Options{})
	doubledSpans(d, "svc")
	secondWriter(d, "", 2500*time.Millisecond, 40*time.Second, copyOf(2500*time.Millisecond))
	for _, f := range d.Report().Findings {
		if f.Signal == SignalMetrics && (f.Diagnosis != DiagTwoExporters || !strings.Contains(f.Line, ": the same cause as its doubled spans,") || !strings.Contains(f.Line, "judged from the values, copy: ")) {
			t.Errorf("metric finding of a copy in a process with doubled spans: %+v", f)
		}
	}
	// A writer the values show to be a peer is a peer.
	c := New(Options{})
	doubledSpans(c, "svc")
	secondWriter(c, "", 2500*time.Millisecond, 40*time.Second, peerOf(2500*time.Millisecond))
	for _, f := range c.Report().Findings {
		if f.Signal == SignalMetrics && f.Diagnosis != DiagIdentityCollision {
			t.Errorf("metric finding of a peer: %+v", f)
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

// deltaCounter builds one request with one point (start, at] of the
// monotonic delta sum "requests".
func deltaCounter(p pt) pmetric.Metrics {
	md := counter("", p)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	return md
}

// TestMetricsDeltaWriters: verify judges delta writers (chains of
// intervals) as the gateway does: a second reader's chain, whose deltas
// are the first writer's over its own intervals, is a copy; another
// process's chain, counting twice as fast, a peer.
func TestMetricsDeltaWriters(t *testing.T) {
	for _, c := range []struct {
		name  string
		rate  int64 // the second chain's count a second
		class string
		diag  Diagnosis
	}{
		{"copy", 10, "copy", DiagTwoExporters},
		{"peer", 20, "peer", DiagIdentityCollision},
	} {
		want := map[string]WriterRules{"copy": {DeltaCopies: 1}, "peer": {DeltaPeers: 1}}[c.class]
		line := map[string]string{"copy": "writer rules: delta chains: 1 copy dropped, 0 peers kept as their own series, 0 undecided (held)\n",
			"peer": "writer rules: delta chains: 0 copies dropped, 1 peer kept as their own series, 0 undecided (held)\n"}[c.class]
		t.Run(c.name, func(t *testing.T) {
			a := New(Options{})
			s := time.Second
			seq := uint64(0)
			add := func(p pt) {
				seq++
				a.AddMetrics(at(seq, p.at, "p"), deltaCounter(p))
			}
			prev := 2500 * time.Millisecond // the second chain's start: it joined then
			for tm := s; tm <= 40*s; tm += s {
				add(pt{tm - s, tm, 10})
				if b := tm + s/2; b > prev && b < 40*s {
					add(pt{prev, b, c.rate * int64(b-prev) / int64(s)})
					prev = b
				}
			}
			r := a.Report()
			m := r.Metrics
			if !reflect.DeepEqual(m.Classes, map[string]int{c.class: 1}) {
				t.Fatalf("classes %v, want one %s; streams %+v", m.Classes, c.class, m.List)
			}
			if fs := r.Findings; len(fs) != 1 || fs[0].Diagnosis != c.diag || !strings.Contains(fs[0].Line, "("+c.class+":") {
				t.Fatalf("findings = %+v, want %s", fs, c.diag)
			}
			t.Log(r.Findings[0].Line)
			// verify and audit name the delta case in one line and in
			// their JSON, from the same judgements.
			if m.WriterRules == nil || *m.WriterRules != want {
				t.Errorf("writer rules %+v, want %+v", m.WriterRules, want)
			}
			var b strings.Builder
			if err := WriteText(&b, r); err != nil || !strings.Contains(b.String(), line) {
				t.Errorf("text report (%v) lacks %q:\n%s", err, line, b.String())
			}
		})
	}
}
