package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/doubletake/doubletake/internal/reportjson"
	"github.com/doubletake/doubletake/internal/reportjson/reportjsontest"
	"github.com/doubletake/doubletake/internal/streams"
)

var testEnd = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// every builds n samples every step ending one step before testEnd, with
// values from fn(i).
func every(n int, step time.Duration, fn func(i int) float64) []Sample {
	out := make([]Sample, n)
	first := testEnd.Add(-time.Duration(n) * step).UnixMilli()
	for i := range out {
		out[i] = Sample{T: first + int64(i)*step.Milliseconds(), V: fn(i)}
	}
	return out
}

func interleavedValues(i int) float64 {
	if i%2 == 0 {
		return float64(100 + i) // the first writer
	}
	return float64(i / 2) // the second writer, fresh state
}

func restartValues(i int) float64 {
	if i < 30 {
		return float64(1000 + 10*i)
	}
	return float64(10 * (i - 30))
}

func ls(name string, kv ...string) model.LabelSet {
	l := model.LabelSet{model.MetricNameLabel: model.LabelValue(name)}
	for i := 0; i+1 < len(kv); i += 2 {
		l[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
	}
	return l
}

func TestAuditPrometheusClassifies(t *testing.T) {
	f := &fakeProm{
		series: []fakeSeries{
			{ls("rollouts_total", "job", "restart"), every(60, 10*time.Second, restartValues)},
			{ls("rollouts_total", "job", "clean"), every(60, 10*time.Second, func(i int) float64 { return float64(i) })},
			{ls("rollouts_total", "job", "twice"), every(60, 10*time.Second, interleavedValues)},
			{ls("temperature", "job", "twice"), every(60, 10*time.Second, interleavedValues)},
			{ls("requests", "job", "twice"), every(60, 10*time.Second, interleavedValues)},
		},
		meta: map[string][]promv1.Metadata{
			"temperature": {{Type: promv1.MetricTypeGauge}},
			"requests":    {{Type: promv1.MetricTypeCounter}},
		},
	}
	var progress bytes.Buffer
	rep, err := AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Range: time.Hour, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Names != 3 || rep.CounterNames != 2 || rep.SkippedNames != 1 || rep.Series != 4 {
		t.Errorf("names %d counter names %d skipped %d series %d, want 3 2 1 4", rep.Names, rep.CounterNames, rep.SkippedNames, rep.Series)
	}
	if got := fmt.Sprint(rep.Classes); got != "map[clean:1 interleaved:2 restart:1]" {
		t.Errorf("classes %s", got)
	}
	var order []string
	for _, r := range rep.Affected {
		order = append(order, r.Series+" "+string(r.Class))
	}
	want := []string{
		`requests{job="twice"} interleaved`,
		`rollouts_total{job="twice"} interleaved`,
		`rollouts_total{job="restart"} restart`,
	}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Errorf("affected, worst first:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	twice := rep.Affected[1]
	var values []float64
	for i := range 60 {
		values = append(values, interleavedValues(i))
	}
	if want := streams.Resets(values); twice.Resets != want || want != 30 {
		t.Errorf("resets %d, want resets() = %d (30)", twice.Resets, want)
	}
	if twice.Chains != 2 || twice.DominantSamples != 30 || !(float64(twice.Factor) > 10) {
		t.Errorf("chains %d dominant samples %d factor %v", twice.Chains, twice.DominantSamples, float64(twice.Factor))
	}
	if len(rep.Charts) != 3 || rep.Charts[0].Series != `requests{job="twice"}` {
		t.Errorf("%d charts, first %q", len(rep.Charts), rep.Charts[0].Series)
	}
	if !strings.Contains(progress.String(), "doubletake audit: done: metric names 3/3, 4 series read, 3 with resets") {
		t.Errorf("progress: %q", progress.String())
	}
}

func TestAuditPrometheusPages(t *testing.T) {
	f := &fakeProm{}
	// 4 names of 250 series (read one series per query) and 6 of 20 (one
	// query per name).
	for n := range 10 {
		count := 20
		if n < 4 {
			count = 250
		}
		for i := range count {
			vals := func(j int) float64 { return float64(j) }
			if i == 7 {
				vals = interleavedValues
			}
			f.series = append(f.series, fakeSeries{
				ls(fmt.Sprintf("m%d_total", n), "instance", fmt.Sprintf("i%d", i), "quote", `a"b\c`),
				every(12, 5*time.Second, vals),
			})
		}
		// One series with a label the others lack: exact selectors must
		// not match it when reading the others.
		f.series = append(f.series, fakeSeries{ls(fmt.Sprintf("m%d_total", n), "instance", "i0", "quote", `a"b\c`, "extra", "x"), every(12, 5*time.Second, func(j int) float64 { return float64(j) })})
	}
	var progress bytes.Buffer
	rep, err := AuditPrometheus(context.Background(), f, PromOptions{
		End: testEnd, Range: time.Hour, Concurrency: 3, ChunkSeries: 100,
		Progress: &progress, ProgressEvery: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 4*251 + 6*21
	if rep.Series != total || rep.Classes[ClassInterleaved] != 10 || rep.Classes[ClassClean] != total-10 {
		t.Errorf("series %d classes %v, want %d with 10 interleaved", rep.Series, rep.Classes, total)
	}
	if got, want := f.queries.Load(), int64(4*251+6); got != want {
		t.Errorf("%d queries, want %d (one per series of the 4 large names, one per small name)", got, want)
	}
	for sel, n := range f.queried {
		if n != 1 {
			t.Errorf("%s queried %d times", sel, n)
		}
	}
	if m := f.maxFlight.Load(); m > 3 {
		t.Errorf("%d queries in flight at once, want at most 3", m)
	}
	if !strings.Contains(progress.String(), "doubletake audit: progress: metric names") {
		t.Errorf("no progress line: %q", progress.String())
	}
}

// manySeries is names metric names of n series each, every series read
// by a query of its own (n above ChunkSeries 100).
func manySeries(names, n int) []fakeSeries {
	var out []fakeSeries
	for m := range names {
		for i := range n {
			out = append(out, fakeSeries{ls(fmt.Sprintf("m%d_total", m), "instance", fmt.Sprintf("i%d", i)),
				every(12, 5*time.Second, func(j int) float64 { return float64(j) })})
		}
	}
	return out
}

// TestAuditPrometheusFatalErrorCancels: a fatal error (401) ends the audit
// with that error, and no query starts after it: at most the ones already
// in flight (Concurrency) were sent.
func TestAuditPrometheusFatalErrorCancels(t *testing.T) {
	f := &fakeProm{series: manySeries(4, 150)}
	unauthorized := &StatusError{Method: "POST", URL: "http://prom/api/v1/query", Code: 401}
	f.queryErr = func(string) error { return unauthorized }
	_, err := AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Range: time.Hour, Concurrency: 3})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 401 || !strings.Contains(err.Error(), "reading {") {
		t.Fatalf("err = %v, want the 401 of a query", err)
	}
	if n := f.queries.Load(); n < 1 || n > 3 {
		t.Errorf("%d queries sent, want 1 to 3 (those in flight when the first failed)", n)
	}
}

// TestAuditPrometheusSeriesErrorGoesOn: a query that fails without being
// fatal (a server error) is counted and reported; every other series is
// still read.
func TestAuditPrometheusSeriesErrorGoesOn(t *testing.T) {
	f := &fakeProm{series: manySeries(2, 150)}
	f.queryErr = func(sel string) error {
		if strings.Contains(sel, `"i7"`) || strings.Contains(sel, `"i8"`) {
			return &promv1.Error{Type: promv1.ErrServer, Msg: "query timed out"}
		}
		return nil
	}
	rep, err := AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Range: time.Hour, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 4 || rep.Series != 2*150-4 || f.queries.Load() != 2*150 {
		t.Errorf("failed %d, series %d, queries %d; want 4 failed, %d read, %d queries", rep.Failed, rep.Series, f.queries.Load(), 2*150-4, 2*150)
	}
	if len(rep.Problems) != 4 || !strings.Contains(rep.Problems[0], "query timed out") {
		t.Errorf("problems %q", rep.Problems)
	}
}

// TestAuditPrometheusCancelled: the caller's cancellation ends the audit
// with context.Canceled.
func TestAuditPrometheusCancelled(t *testing.T) {
	f := &fakeProm{series: manySeries(2, 150)}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	f.queryErr = func(string) error {
		once.Do(cancel)
		return nil
	}
	_, err := AuditPrometheus(ctx, f, PromOptions{End: testEnd, Range: time.Hour, Concurrency: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := f.queries.Load(); n > 2 {
		t.Errorf("%d queries sent after the cancellation, want at most the 2 in flight", n)
	}
}

func TestAuditPrometheusEmptyAndBad(t *testing.T) {
	f := &fakeProm{
		series: []fakeSeries{{ls("temperature"), every(5, time.Second, func(int) float64 { return 1 })}},
		meta:   map[string][]promv1.Metadata{"temperature": {{Type: promv1.MetricTypeGauge}}},
	}
	_, err := AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Matchers: []string{`{job="none"}`}})
	if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), `no series match {job="none"}`) {
		t.Errorf("nothing matched: %v", err)
	}
	_, err = AuditPrometheus(context.Background(), f, PromOptions{End: testEnd})
	if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "none of them counter-like") {
		t.Errorf("only gauges: %v", err)
	}
	_, err = AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Matchers: []string{`up[5m]`}})
	if !errors.Is(err, ErrBadQuery) {
		t.Errorf("range selector as --match: %v", err)
	}
	_, err = AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Matchers: []string{`{job=~"("}`}})
	if err == nil {
		t.Errorf("a regex the server refuses: no error")
	}
}

func TestCounterLike(t *testing.T) {
	meta := map[string][]promv1.Metadata{
		"http_requests":         {{Type: promv1.MetricTypeCounter}},
		"latency_seconds":       {{Type: promv1.MetricTypeHistogram}},
		"rpc_seconds":           {{Type: promv1.MetricTypeSummary}},
		"queue_length_total":    {{Type: promv1.MetricTypeGauge}},
		"mixed":                 {{Type: promv1.MetricTypeGauge}, {Type: promv1.MetricTypeCounter}},
		"process_cpu_seconds":   {{Type: promv1.MetricTypeUnknown}},
		"jobs_processed_total":  {{Type: promv1.MetricTypeCounter}},
		"temperature_celsius":   {{Type: promv1.MetricTypeGauge}},
		"build_info":            {{Type: promv1.MetricTypeInfo}},
		"size_bytes_bucket_sum": nil,
	}
	cases := map[string]bool{
		"http_requests_total":        true,  // counter metadata under the base name
		"http_requests":              true,  // its own counter metadata
		"latency_seconds_bucket":     true,  // histogram parts
		"latency_seconds_count":      true,  //
		"latency_seconds_total":      false, // not a histogram part
		"rpc_seconds_sum":            true,
		"queue_length_total":         false, // a gauge, whatever its name
		"mixed":                      true,
		"process_cpu_seconds_total":  false, // metadata says unknown
		"jobs_processed_total":       true,
		"temperature_celsius":        false,
		"no_metadata_total":          true, // suffixes without metadata
		"no_metadata_count":          true,
		"no_metadata":                false,
		"size_bytes_bucket_sum":      true, // empty metadata: suffix
		"otel_scope_info":            false,
		"build_info":                 false,
		"rollouts_total":             true,
		"rollout_duration_seconds_b": false,
	}
	for name, want := range cases {
		if got := counterLike(name, meta); got != want {
			t.Errorf("counterLike(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestExactSelector(t *testing.T) {
	series := []model.LabelSet{
		ls("x_total", "a", "1", "q", "say \"hi\"\n\\"),
		ls("x_total", "a", "1", "q", "say \"hi\"\n\\", "b", "2"),
	}
	names := unionLabelNames(series)
	sel := exactSelector(series[0], names)
	if sel != `{__name__="x_total",a="1",b="",q="say \"hi\"\n\\"}` {
		t.Errorf("selector %s", sel)
	}
	f := &fakeProm{}
	for _, s := range series {
		f.series = append(f.series, fakeSeries{s, []Sample{{T: 1, V: 1}}})
	}
	got, err := f.selectSeries(sel, 0, 2)
	if err != nil || len(got) != 1 || !got[0].labels.Equal(series[0]) {
		t.Errorf("selects %v (%v), want only the first series", got, err)
	}
}

func TestFloatJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := reportjson.Write(&buf, []Float{1.5, Float(math.NaN()), Float(math.Inf(1))}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(buf.String()), ""); got != "[1.5,null,null]" {
		t.Errorf("got %s", got)
	}
}

// TestPromReportJSONListsAreLists: a Prometheus audit's JSON report, as
// the reports are written, holds every list as an array on every path:
// series with resets, only clean series, and series that could not be
// read.
func TestPromReportJSONListsAreLists(t *testing.T) {
	clean := func(i int) float64 { return float64(i) }
	for name, f := range map[string]*fakeProm{
		"resets": {series: []fakeSeries{
			{ls("rollouts_total", "job", "twice"), every(60, 10*time.Second, interleavedValues)},
			{ls("rollouts_total", "job", "restart"), every(60, 10*time.Second, restartValues)},
		}},
		"clean": {series: []fakeSeries{{ls("rollouts_total", "job", "clean"), every(60, 10*time.Second, clean)}}},
		"unreadable series": {
			series:   manySeries(1, 3),
			queryErr: func(string) error { return &promv1.Error{Type: promv1.ErrServer, Msg: "query timed out"} },
		},
	} {
		rep, err := AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Range: time.Hour})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b bytes.Buffer
		if err := reportjson.Write(&b, rep); err != nil {
			t.Fatal(err)
		}
		problems, err := reportjsontest.ListProblems(reflect.TypeFor[PromReport](), b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", name, p)
		}
	}
}
