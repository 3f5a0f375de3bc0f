package audit

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/analyze"
)

// otlpLines is a file's worth of requests: a trace request sent twice (a
// re-sent batch), one with a span copied within it, a metric request, a log
// request twice, an empty request and a profiles request.
func otlpLines(t *testing.T) [][]byte {
	t.Helper()
	start := time.Unix(1_700_000_000, 0)
	tr1, err := (&ptrace.JSONMarshaler{}).MarshalTraces(testTrace("svc", 1, start, []string{"root", "child"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	tr2, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(testTrace("svc", 2, start, []string{"root"}, map[int]int{0: 2}))
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("x")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(1)
	dp.SetTimestamp(1)
	mb, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetStr("hello")
	lr.SetTimestamp(5)
	lb, _ := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	return [][]byte{tr1, tr1, tr2, mb, lb, lb, []byte(`{}`), []byte(`{"resourceProfiles":[]}`)}
}

func joinLines(lines [][]byte) []byte {
	return append(bytes.Join(lines, []byte("\n")), '\n')
}

func readAll(t *testing.T, data []byte) (Compression, []OTLPRequest, []*LineError) {
	t.Helper()
	var reqs []OTLPRequest
	var bad []*LineError
	c, err := ReadOTLP(bytes.NewReader(data), "f", func(r OTLPRequest) error {
		reqs = append(reqs, r)
		return nil
	}, func(le *LineError) { bad = append(bad, le) })
	if err != nil {
		t.Fatal(err)
	}
	return c, reqs, bad
}

func TestReadOTLPCompressions(t *testing.T) {
	lines := otlpLines(t)
	plain := joinLines(lines)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(plain)
	_ = zw.Close()

	enc, _ := zstd.NewWriter(nil)
	stream := enc.EncodeAll(plain, nil)

	// The file exporter's older framing: each request a zstd frame behind
	// its length.
	var framed []byte
	for _, l := range lines {
		frame := enc.EncodeAll(l, nil)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(frame)))
		framed = append(framed, frame...)
	}

	for _, c := range []struct {
		data []byte
		want Compression
	}{
		{plain, CompressionNone},
		{gz.Bytes(), CompressionGzip},
		{stream, CompressionZstd},
		{framed, CompressionZstdFramed},
	} {
		comp, reqs, bad := readAll(t, c.data)
		if comp != c.want || len(bad) != 0 {
			t.Errorf("%s: read as %s, %d bad lines", c.want, comp, len(bad))
		}
		var sigs []string
		for _, r := range reqs {
			sigs = append(sigs, string(r.Signal))
		}
		if got := strings.Join(sigs, ","); got != "spans,spans,spans,metrics,logs,logs" {
			t.Errorf("%s: signals %s", c.want, got)
		}
		if reqs[2].Line != 3 || reqs[2].Traces.SpanCount() != 2 {
			t.Errorf("%s: third request line %d with %d spans", c.want, reqs[2].Line, reqs[2].Traces.SpanCount())
		}
	}
}

func TestReadOTLPBadLines(t *testing.T) {
	lines := otlpLines(t)
	data := joinLines([][]byte{lines[0], []byte("not json"), []byte(`{"resourceSpans": 7}`), []byte(`[1,2]`), []byte(`{"hello":"world"}`), []byte("   "), lines[0]})
	data = append(data, lines[0]...) // no final newline
	_, reqs, bad := readAll(t, data)
	if len(reqs) != 3 || reqs[2].Line != 8 {
		t.Errorf("%d requests, last on line %d; want 3, line 8", len(reqs), reqs[len(reqs)-1].Line)
	}
	var lineNos []int
	for _, b := range bad {
		lineNos = append(lineNos, b.Line)
	}
	if len(bad) != 4 || lineNos[0] != 2 || lineNos[3] != 5 || !errors.Is(bad[3], errNotOTLP) {
		t.Errorf("bad lines %v: %v", lineNos, bad)
	}
}

func TestAuditOTLPFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "traces.jsonl")
	if err := os.WriteFile(p, joinLines(otlpLines(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := AuditOTLPFiles([]string{p, bad})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Analysis.Spans
	// Trace 1 twice (2 ids, 2 extra copies), trace 2's root copied in its
	// request (1 id, 1 extra).
	if s.Received != 6 || s.Duplicated != 3 || s.ExtraCopies != 3 {
		t.Errorf("spans received %d duplicated %d extra %d; want 6 3 3", s.Received, s.Duplicated, s.ExtraCopies)
	}
	if l := rep.Analysis.Logs; l.Duplicated != 1 {
		t.Errorf("logs duplicated %d, want 1", l.Duplicated)
	}
	if rep.Findings() == 0 || rep.Files[1].Malformed != 1 || rep.Analysis.Malformed != 1 || len(rep.Problems) != 1 {
		t.Errorf("findings %d, files %+v, problems %v", rep.Findings(), rep.Files, rep.Problems)
	}
	var text bytes.Buffer
	if err := WriteOTLPText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"traces.jsonl: 6 export requests read (OTLP-JSON lines, uncompressed)\n",
		"bad.jsonl: 0 export requests read (OTLP-JSON lines, uncompressed); 1 malformed line skipped: not OTLP-JSON\n",
		"spans: 6 received", "problem: " + bad + ":1:",
		"malformed: 1 line was skipped: not OTLP-JSON",
		// The facts a file has: requests, lines, how they were batched.
		"1 request repeated an earlier request item for item (e.g. " + p + " line 2 repeats " + p + " line 1 item for item): a re-sent batch, or two exporters that batched alike",
		"in 1 request that repeats no earlier request whole (e.g. " + p + " line 3 holds one twice): two exporters in one process",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	// Files record no connections and no arrival times.
	for _, not := range []string{"connection", "after the first", "DELAY", "export interval", "refused"} {
		if strings.Contains(text.String(), not) {
			t.Errorf("a file audit speaks of %q:\n%s", not, text.String())
		}
	}

	if _, err := AuditOTLPFiles([]string{bad}); !errors.Is(err, ErrNoData) {
		t.Errorf("only bad lines: %v", err)
	}
}

func TestRequestSignal(t *testing.T) {
	for in, want := range map[string]analyze.Signal{
		`{"resourceSpans":[]}`:                     analyze.SignalSpans,
		`{"resource_metrics":[]}`:                  analyze.SignalMetrics,
		`{"other":{"a":[1]},"resourceLogs":[]}`:    analyze.SignalLogs,
		`{}`:                                       "",
		`{"resourceProfiles":[],"dictionary":{}} `: "",
	} {
		if got, err := requestSignal([]byte(in)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{``, `[]`, `{"a":1}`, `{"a":`, `"x"`} {
		if _, err := requestSignal([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func FuzzRequestSignal(f *testing.F) {
	for _, s := range []string{`{"resourceSpans":[]}`, `{}`, `{"a":{"b":[1,2,{"c":null}]},"resourceLogs":1}`, `[`, `{"resourceProfiles":0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sig, err := requestSignal(b)
		if err != nil && sig != "" {
			t.Fatalf("signal %q with error %v", sig, err)
		}
		// Whatever the line, reading it as a file neither fails nor panics.
		_, rerr := ReadOTLP(bytes.NewReader(b), "fuzz", func(OTLPRequest) error { return nil }, func(*LineError) {})
		if rerr != nil && !strings.Contains(rerr.Error(), "fuzz") {
			t.Fatalf("error without the file name: %v", rerr)
		}
	})
}

// counterRequest is one export of a cumulative monotonic sum by a writer
// that started at start.
func counterRequest(t *testing.T, start, at time.Time, v float64) []byte {
	t.Helper()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "deployer")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("rollouts")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommonTime(start))
	dp.SetTimestamp(pcommonTime(at))
	dp.SetDoubleValue(v)
	b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAuditOTLPFilesClassesStreams(t *testing.T) {
	// Two readers of one counter, the second added 2.5 s later with fresh
	// state, exporting every second: 29 9 40 15 40 15 ... as the research
	// measured with the JS SDK.
	t0 := time.Unix(1_700_000_000, 0)
	late := t0.Add(2500 * time.Millisecond)
	var lines [][]byte
	for k := range 10 {
		at := t0.Add(time.Duration(3+k) * time.Second)
		lines = append(lines, counterRequest(t, t0, at, float64(29+11*k)))
		lines = append(lines, counterRequest(t, late, at.Add(200*time.Millisecond), float64(9+6*k)))
	}
	p := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.WriteFile(p, joinLines(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := AuditOTLPFiles([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Series) != 1 || len(rep.Charts) != 1 {
		t.Fatalf("%d series, %d charts; want 1 and 1", len(rep.Series), len(rep.Charts))
	}
	s := rep.Series[0]
	if s.Class != ClassInterleaved || s.Resets != 10 || s.Chains != 2 || s.Samples != 20 || s.Series != "rollouts{} of deployer" {
		t.Errorf("series %q class %s resets %d chains %d samples %d", s.Series, s.Class, s.Resets, s.Chains, s.Samples)
	}
	if want := rep.Analysis.Metrics.Resets; s.Resets != want {
		t.Errorf("resets %d, internal/analyze's Prometheus view %d", s.Resets, want)
	}
	var html bytes.Buffer
	if err := WriteOTLPHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), `<path class="chain" d="M`) {
		t.Errorf("no chart in the OTLP HTML report")
	}
}

func pcommonTime(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }
