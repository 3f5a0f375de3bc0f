package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/doubletake/doubletake/internal/capture"
)

// startDefaultEnv is startDefault with more environment for the gateway.
func startDefaultEnv(t *testing.T, env []string, extra ...string) *defaultGateway {
	t.Helper()
	d := &defaultGateway{grpc: freePort(t), http: freePort(t), metrics: freePort(t), tel: freePort(t), health: freePort(t), status: freePort(t), dataDir: t.TempDir()}
	d.args = append([]string{
		"--grpc-endpoint", d.grpc, "--http-endpoint", d.http, "--metrics-endpoint", d.metrics,
		"--telemetry-endpoint", d.tel, "--health-endpoint", d.health, "--data-dir", d.dataDir,
		"--summary-interval", "100ms", "--status-endpoint", d.status,
	}, extra...)
	d.env = env
	d.g = startGateway(t, d.health, d.env, d.args...)
	return d
}

// postProto posts a protobuf body and returns the status code.
func postProto(t *testing.T, url string, body []byte) int {
	t.Helper()
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func tracesProto(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oneSpan is one request of one span of service svc named name.
func oneSpan(svc, name string, id byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", svc)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1, 2, 3, id})
	sp.SetSpanID(pcommon.SpanID{4, 5, id})
	sp.SetName(name)
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_000_001_000_000)
	return td
}

// scrape GETs url and returns the status and the body; the client waits
// up to a minute (scrape speed is measured in BenchmarkScrapeAtBound, not
// here).
func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// answersNormally: after hostile input the gateway is alive, healthy,
// takes an ordinary request and serves its own metrics.
func answersNormally(t *testing.T, d *defaultGateway) {
	t.Helper()
	select {
	case <-d.g.done:
		t.Fatalf("gateway exited: %v", d.g.err)
	default:
	}
	if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, oneSpan("normal", "GET /ok", 99))); code != http.StatusOK {
		t.Fatalf("an ordinary request after the hostile input: %d", code)
	}
	get(t, "http://"+d.health+"/")
	if code, body := scrape(t, "http://"+d.tel+"/metrics"); code != http.StatusOK {
		t.Fatalf("own metrics endpoint: %d %s", code, body)
	}
}

// TestLongSpanNamesHeapBounded: 150 spans with distinct 1 MB names, each
// waiting for a parent that never comes, sent to the embedded default
// (nested detection on). The nested detector used to keep every name: the
// heap grew by 150 MB and stayed there. Now it stays within
// traces.nested.max_bytes (16 MiB) plus the detector's fixed part, read
// from the gateway's own heap metric with GOGC=10 (so that the heap
// follows live memory closely) while ordinary requests keep the
// collector allocating.
func TestLongSpanNamesHeapBounded(t *testing.T) {
	const (
		requests = 10
		perReq   = 15
		nameLen  = 1 << 20
		// max_bytes 16 MiB, the detector's fixed part (4 MB records, at
		// most 5 MB of findings, counts and interned strings), and 10% of the heap for GOGC=10.
		growthBound = 48 << 20
	)
	d := startDefaultEnv(t, []string{"GOGC=10"})
	heap := func() float64 {
		code, body := scrape(t, "http://"+d.tel+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("own metrics: %d", code)
		}
		v, ok := promValue(body, "otelcol_process_runtime_heap_alloc_bytes ")
		if !ok {
			t.Fatal("no otelcol_process_runtime_heap_alloc_bytes")
		}
		return v
	}
	// Warm up: the detector allocates its records on the first span.
	for i := range 5 {
		if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, oneSpan("warm", "GET /warm", byte(i)))); code != http.StatusOK {
			t.Fatalf("warm-up request: %d", code)
		}
	}
	var base float64
	waitFor(t, 30*time.Second, "a heap reading after the warm-up", func() bool { base = heap(); return base > 0 })

	name := bytes.Repeat([]byte("n"), nameLen)
	began := time.Now()
	for r := range requests {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "hostile")
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range perReq {
			n := r*perReq + i
			copy(name, fmt.Sprintf("%08d", n)) // distinct: equal names would share one string
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{9, byte(n >> 8), byte(n)})
			sp.SetSpanID(pcommon.SpanID{9, byte(n >> 8), byte(n)})
			sp.SetParentSpanID(pcommon.SpanID{7, 7, 7}) // never arrives: the span is held
			sp.SetName(string(name))
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetStartTimestamp(1_700_000_000_000_000_000)
			sp.SetEndTimestamp(1_700_000_000_001_000_000)
		}
		if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, td)); code != http.StatusOK {
			t.Fatalf("request %d: %d", r, code)
		}
	}
	t.Logf("hostile requests sent in %s", time.Since(began))
	// Ordinary traffic (1000 spans a request) until the heap is back within
	// the bound of its warm-up reading: the garbage of 150 MB of requests
	// goes at the next collections, which this traffic brings about; a
	// detector that keeps the names never gets there.
	ordinary := ptrace.NewTraces()
	oss := ordinary.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ordinary.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "normal")
	for i := range 1000 {
		sp := oss.Spans().AppendEmpty()
		sp.SetName("GET /ok")
		sp.SetSpanID(pcommon.SpanID{5, byte(i >> 8), byte(i)})
	}
	var last float64
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; ; n++ {
		for i, sp := range oss.Spans().All() {
			sp.SetTraceID(pcommon.TraceID{5, byte(n >> 16), byte(n >> 8), byte(n), byte(i >> 8), byte(i)})
		}
		if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, ordinary)); code != http.StatusOK {
			t.Fatalf("ordinary request: %d", code)
		}
		if last = heap(); last-base <= growthBound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heap %.0f MB after %d spans with 1 MB names, %.0f MB above its warm-up reading (%.0f MB): want at most %d MB above",
				last/1e6, requests*perReq, (last-base)/1e6, base/1e6, growthBound>>20)
		}
	}
	t.Logf("heap: %.0f MB at warm-up, %.0f MB after the hostile spans", base/1e6, last/1e6)
	answersNormally(t, d)
}

// invalidUTF8Traces: a service.name, a span name and an attribute with
// invalid UTF-8 and a terminal escape.
func invalidUTF8Traces() ptrace.Traces {
	td := oneSpan("shop\xff\xfe\x1b[2J", "GET /caf\xc3", 1)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("user", "bad\xc0\xafvalue")
	return td
}

// TestInvalidUTF8 (embedded default, local files): invalid UTF-8 in span
// strings, over OTLP/HTTP protobuf and JSON. The gateway's own metrics
// endpoint used to answer 500 from then on (the service.name became a
// label) and traces.jsonl held the raw bytes; now the endpoint answers
// 200 and every line of traces.jsonl is valid UTF-8 and valid JSON.
func TestInvalidUTF8(t *testing.T) {
	d := startDefault(t)
	if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, invalidUTF8Traces())); code != http.StatusOK {
		t.Fatalf("protobuf request: %d", code)
	}
	jsonBody := "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"json\xff\"}}]}," +
		"\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\",\"name\":\"caf\xe9\",\"startTimeUnixNano\":\"1700000000000000000\",\"endTimeUnixNano\":\"1700000000001000000\"}]}]}]}"
	if code, body := post(t, "http://"+d.http+"/v1/traces", "application/json", jsonBody); code != http.StatusOK {
		t.Fatalf("JSON request: %d %s", code, body)
	}
	// The own metrics endpoint counts both services and answers 200.
	waitFor(t, 30*time.Second, "the dedup counters of both services on the own metrics endpoint", func() bool {
		code, body := scrape(t, "http://"+d.tel+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("own metrics endpoint after invalid UTF-8: %d %s", code, body)
		}
		return strings.Contains(body, `service_name="shop\\xff\\xfe\\x1b[2J"`) && strings.Contains(body, `service_name="json\\xff"`)
	})
	// Both spans reach traces.jsonl; every line parses strictly.
	path := filepath.Join(d.dataDir, "traces.jsonl")
	var names []string
	waitFor(t, 30*time.Second, "both spans in traces.jsonl", func() bool {
		if _, err := os.Stat(path); err != nil {
			return false
		}
		names = names[:0]
		readJSONLines(t, path, func(line []byte) {
			if !utf8.Valid(line) || !json.Valid(line) {
				t.Fatalf("traces.jsonl line is not valid JSON text (UTF-8 %v): %q", utf8.Valid(line), line)
			}
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
			if err != nil {
				t.Fatalf("traces.jsonl line: %v", err)
			}
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, sp := range ss.Spans().All() {
						names = append(names, sp.Name())
					}
				}
			}
		})
		return len(names) >= 2
	})
	want := map[string]bool{"GET /caf\uFFFD": true, "caf\uFFFD": true}
	for _, n := range names {
		if !want[n] {
			t.Errorf("span name %q in traces.jsonl, want one of %v", n, want)
		}
	}
	answersNormally(t, d)
}

// TestInvalidUTF8ForwardedUnchanged: with --upstream, OTLP protobuf
// carries invalid UTF-8 in the data byte for byte; only labels and the
// JSON files are made valid.
func TestInvalidUTF8ForwardedUnchanged(t *testing.T) {
	var mu sync.Mutex
	var got []ptrace.Traces
	sink, err := capture.Listen("127.0.0.1:0", func(r *capture.Request) error {
		if r.Signal == capture.Traces {
			mu.Lock()
			got = append(got, r.Traces)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	d := startDefault(t, "--upstream", sink.Endpoint())
	sent := invalidUTF8Traces()
	if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, sent)); code != http.StatusOK {
		t.Fatalf("protobuf request: %d", code)
	}
	waitFor(t, 30*time.Second, "the span upstream", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	rs := got[0].ResourceSpans().At(0)
	mu.Unlock()
	want := sent.ResourceSpans().At(0)
	svc, _ := rs.Resource().Attributes().Get("service.name")
	wsvc, _ := want.Resource().Attributes().Get("service.name")
	sp, wsp := rs.ScopeSpans().At(0).Spans().At(0), want.ScopeSpans().At(0).Spans().At(0)
	user, _ := sp.Attributes().Get("user")
	if svc.Str() != wsvc.Str() || sp.Name() != wsp.Name() || user.Str() != "bad\xc0\xafvalue" {
		t.Fatalf("forwarded service %q name %q user %q, want the bytes sent: %q %q", svc.Str(), sp.Name(), user.Str(), wsvc.Str(), wsp.Name())
	}
	if code, body := scrape(t, "http://"+d.tel+"/metrics"); code != http.StatusOK {
		t.Fatalf("own metrics endpoint: %d %s", code, body)
	}
}

// TestLocalMetricsSeriesBound: 50,000 distinct gauge series sent to the
// embedded default (local mode). The local metrics endpoint used to serve
// every one of them (and with a million, scrapes failed); now it serves
// max_series (10,000), answers each scrape with 200, and the gateway
// counts the points it refused.
func TestLocalMetricsSeriesBound(t *testing.T) {
	const (
		requests  = 5
		perReq    = 10_000
		maxSeries = 10_000 // serieslimit.DefaultMaxSeries, as the README says
	)
	d := startDefault(t)
	for r := range requests {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "many")
		g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		g.SetName("bounds_queue_depth")
		dps := g.SetEmptyGauge().DataPoints()
		for i := range perReq {
			dp := dps.AppendEmpty()
			dp.Attributes().PutInt("id", int64(r*perReq+i))
			dp.SetIntValue(1)
			dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		}
		body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		if code := postProto(t, "http://"+d.http+"/v1/metrics", body); code != http.StatusOK {
			t.Fatalf("metrics request %d: %d", r, code)
		}
	}
	count := func() int {
		code, body := scrape(t, "http://"+d.metrics+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("local metrics endpoint at the series bound: %d", code)
		}
		n := 0
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "bounds_queue_depth{") {
				n++
			}
		}
		return n
	}
	// The batch processor may still be passing points on: wait for the
	// refusals to be counted, then every scrape serves the bound exactly.
	refused := "otelcol_exporter_prometheus_refused_points{"
	waitFor(t, 60*time.Second, "the local endpoint to serve max_series series and refuse the rest", func() bool {
		if n := count(); n > maxSeries {
			t.Fatalf("%d series served, want max_series %d", n, maxSeries)
		}
		_, body := scrape(t, "http://"+d.tel+"/metrics")
		v, _ := promValue(body, refused)
		return v >= requests*perReq-maxSeries
	})
	_, self := scrape(t, "http://"+d.tel+"/metrics")
	if v, _ := promValue(self, refused); v != requests*perReq-maxSeries {
		t.Errorf("%s = %v, want %d", refused, v, requests*perReq-maxSeries)
	}
	for range 3 {
		start := time.Now()
		if n := count(); n != maxSeries {
			t.Fatalf("%d series served, want max_series %d", n, maxSeries)
		}
		t.Logf("scrape of %d series in %s", maxSeries, time.Since(start))
	}
	answersNormally(t, d)
}
