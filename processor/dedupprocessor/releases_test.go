package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// fastapiAdvice is what verify says of fastapi 0.142.4 installed
// (internal/scan, TestFastAPIVerify), after the release and what it is
// known to do: the gateway names the release of copies in its scope so.
const (
	fastapiKnown  = "copies from fastapi 0.142.4 (known to attach a second exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): "
	fastapiFix    = "upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment"
	fastapiBrief  = fastapiKnown + fastapiFix
	wholeRequests = "whole requests arrive again"
)

// scopedSpans is one request of service: per scope (name, version), n
// spans with ids from base up.
func scopedSpans(service string, base byte, scopes ...[3]string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	id := base
	for _, sc := range scopes {
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(sc[0])
		ss.Scope().SetVersion(sc[1])
		for range len(sc[2]) { // sc[2]: one character per span
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{id, 1})
			s.SetSpanID(pcommon.SpanID{id, 2})
			s.SetName("GET /items/{item_id}")
			s.SetStartTimestamp(1_000)
			s.SetEndTimestamp(2_000)
			id++
		}
	}
	return td
}

// scopedLogs is one request of service: per scope, one record per
// character of its third field.
func scopedLogs(service string, scopes ...[3]string) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	for _, sc := range scopes {
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(sc[0])
		sl.Scope().SetVersion(sc[1])
		for i, c := range sc[2] {
			r := sl.LogRecords().AppendEmpty()
			r.SetTimestamp(pcommon.Timestamp(1_000 + i))
			r.Body().SetStr(string(c))
		}
	}
	return ld
}

// TestGatewayNamesTheRelease: copies whose instrumentation scope is a
// release known to export twice (fastapi 0.142.4) are named so, with
// verify's advice, on the status page, in /status.json, in the warning
// and in the summary line, in drop and in detect mode; copies from a
// scope of no such release (fastapi 0.143.5 with auto-configure on, the
// app's own scope alone) keep the guess from their shape, and an interval
// without such copies adds no release to the summary.
func TestGatewayNamesTheRelease(t *testing.T) {
	for _, mode := range []Mode{ModeDrop, ModeDetect} {
		t.Run(string(mode), func(t *testing.T) {
			core, logged := observer.New(zapcore.WarnLevel)
			set := processortest.NewNopSettings(Type)
			set.Logger = zap.New(core)
			cfg := createDefaultConfig()
			cfg.Mode = mode
			statusOn(cfg)
			cfg.Status.MaxRows = 10
			f := NewFactory()
			tp, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			lp, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []component.Component{tp, lp} {
				if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			}
			st := tp.(*tracesProcessor).st
			before := st.summary().sums()

			// The seed on 0.142.4: FastAPI's 3 spans and the app's 1, all
			// sent twice (the second reader's request).
			seed := func() ptrace.Traces {
				return scopedSpans("seed", 1, [3]string{"fastapi", "0.142.4", "abc"}, [3]string{"seed", "1.0", "d"})
			}
			// 0.143.5 with auto-configure: the same, not a known release.
			auto := func() ptrace.Traces {
				return scopedSpans("auto", 50, [3]string{"fastapi", "0.143.5", "abc"})
			}
			// The app's own scope alone.
			plain := func() ptrace.Traces { return scopedSpans("plain", 100, [3]string{"seed", "1.0", "ab"}) }
			for _, td := range []func() ptrace.Traces{seed, auto, plain} {
				for range 2 {
					if err := tp.ConsumeTraces(context.Background(), td()); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Log records: FastAPI's validation event and the app's record.
			seedLogs := func() plog.Logs {
				return scopedLogs("seed", [3]string{"fastapi", "0.142.4", "v"}, [3]string{"seed", "", "i"})
			}
			for range 2 {
				if err := lp.ConsumeLogs(context.Background(), seedLogs()); err != nil {
					t.Fatal(err)
				}
			}

			// status.json
			_, _, body := getStatus(t, st.status.Handler(), "/status.json")
			var s statuspage.Status
			if err := json.Unmarshal([]byte(body), &s); err != nil {
				t.Fatal(err)
			}
			rows := map[string]statuspage.ServiceStatus{}
			for _, r := range s.Services {
				rows[r.Service+"/"+r.Signal] = r
			}
			if r := rows["seed/traces"]; r.Copies != 4 || r.Release != "fastapi 0.142.4" || r.ReleaseCopies != 3 || r.Fix != fastapiFix || r.Diagnosis != fastapiBrief {
				t.Errorf("seed's spans: %+v", r)
			}
			if r := rows["seed/logs"]; r.Copies != 2 || r.Release != "fastapi 0.142.4" || r.ReleaseCopies != 1 || r.Diagnosis != fastapiBrief {
				t.Errorf("seed's log records: %+v", r)
			}
			for _, k := range []string{"auto/traces", "plain/traces"} {
				if r := rows[k]; r.Copies == 0 || r.Release != "" || r.ReleaseCopies != 0 || r.Fix != "" || !strings.HasPrefix(r.Diagnosis, wholeRequests) {
					t.Errorf("%s: %+v; want copies without a release, diagnosed by their shape", k, r)
				}
			}
			// The page
			_, _, page := getStatus(t, st.status.Handler(), "/")
			if !strings.Contains(page, "copies from fastapi 0.142.4 (known to attach a second exporter") ||
				!strings.Contains(page, "upgrade to fastapi&gt;=0.143.0 (pip install &#39;fastapi&gt;=0.143.0&#39;)") {
				t.Errorf("the page does not name the release with its advice:\n%.4000s", page)
			}

			// The warnings: one per service and signal (the first copies).
			warns := map[string]map[string]any{}
			for _, e := range logged.AllUntimed() {
				f := e.ContextMap()
				warns[f["service.name"].(string)+"/"+e.Message] = f
			}
			for _, k := range []string{"seed/duplicate spans received", "seed/duplicate log records received"} {
				f := warns[k]
				if f == nil || f["release"] != "fastapi 0.142.4" || f["suggests"] != fastapiBrief || f["dropped"] != (mode == ModeDrop) {
					t.Errorf("warning %s: %v; want the release and verify's advice", k, f)
				}
			}
			for _, k := range []string{"auto/duplicate spans received", "plain/duplicate spans received"} {
				f := warns[k]
				if f == nil || f["release"] != nil || !strings.HasPrefix(f["suggests"].(string), wholeRequests) {
					t.Errorf("warning %s: %v; want no release", k, f)
				}
			}

			// The summary line's fields for what came since before.
			cur := st.summary().sums()
			d := signalSums{cur.spans.minus(before.spans), cur.logs.minus(before.logs), cur.metrics.minus(before.metrics)}
			named := fieldMap(st.summary().fields(time.Second, d, time.Now().UnixNano()))
			if named["release"] != "fastapi 0.142.4" || named["release_suggests"] != fastapiBrief ||
				named["spans_release_copies"] != int64(3) || named["logs_release_copies"] != int64(1) || named["spans_duplicate"] != int64(9) {
				t.Errorf("summary fields %v", named)
			}
			// The next interval: copies of the app's scope only.
			if err := tp.ConsumeTraces(context.Background(), plain()); err != nil {
				t.Fatal(err)
			}
			next := st.summary().sums()
			d = signalSums{next.spans.minus(cur.spans), next.logs.minus(cur.logs), next.metrics.minus(cur.metrics)}
			named = fieldMap(st.summary().fields(time.Second, d, time.Now().UnixNano()))
			if _, ok := named["release"]; ok || named["spans_duplicate"] != int64(2) {
				t.Errorf("summary fields of an interval without copies from a known release: %v", named)
			}
		})
	}
}

// fieldMap is zap fields by key: integers as int64, strings as string.
func fieldMap(fields []zap.Field) map[string]any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	return enc.Fields
}

// TestReleaseLookedUpOncePerScope: the release is looked up when a copy
// is found, once per scope of a request, never for an item that is not a
// copy: a request of new spans under fastapi 0.142.4 names nothing, and
// its repetition counts every copy against the release.
func TestReleaseLookedUpOncePerScope(t *testing.T) {
	h := newHarness(t, nil)
	st := h.traces.(*tracesProcessor).st
	req := func() ptrace.Traces {
		return scopedSpans("seed", 1, [3]string{"fastapi", "0.142.4", "abcdefgh"}, [3]string{"fastapi", "0.142.3", "ij"})
	}
	if err := h.sendTraces(req()); err != nil {
		t.Fatal(err)
	}
	if l := st.traces.svcs.sum(); l.releaseCopies != 0 || l.release != nil {
		t.Fatalf("new spans counted against a release: %d, %v", l.releaseCopies, l.release)
	}
	if err := h.sendTraces(req()); err != nil {
		t.Fatal(err)
	}
	l := st.traces.svcs.sum()
	if l.releaseCopies != 10 || l.release == nil || l.release.Release() != "fastapi 0.142.3" {
		t.Errorf("release copies %d of %v; want 10, the last scope's fastapi 0.142.3", l.releaseCopies, l.release)
	}
	// What a copy costs when its scope names a release: the lookup of a
	// listed one allocates nothing (internal/scan), and copyIn looks once
	// per scope.
	var c counts
	var cs copyScope
	m := st.traces.svcs.releases
	scope := pcommon.NewInstrumentationScope()
	scope.SetName("fastapi")
	scope.SetVersion("0.142.4")
	if n := testing.AllocsPerRun(100, func() { c.copyIn(&cs, m, 0, scope) }); n != 0 {
		t.Errorf("copyIn: %v allocations", n)
	}
	if c.releaseCopies != 101 || c.release == nil {
		t.Errorf("copyIn counted %d copies against %v", c.releaseCopies, c.release)
	}
}

// TestGatewayNamesTheReleaseOfMetricCopies: a second metric reader exports
// every meter of its provider, so the copied stream's scope is the app's;
// FastAPI 0.142's reader sends FastAPI's own metrics (scope "fastapi"
// 0.142.x) in the same request. Once the second writer of the app's
// counter is judged a copy, the status page, /status.json and the warning
// name the release from the scopes its requests carry, with verify's
// advice; a copy whose requests carry no known release (fastapi 0.143.5,
// auto-configured) is named by its class.
func TestGatewayNamesTheReleaseOfMetricCopies(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Telemetry.WarnInterval = time.Nanosecond
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	// The truth: a count that grows by 0 to 4 each second; the app's
	// reader (start 100) exports it every 10 s, the second reader (start
	// 125, empty at its start) 3 s after, less the count at 125.
	count := func(t int) (n int) {
		for s := 100; s < t; s++ {
			n += s * 37 % 5
		}
		return n
	}
	send := func(service, fastapi string, text string, at int) {
		t.Helper()
		h.now = int64(at) * int64(time.Second)
		if fastapi != "" {
			text += "scope fastapi@" + fastapi + "\nmetric http_server_active_requests sum cumulative\npoint " + strconv.Itoa(125) + " " + strconv.Itoa(at) + " i=0\n"
		}
		if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, "resource service.name="+service+"\n"+text)); err != nil {
			t.Fatal(err)
		}
	}
	const counter = "scope app\nmetric requests sum cumulative monotonic\n"
	for _, c := range []struct{ service, fastapi string }{{"seed", "0.142.4"}, {"auto", "0.143.5"}} {
		for at := 110; at <= 480; at += 10 {
			send(c.service, "", counter+fmt.Sprintf("point 100 %d i=%d\n", at, count(at)), at)
			if at+3 > 125 {
				send(c.service, c.fastapi, counter+fmt.Sprintf("point 125 %d i=%d\n", at+3, count(at+3)-count(125)), at+3)
			}
		}
	}
	st := h.p.(*metricsProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	rows := map[string]statuspage.StreamStatus{}
	for _, r := range s.Streams {
		rows[r.Service+"/"+r.Metric] = r
	}
	if r := rows["seed/requests"]; r.Class != "copy" || r.Release != "fastapi 0.142.4" || r.Diagnosis != fastapiBrief {
		t.Errorf("seed's counter: %+v; want a copy named fastapi 0.142.4 with verify's advice", r)
	}
	if r := rows["auto/requests"]; r.Class != "copy" || r.Release != "" || r.Diagnosis != streams.ClassCopy.Cause() {
		t.Errorf("auto's counter: %+v; want a copy named by its class", r)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, "copies from fastapi 0.142.4 (known to attach a second exporter") {
		t.Errorf("the page does not name the release:\n%.4000s", page)
	}
	var last map[string]any
	for _, e := range h.logs.All() {
		if f := e.ContextMap(); e.Message == "metric stream has more than one writer" && f["service.name"] == "seed" {
			last = f
		}
	}
	if last == nil || last["class"] != "copy" || last["suggests"] != fastapiBrief {
		t.Errorf("seed's last warning %v; want the copy named with the release's advice", last)
	}
}
