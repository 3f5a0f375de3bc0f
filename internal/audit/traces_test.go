package audit

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// testTrace builds one trace of service: spans named by names, each span
// id repeated copies[i] times (default 1), starting at start.
func testTrace(service string, traceNo byte, start time.Time, names []string, copies map[int]int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("test")
	for i, name := range names {
		n := copies[i]
		if n == 0 {
			n = 1
		}
		for range n {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{traceNo, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
			sp.SetSpanID(pcommon.SpanID{traceNo, byte(i + 1), 0, 0, 0, 0, 0, 1})
			sp.SetName(name)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		}
	}
	return td
}

// fakeSource holds traces with start times and answers Find by window.
type fakeSource struct {
	traces []struct {
		start time.Time
		td    ptrace.Traces
	}
	calls int
}

func (f *fakeSource) Find(_ context.Context, q TraceQuery) (ptrace.Traces, int, error) {
	f.calls++
	out := ptrace.NewTraces()
	n := 0
	for _, tr := range f.traces {
		if tr.start.Before(q.Start) || tr.start.After(q.End) || n == q.Limit {
			continue
		}
		n++
		cp := ptrace.NewTraces()
		tr.td.CopyTo(cp)
		cp.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	return out, n, nil
}

func (*fakeSource) Services(context.Context) ([]string, error) { return []string{"svc"}, nil }
func (*fakeSource) Name() string                               { return "fake" }
func (*fakeSource) Read() string                               { return "fake" }
func (*fakeSource) Resolution() time.Duration                  { return time.Second }

func TestAuditTracesPagesWindows(t *testing.T) {
	end := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeSource{}
	for i := range 9 {
		start := end.Add(-time.Duration(i+1) * 5 * time.Minute)
		copies := map[int]int{}
		if i%3 == 0 {
			copies[1] = 2 // the child span stored twice
		}
		f.traces = append(f.traces, struct {
			start time.Time
			td    ptrace.Traces
		}{start, testTrace("svc", byte(i+1), start, []string{"root", "child"}, copies)})
	}
	rep, err := AuditTraces(context.Background(), f, TraceOptions{Service: "svc", End: end, Lookback: time.Hour, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Traces != 9 || rep.Spans.Received != 21 || rep.Spans.Duplicated != 3 || rep.Spans.ExtraCopies != 3 || len(rep.Truncated) != 0 {
		t.Errorf("traces %d received %d duplicated %d extra %d truncated %v; want 9 21 3 3 none",
			rep.Traces, rep.Spans.Received, rep.Spans.Duplicated, rep.Spans.ExtraCopies, rep.Truncated)
	}
	if rep.Requests != f.calls || rep.Requests < 5 {
		t.Errorf("%d requests (%d calls), want the window split into several", rep.Requests, f.calls)
	}
	if g := rep.Spans.Groups[0]; g.Service != "svc" || g.Name != "child" || g.Duplicated != 3 {
		t.Errorf("first group %+v, want svc/child with 3 duplicated ids", g)
	}

	// Three traces in one second with a limit of 2: the window cannot be
	// split below a second; what was read is reported, and the window is
	// named as truncated.
	f2 := &fakeSource{}
	for i := range 3 {
		f2.traces = append(f2.traces, struct {
			start time.Time
			td    ptrace.Traces
		}{end.Add(-time.Minute), testTrace("svc", byte(i+1), end.Add(-time.Minute), []string{"root"}, nil)})
	}
	rep, err = AuditTraces(context.Background(), f2, TraceOptions{Service: "svc", End: end, Lookback: time.Hour, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Truncated) != 1 || rep.Traces != 2 {
		t.Errorf("truncated %v, traces %d; want one truncated window and 2 traces", rep.Truncated, rep.Traces)
	}

	_, err = AuditTraces(context.Background(), f, TraceOptions{Service: "other", End: end})
	if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), `fake knows no service "other" (it knows "svc")`) {
		t.Errorf("unknown service: %v", err)
	}
	_, err = AuditTraces(context.Background(), f, TraceOptions{Service: "svc", End: end.Add(-10 * time.Hour), Lookback: time.Hour})
	if !errors.Is(err, ErrNoData) {
		t.Errorf("no traces in the window: %v", err)
	}
}

func TestDropSeen(t *testing.T) {
	start := time.Unix(1000, 0)
	seen := map[pcommon.TraceID]struct{}{}
	td := testTrace("svc", 1, start, []string{"a", "b"}, nil)
	if n := dropSeen(td, seen); n != 1 || td.SpanCount() != 2 {
		t.Fatalf("first: %d new, %d spans", n, td.SpanCount())
	}
	again := testTrace("svc", 1, start, []string{"a", "b"}, nil)
	other := testTrace("svc", 2, start, []string{"a"}, nil)
	other.ResourceSpans().MoveAndAppendTo(again.ResourceSpans())
	if n := dropSeen(again, seen); n != 1 || again.SpanCount() != 1 || again.ResourceSpans().Len() != 1 {
		t.Errorf("second: %d new, %d spans in %d resources; want 1, 1, 1", n, again.SpanCount(), again.ResourceSpans().Len())
	}
}

func TestJaegerDecode(t *testing.T) {
	cases := []struct {
		body, err string
	}{
		{`{"result":{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"x"}]}]}]}}`, ""},
		{`not json`, "malformed response"},
		{`{"error":{"httpCode":500,"message":"storage down"}}`, "500 storage down"},
		{`{}`, "no result"},
		{`{"result":{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}}`, "malformed response"},
	}
	for _, c := range cases {
		td, err := decodeJaegerTraces([]byte(c.body))
		if c.err == "" {
			if err != nil || td.SpanCount() != 1 {
				t.Errorf("%s: %v, %d spans", c.body, err, td.SpanCount())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.body, err, c.err)
		}
	}
}

func TestJaegerClient(t *testing.T) {
	var gotQuery atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/base/api/v3/services":
			fmt.Fprint(w, `{"services":["svc"]}`)
		case "/base/api/v3/traces":
			gotQuery.Store(r.URL.RawQuery)
			if r.URL.Query().Get("query.service_name") == "empty" {
				http.Error(w, `{"error":{"httpCode":404,"message":"No traces found"}}`, http.StatusNotFound)
				return
			}
			td := testTrace("svc", 1, time.Unix(1000, 0), []string{"a", "b"}, map[int]int{0: 2})
			b, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
			fmt.Fprintf(w, `{"result":%s}`, b)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	j := NewJaeger(srv.URL+"/base/", srv.Client())
	svcs, err := j.Services(context.Background())
	if err != nil || len(svcs) != 1 || svcs[0] != "svc" {
		t.Fatalf("services %v %v", svcs, err)
	}
	q := TraceQuery{Service: "svc", Start: time.Unix(100, 5), End: time.Unix(200, 0), Limit: 7}
	td, n, err := j.Find(context.Background(), q)
	if err != nil || n != 1 || td.SpanCount() != 3 {
		t.Fatalf("find: %d traces, %d spans, %v", n, td.SpanCount(), err)
	}
	want := "query.num_traces=7&query.raw_traces=true&query.service_name=svc&query.start_time_max=1970-01-01T00%3A03%3A20Z&query.start_time_min=1970-01-01T00%3A01%3A40.000000005Z"
	if got := gotQuery.Load(); got != want {
		t.Errorf("query\n%s\nwant\n%s", got, want)
	}
	q.Service = "empty"
	if _, n, err := j.Find(context.Background(), q); err != nil || n != 0 {
		t.Errorf("no traces: %d, %v", n, err)
	}
	if _, _, err := NewJaeger(srv.URL, srv.Client()).Find(context.Background(), q); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a URL without api/v3: %v", err)
	}
}

// tempoFixture serves the parts of Tempo's HTTP API that audit uses, in the
// shapes Tempo's API documentation gives (docs/sources/tempo/api_docs):
// search results with traceID, rootServiceName, startTimeUnixNano and
// durationMs; trace by id as OTLP protobuf when asked for
// application/protobuf, otherwise JSON with the resource spans under
// "batches" and ids in base64 (gogo JSON), as older releases answer.
// It is not Tempo: audit's Tempo client is untested against a real Tempo.
type tempoFixture struct {
	traces   map[string]ptrace.Traces // by hex trace id
	starts   map[string]time.Time
	json     bool // ignore Accept and answer JSON
	searches atomic.Int64
}

func (f *tempoFixture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/api/search/tag/service.name/values":
		fmt.Fprint(w, `{"tagValues":["checkout"],"metrics":{"inspectedBytes":"431380"}}`)
	case r.URL.Path == "/api/search":
		f.searches.Add(1)
		q := r.URL.Query()
		if q.Get("q") != `{resource.service.name="checkout"}` {
			http.Error(w, "unexpected query "+q.Get("q"), http.StatusBadRequest)
			return
		}
		start, _ := strconv.ParseInt(q.Get("start"), 10, 64)
		end, _ := strconv.ParseInt(q.Get("end"), 10, 64)
		limit, _ := strconv.Atoi(q.Get("limit"))
		var ids []string
		for id, st := range f.starts {
			if st.Unix() >= start && st.Unix() <= end {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		if len(ids) > limit {
			ids = ids[:limit]
		}
		type meta struct {
			TraceID           string `json:"traceID"`
			RootServiceName   string `json:"rootServiceName"`
			RootTraceName     string `json:"rootTraceName"`
			StartTimeUnixNano string `json:"startTimeUnixNano"`
			DurationMs        int    `json:"durationMs"`
		}
		resp := struct {
			Traces  []meta         `json:"traces"`
			Metrics map[string]any `json:"metrics"`
		}{Traces: []meta{}, Metrics: map[string]any{"inspectedTraces": 3100, "inspectedBytes": "3811736"}}
		for _, id := range ids {
			// Tempo drops leading zeros from trace ids in search results.
			resp.Traces = append(resp.Traces, meta{TraceID: strings.TrimLeft(id, "0"), RootServiceName: "checkout",
				RootTraceName: "GET /cart", StartTimeUnixNano: strconv.FormatInt(f.starts[id].UnixNano(), 10), DurationMs: 611})
		}
		_ = json.NewEncoder(w).Encode(resp)
	case strings.HasPrefix(r.URL.Path, "/api/traces/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/traces/")
		id = strings.Repeat("0", 32-len(id)) + id
		td, ok := f.traces[id]
		if !ok {
			http.Error(w, "trace not found", http.StatusNotFound)
			return
		}
		if !f.json && r.Header.Get("Accept") == "application/protobuf" {
			b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
			w.Header().Set("Content-Type", "application/protobuf")
			_, _ = w.Write(b)
			return
		}
		b, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		base64IDs(doc)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"batches": doc["resourceSpans"]})
	default:
		http.NotFound(w, r)
	}
}

// base64IDs rewrites hex ids as gogo's JSON writes bytes: base64.
func base64IDs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if _, ok := idLengths[k]; ok {
				if s, ok := e.(string); ok && s != "" {
					b, _ := hex.DecodeString(s)
					x[k] = base64.StdEncoding.EncodeToString(b)
				}
				continue
			}
			base64IDs(e)
		}
	case []any:
		for _, e := range x {
			base64IDs(e)
		}
	}
}

func TestTempoClientAgainstFixture(t *testing.T) {
	end := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, asJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "protobuf", true: "json"}[asJSON], func(t *testing.T) {
			f := &tempoFixture{traces: map[string]ptrace.Traces{}, starts: map[string]time.Time{}, json: asJSON}
			for i := range 5 {
				start := end.Add(-time.Duration(i+1) * 7 * time.Minute)
				copies := map[int]int{}
				if i < 2 {
					copies[0] = 2
				}
				td := testTrace("checkout", byte(i), start, []string{"GET /cart", "db"}, copies)
				id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
				f.traces[hex.EncodeToString(id[:])] = td
				f.starts[hex.EncodeToString(id[:])] = start
			}
			srv := httptest.NewServer(f)
			defer srv.Close()
			rep, err := AuditTraces(context.Background(), NewTempo(srv.URL, srv.Client()), TraceOptions{
				Service: "checkout", End: end, Lookback: time.Hour, Limit: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Traces != 5 || rep.Spans.Received != 12 || rep.Spans.Duplicated != 2 || rep.Spans.ExtraCopies != 2 {
				t.Errorf("traces %d received %d duplicated %d extra %d; want 5 12 2 2", rep.Traces, rep.Spans.Received, rep.Spans.Duplicated, rep.Spans.ExtraCopies)
			}
			if f.searches.Load() < 3 {
				t.Errorf("%d searches: the window was not paged", f.searches.Load())
			}
			if !strings.Contains(rep.Read, "untested against a real Tempo") {
				t.Errorf("read: %s", rep.Read)
			}
		})
	}
}

func TestTempoMalformed(t *testing.T) {
	for _, c := range []struct{ body, err string }{
		{`<html>`, "malformed response"},
		{`{"status":"ok"}`, `no "traces"`},
		{`{"traces":[{"rootServiceName":"x"}]}`, "without traceID"},
	} {
		if _, err := decodeTempoSearch([]byte(c.body)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("search %s: %v, want %q", c.body, err, c.err)
		}
	}
	if ids, err := decodeTempoSearch([]byte(`{"traces":[],"metrics":{}}`)); err != nil || len(ids) != 0 {
		t.Errorf("empty search: %v %v", ids, err)
	}
	for _, c := range []struct{ body, err string }{
		{`{"batches":[{"scopeSpans":[{"spans":[{"traceId":"short","spanId":"AQIDBAUGBwg="}]}]}]}`, "traceId"},
		{`{"something":[]}`, `neither "batches" nor "resourceSpans"`},
		{`[1,2]`, "malformed"},
		{`{"batches":[{"scopeSpans":[{"spans":[{"traceId":7}]}]}]}`, "not a string"},
	} {
		if _, err := decodeTempoJSON([]byte(c.body)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("trace %s: %v, want %q", c.body, err, c.err)
		}
	}
	// v2's {"trace": ...} with hex ids.
	td, err := decodeTempoJSON([]byte(`{"trace":{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090A0B0C0D0E0F10","spanId":"0102030405060708","name":"x"}]}]}]},"status":"COMPLETE"}`))
	if err != nil || td.SpanCount() != 1 {
		t.Errorf("v2 shape: %v", err)
	}
	if _, err := decodeTempoTrace([]byte{0xff, 0xff}, "application/protobuf"); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad protobuf: %v", err)
	}
}

func FuzzDecodeTempoJSON(f *testing.F) {
	f.Add([]byte(`{"batches":[{"scopeSpans":[{"spans":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA==","spanId":"AQIDBAUGBwg="}]}]}]}`))
	f.Add([]byte(`{"trace":{"resourceSpans":[]}}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"traceId":""}]}]}]}]}`))
	f.Fuzz(func(_ *testing.T, b []byte) {
		td, err := decodeTempoJSON(b)
		if err == nil {
			_ = td.SpanCount()
		}
	})
}
