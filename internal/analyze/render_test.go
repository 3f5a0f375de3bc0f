package analyze

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteText(t *testing.T) {
	a := New(Options{})
	lateWriter(a)
	batch := func() []span { return []span{{1, 1, "rollout", 0}, {1, 2, "verify", 0}} }
	a.AddTraces(at(20, 7*time.Second, "p1"), traces("svc", batch()...))
	a.AddTraces(at(21, 7*time.Second+3*time.Millisecond, "p2"), traces("svc", batch()...))
	a.AddLogs(at(22, 8*time.Second, "p1"), logs("svc", "hello"))
	var b bytes.Buffer
	r := a.Report()
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	// The evidence line is internal/streams' (its tests pin it).
	evidence := r.Metrics.List[0].Writers[1].Evidence
	want := `spans: 4 received, 2 unique, 2 duplicated ids, 2 extra copies
  SERVICE  SPAN     RECEIVED  UNIQUE  DUPLICATED  EXTRA  IDS×COPIES  DELAY min / median / max
  svc      rollout  2         1       1           1      1×2         3ms / 3ms / 3ms
  svc      verify   2         1       1           1      1×2         3ms / 3ms / 3ms
  e.g. svc "rollout" trace 01010000000000000000000000000000 span 0102000000000000: 2 copies, later ones 3ms after the first
  e.g. svc "verify" trace 01010000000000000000000000000000 span 0202000000000000: 2 copies, later ones 3ms after the first

nested duplicates (one operation recorded as two spans, one inside the other): none in 4 spans

metrics: 9 points in 1 stream; 1 with more than one writer, 1 overlapping; 3 extra points (overlap 3); counter resets Prometheus would count: 3
  stream requests{route=/} (sum/cumulative/monotonic, unit 1) of service "svc", scope meter: 2 writers overlap
    writer start 2026-03-01T12:00:00Z: 6 points, values 10 → 60 (elected)
    writer start 2026-03-01T12:00:02.5Z (+2.5s): 3 points, values 5 → 25
      EVIDENCE
    the gateway would drop: overlap 3
    Prometheus: 9 samples stored in arrival order, 0 refused (timestamp not after the previous), resets() = 3

logs: 1 received, 1 unique, 0 duplicated records, 0 extra copies
  SERVICE  SCOPE  RECEIVED  UNIQUE  DUPLICATED  EXTRA  RECORDS×COPIES  DELAY min / median / max
  svc      app    1         1       0           0      -               -

findings:
  - spans of service "svc": 2 extra copies of spans rollout, verify, identical, 3ms after the first, on 2 connections: two exporters in one process (identical copies from one resource within the 5s export interval)
  - metrics of service "svc": the same cause as its doubled spans, two exporters in one process (a second exporter or metric reader, e.g. the SDK set up twice; remove it): 1 stream (requests) have writers whose start times are 2.5s apart and whose points interleave (3 points the gateway drops; 3 resets Prometheus would count without dedup); judged from the values, EVIDENCE
`
	want = strings.ReplaceAll(want, "EVIDENCE", evidence)
	if got := b.String(); got != want {
		t.Fatalf("text report:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteJUnit(t *testing.T) {
	a := New(Options{})
	a.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}))
	a.AddTraces(at(2, time.Millisecond, "p2"), traces("svc", span{1, 1, "a", 0}))
	r := a.Report()
	r.Malformed = 2
	var b bytes.Buffer
	if err := WriteJUnit(&b, "doubletake verify", 1500*time.Millisecond, JUnitCases(r, 0, false)); err != nil {
		t.Fatal(err)
	}
	want := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="doubletake verify" tests="5" failures="2">
  <testsuite name="doubletake verify" tests="5" failures="2" errors="0" time="1.500">
    <testcase name="spans arrive once" classname="doubletake.verify.spans" time="0">
      <failure message="1 of 2 spans are extra copies" type="doubletake">spans of service &#34;svc&#34;: 1 extra copy of spans a, identical, 1ms after the first, on 2 connections: two exporters in one process (identical copies from one resource within the 5s export interval)&#xA;</failure>
    </testcase>
    <testcase name="operations are recorded once (no nested duplicates)" classname="doubletake.verify.nested" time="0"></testcase>
    <testcase name="metric streams have one writer" classname="doubletake.verify.metrics" time="0"></testcase>
    <testcase name="log records arrive once" classname="doubletake.verify.logs" time="0"></testcase>
    <testcase name="export requests decode" classname="doubletake.verify.otlp" time="0">
      <failure message="2 export requests could not be decoded" type="doubletake"></failure>
    </testcase>
  </testsuite>
</testsuites>
`
	if got := b.String(); got != want {
		t.Fatalf("JUnit:\n%s\nwant:\n%s", got, want)
	}
	// A ratio allowance passes the same spans.
	for _, c := range JUnitCases(r, 0.5, false) {
		if c.Failure != "" && !strings.Contains(c.Name, "decode") {
			t.Errorf("case %q failed under --max-duplicate-ratio 0.5: %s", c.Name, c.Failure)
		}
	}
}
