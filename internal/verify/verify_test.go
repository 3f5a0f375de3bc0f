package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/doubletake/doubletake/internal/capture"
)

// The test binary doubles as the command verify runs: with
// DOUBLETAKE_VERIFY_HELPER set, TestVerifyHelperProcess acts it out.
func TestVerifyHelperProcess(_ *testing.T) {
	mode := os.Getenv("DOUBLETAKE_VERIFY_HELPER")
	if mode == "" {
		return
	}
	os.Exit(helper(mode))
}

func helper(mode string) int {
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	send := func(n int) int {
		td := helperSpans()
		if mode == "nested" {
			td = helperNestedSpans()
		}
		if mode == "evil" {
			for _, sp := range td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().All() {
				sp.SetName("evil\x1b[2J\x1b]0;owned\x07")
			}
			td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "svc\x1b[31m")
		}
		body, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
		for range n {
			resp, err := http.Post(endpoint+"/v1/traces", "application/json", bytes.NewReader(body))
			if err != nil {
				fmt.Fprintln(os.Stderr, "helper:", err)
				return 10
			}
			resp.Body.Close()
		}
		return 0
	}
	switch mode {
	case "once", "nested":
		return send(1)
	case "twice", "evil":
		return send(2)
	case "env":
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "OTEL_EXPORTER_OTLP") {
				fmt.Println(kv)
			}
		}
		return 0
	case "exit7":
		send(1)
		return 7
	case "none":
		fmt.Println("exported nothing")
		return 0
	case "stdout":
		fmt.Println("{not json: the command's own output")
		return send(1)
	}
	return 99
}

func helperSpans() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "helper")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range 3 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1, byte(i + 1)})
		sp.SetSpanID(pcommon.SpanID{2, byte(i + 1)})
		sp.SetName("op")
		sp.SetStartTimestamp(1)
		sp.SetEndTimestamp(2)
	}
	return td
}

// helperNestedSpans: one request handled by a handler wrapped twice with
// the same instrumentation, two requests handled once.
func helperNestedSpans() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "helper")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otelhttp")
	ss.Scope().SetVersion("0.1.0")
	add := func(trace, id, parent byte, start, end uint64) {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{trace})
		sp.SetSpanID(pcommon.SpanID{id})
		if parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID{parent})
		}
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET /x")
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
	}
	add(1, 1, 0, 1e9, 1.1e9)
	add(1, 2, 1, 1e9+1e5, 1.1e9-1e5)
	add(2, 1, 0, 2e9, 2.1e9)
	add(3, 1, 0, 3e9, 3.1e9)
	return td
}

// run is one run of the engine and its renderings.
type run struct {
	rep            *Report
	err            error
	stdout, stderr string // the command's and verify's diagnostics
}

// testOptions are the defaults with a short wait for the last exports.
func testOptions() Options {
	o := DefaultOptions()
	o.Grace, o.GraceMax = 100*time.Millisecond, 2*time.Second
	return o
}

// runHelper runs this test binary in helperMode (none: no command) under
// Run with the options set by mutate.
func runHelper(t *testing.T, helperMode string, mutate func(*Options)) run {
	t.Helper()
	var argv []string
	if helperMode != "" {
		t.Setenv("DOUBLETAKE_VERIFY_HELPER", helperMode)
		argv = []string{os.Args[0], "-test.run=^TestVerifyHelperProcess$"}
	}
	o := testOptions()
	if mutate != nil {
		mutate(&o)
	}
	return runArgv(t, o, argv)
}

func runArgv(t *testing.T, o Options, argv []string) run {
	t.Helper()
	var out, errb bytes.Buffer
	rep, err := Run(context.Background(), Streams{Out: &out, Err: &errb}, nil, o, argv)
	return run{rep, err, out.String(), errb.String()}
}

// mustRun is runHelper for a run that yields a report.
func mustRun(t *testing.T, helperMode string, mutate func(*Options)) run {
	t.Helper()
	r := runHelper(t, helperMode, mutate)
	if r.err != nil || r.rep == nil {
		t.Fatalf("Run: %v\nstderr:\n%s", r.err, r.stderr)
	}
	return r
}

// jsonOf is the report as its JSON decodes, for reading by key.
func jsonOf(t *testing.T, rep *Report) map[string]any {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// textOf renders the text report, with exitCode as the caller's.
func textOf(t *testing.T, rep *Report, exitCode int) string {
	t.Helper()
	rep.ExitCode = exitCode
	var b strings.Builder
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func junitOf(t *testing.T, rep *Report) string {
	t.Helper()
	var b strings.Builder
	if err := WriteJUnit(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// at digs a value out of a decoded JSON report.
func at(t *testing.T, m map[string]any, path ...string) any {
	t.Helper()
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object at %q", path, p)
		}
		v = mm[p]
	}
	return v
}

func TestCleanRun(t *testing.T) {
	r := mustRun(t, "once", nil)
	m := jsonOf(t, r.rep)
	if r.rep.Verdict != Clean || at(t, m, "verdict") != "clean" || at(t, m, "spans", "received") != 3.0 || at(t, m, "spans", "extra_copies") != 0.0 {
		t.Fatalf("report: %v", m)
	}
	if at(t, m, "command", "exit_code") != 0.0 {
		t.Errorf("command exit code: %v", at(t, m, "command"))
	}
	if txt := textOf(t, r.rep, 0); !strings.HasSuffix(txt, "\nverdict: PASS (exit 0): nothing arrived twice\n") {
		t.Errorf("text report:\n%s", txt)
	}
}

func TestDuplicates(t *testing.T) {
	r := mustRun(t, "twice", nil)
	if r.rep.Verdict != Duplicates {
		t.Fatalf("verdict %q, want duplicates\nstderr:\n%s", r.rep.Verdict, r.stderr)
	}
	txt := textOf(t, r.rep, 1)
	for _, want := range []string{
		"spans: 6 received, 3 unique, 3 duplicated ids, 3 extra copies",
		`spans of service "helper": 3 extra copies of spans op, identical`,
		"two exporters in one process",
		"verdict: FAIL (exit 1): duplicate ratio 0.5 exceeds --max-duplicate-ratio 0",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("report lacks %q:\n%s", want, txt)
		}
	}
	if !hasRow(txt, "helper", "op", "6", "3", "3", "3", "3×2") {
		t.Errorf("report lacks the row for helper/op:\n%s", txt)
	}
	x := junitOf(t, r.rep)
	for _, want := range []string{`<testsuite name="doubletake verify" tests="7" failures="1"`, `<failure message="3 of 6 spans are extra copies"`, `name="command succeeds"`} {
		if !strings.Contains(x, want) {
			t.Errorf("JUnit lacks %q:\n%s", want, x)
		}
	}
	// A ratio allowance lets the same run pass.
	if r := mustRun(t, "twice", func(o *Options) { o.MaxRatio = 0.5 }); r.rep.Verdict != Clean ||
		r.rep.VerdictReason != "duplicate ratio 0.5 within --max-duplicate-ratio 0.5" {
		t.Errorf("--max-duplicate-ratio 0.5: verdict %q (%s), want clean", r.rep.Verdict, r.rep.VerdictReason)
	}
}

func TestNestedDuplicates(t *testing.T) {
	// --max-duplicate-ratio is about id duplicates: 1 does not pass
	// nested duplicates.
	r := mustRun(t, "nested", func(o *Options) { o.MaxRatio = 1 })
	m := jsonOf(t, r.rep)
	wantReason := "1 nested duplicate (double instrumentation, 1 finding; --allow nested-duplicates to pass)"
	if r.rep.Verdict != NestedDuplicates || at(t, m, "verdict_reason") != wantReason || at(t, m, "duplicate_ratio") != 0.0 {
		t.Fatalf("verdict: %v", m)
	}
	fs, _ := at(t, m, "nested_duplicates", "findings").([]any)
	if len(fs) != 1 {
		t.Fatalf("nested findings: %v", m)
	}
	f := fs[0].(map[string]any)
	scope := map[string]any{"name": "otelhttp", "version": "0.1.0"}
	if f["service"] != "helper" || f["kind"] != "SERVER" || f["name"] != "GET /x" || f["traces"] != 1.0 || f["occurrences"] != 1.0 ||
		f["affected_spans"] != 2.0 || f["kind_spans"] != 4.0 || f["share"] != 0.5 ||
		!reflect.DeepEqual(f["outer_scope"], scope) || !reflect.DeepEqual(f["inner_scope"], scope) ||
		f["diagnosis"] != `otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice ("GET /x", 50% of server spans): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one` {
		t.Fatalf("finding: %v", f)
	}
	found := false
	for _, x := range at(t, m, "findings").([]any) {
		if x.(map[string]any)["diagnosis"] == "nested-duplicate" {
			found = true
		}
	}
	if !found {
		t.Errorf("no nested-duplicate in findings: %v", at(t, m, "findings"))
	}
	x := junitOf(t, r.rep)
	for _, want := range []string{`tests="7" failures="1"`, `<failure message="1 nested duplicate (double instrumentation) in 1 finding"`} {
		if !strings.Contains(x, want) {
			t.Errorf("JUnit lacks %q:\n%s", want, x)
		}
	}

	// The text report has the section and the verdict.
	txt := textOf(t, mustRun(t, "nested", nil).rep, 1)
	for _, want := range []string{
		"nested duplicates (one operation recorded as two spans, one inside the other): 1 nested duplicate in 4 spans, 1 finding",
		"  - otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice",
		`    service helper, SERVER span "GET /x": 1 pair in 1 trace; 2 of 4 server spans of the service (50%) are part of one; matched by name`,
		`  - spans of service "helper": double instrumentation, 1 nested duplicate in 1 trace: otelhttp 0.1.0 inside`,
		"verdict: FAIL (exit 1): " + wantReason,
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text report lacks %q:\n%s", want, txt)
		}
	}

	// Allowing nested duplicates passes the run and still reports.
	for _, allow := range [][]string{{"nested-duplicates"}, {" nested-duplicates", "nested-duplicates"}} {
		r = mustRun(t, "nested", func(o *Options) { o.Allow = allow })
		m = jsonOf(t, r.rep)
		if r.rep.Verdict != Clean || at(t, m, "nested_duplicates", "pairs") != 1.0 ||
			!reflect.DeepEqual(at(t, m, "allow"), []any{"nested-duplicates"}) ||
			at(t, m, "verdict_reason") != "nothing arrived twice; 1 nested duplicate (double instrumentation, 1 finding) allowed by --allow nested-duplicates" {
			t.Fatalf("%q: report: %v", allow, m)
		}
		if x := junitOf(t, r.rep); !strings.Contains(x, `failures="0"`) {
			t.Errorf("%q: JUnit:\n%s", allow, x)
		}
	}
}

// hasRow reports whether a table row starts with the fields want.
func hasRow(report string, want ...string) bool {
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(want) && slices.Equal(f[:len(want)], want) {
			return true
		}
	}
	return false
}

func TestCommandFailure(t *testing.T) {
	r := mustRun(t, "exit7", nil)
	m := jsonOf(t, r.rep)
	if at(t, m, "command", "exit_code") != 7.0 || at(t, m, "command", "failed") != true || r.rep.Verdict != CommandFailed ||
		!strings.Contains(r.rep.VerdictReason, "exited with status 7") {
		t.Fatalf("report: %v", m)
	}
	if r := mustRun(t, "exit7", func(o *Options) { o.IgnoreExit = true }); r.rep.Verdict != Clean || !r.rep.Command.Failed {
		t.Errorf("IgnoreExit: verdict %q, command %+v; want clean, the failure still reported", r.rep.Verdict, r.rep.Command)
	}
}

// TestNothingReceived: a command that exports nothing is not a clean run
// (verdict nothing-received, in text and JUnit), unless AllowEmpty says it
// is expected.
func TestNothingReceived(t *testing.T) {
	r := mustRun(t, "none", nil)
	if r.rep.Verdict != NothingReceived || !strings.Contains(r.rep.VerdictReason, "--allow-empty") ||
		!slices.Equal(r.rep.Missing, []string{"traces", "metrics", "logs"}) {
		t.Fatalf("verdict %q (%s), missing %q", r.rep.Verdict, r.rep.VerdictReason, r.rep.Missing)
	}
	x := junitOf(t, r.rep)
	if !strings.Contains(x, `<testcase name="telemetry arrives" classname="doubletake.verify.received" time="0">`) ||
		!strings.Contains(x, `<failure message="nothing arrived`) {
		t.Errorf("JUnit report:\n%s", x)
	}
	if txt := textOf(t, r.rep, 5); !strings.Contains(txt, "verdict: NOTHING RECEIVED (exit 5): nothing arrived") {
		t.Errorf("text:\n%s", txt)
	}
	r = mustRun(t, "none", func(o *Options) { o.AllowEmpty = true })
	if m := jsonOf(t, r.rep); r.rep.Verdict != Clean || at(t, m, "allow_empty") != true ||
		r.rep.VerdictReason != "nothing arrived, allowed by --allow-empty" {
		t.Errorf("AllowEmpty report: %v", m)
	}
}

// TestExpect: a signal Expect names that never arrived is missing and
// named; one that arrived passes.
func TestExpect(t *testing.T) {
	r := mustRun(t, "once", func(o *Options) { o.Expect = []string{"traces", "metrics"} })
	m := jsonOf(t, r.rep)
	if r.rep.Verdict != ExpectedSignalMissing || !reflect.DeepEqual(at(t, m, "missing"), []any{"metrics"}) ||
		at(t, m, "verdict_reason") != "expected metrics never arrived (--expect traces,metrics)" {
		t.Fatalf("report: %v", m)
	}
	if txt := textOf(t, r.rep, 5); !strings.Contains(txt, "verdict: NOTHING RECEIVED (exit 5): expected metrics never arrived") {
		t.Errorf("text:\n%s", txt)
	}
	if r := mustRun(t, "once", func(o *Options) { o.Expect = []string{"traces"} }); r.rep.Verdict != Clean {
		t.Errorf("expecting traces, with spans: verdict %q", r.rep.Verdict)
	}
	// Duplicates decide the verdict; what is missing is still said.
	r = mustRun(t, "twice", func(o *Options) { o.Expect = []string{"logs"} })
	if r.rep.Verdict != Duplicates || !strings.Contains(r.rep.VerdictReason, "also expected logs never arrived") {
		t.Errorf("verdict %q: %s", r.rep.Verdict, r.rep.VerdictReason)
	}
}

// TestReportOnStdout: with ReportOnStdout the command's stdout goes to
// Streams.Err, which keeps Streams.Out for the report; without it, to
// Streams.Out.
func TestReportOnStdout(t *testing.T) {
	r := mustRun(t, "stdout", func(o *Options) { o.ReportOnStdout = true })
	if r.stdout != "" || !strings.Contains(r.stderr, "{not json: the command's own output") {
		t.Errorf("stdout %q, stderr %q; want the command's output on stderr", r.stdout, r.stderr)
	}
	if r := mustRun(t, "stdout", nil); !strings.HasPrefix(r.stdout, "{not json") {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestCommandNotFound(t *testing.T) {
	r := runArgv(t, testOptions(), []string{"doubletake-no-such-command-here"})
	var ns *NotStartedError
	if !errors.As(r.err, &ns) {
		t.Fatalf("error %v, want a *NotStartedError", r.err)
	}
	want := `verify: cannot run "doubletake-no-such-command-here": executable file not found in $PATH`
	if r.err.Error() != want {
		t.Errorf("error %q, want %q", r.err, want)
	}
	if r.rep == nil || r.rep.Verdict != CommandNotStarted || r.rep.VerdictReason != want || r.rep.Command == nil || !r.rep.Command.Failed ||
		r.rep.Command.ExitCode != -1 || !strings.Contains(r.rep.Command.Error, "executable file not found") {
		t.Errorf("report %+v", r.rep)
	}
}

func TestChildEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://elsewhere:4318/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	r := mustRun(t, "env", func(o *Options) { o.AllowEmpty = true })
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	slices.Sort(lines)
	if len(lines) != 2 || lines[0] != "OTEL_EXPORTER_OTLP_ENDPOINT="+r.rep.Endpoint || lines[1] != "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" ||
		!strings.HasPrefix(r.rep.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("child environment: %q (endpoint %s)", lines, r.rep.Endpoint)
	}
	if !strings.Contains(r.stderr, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not passed to the command") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestChildEnv(t *testing.T) {
	env, removed := childEnv([]string{"A=1", "OTEL_EXPORTER_OTLP_ENDPOINT=x", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=y", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=z", "OTEL_EXPORTER_OTLP_HEADERS=h"}, "http://127.0.0.1:1")
	want := []string{"A=1", "OTEL_EXPORTER_OTLP_HEADERS=h", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"}
	if !slices.Equal(env, want) || !slices.Equal(removed, []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"}) {
		t.Fatalf("childEnv = %q, removed %q", env, removed)
	}
}

// TestValidate: each option that does not hold is refused with the flag
// it comes from, and Run refuses it too.
func TestValidate(t *testing.T) {
	cmd := []string{"true"}
	for _, tc := range []struct {
		mutate func(*Options)
		argv   []string
		want   string
	}{
		{func(*Options) {}, nil, "give a command after --"},
		{func(o *Options) { o.MaxRatio = 1.5 }, cmd, "--max-duplicate-ratio 1.5: want a number from 0 to 1"},
		{func(o *Options) { o.Grace = 0 }, cmd, "--grace 0s: want a duration above 0"},
		{func(o *Options) { o.Grace, o.GraceMax = 5*time.Second, time.Second }, cmd, "--grace-max 1s: want at least --grace (5s)"},
		{func(o *Options) { o.Duration = time.Second }, cmd, "--duration is for --listen without a command"},
		{func(o *Options) { o.Duration = -time.Second; o.Listen = "127.0.0.1:0" }, nil, "--duration -1s: want a duration of 0 or more"},
		{func(o *Options) { o.Listen, o.Duration = "nonsense", time.Second }, nil, `--listen "nonsense": want host:port`},
		{func(o *Options) { o.Forward = "ftp://x:1" }, cmd, `--forward: "ftp://x:1": want an http:// or https:// URL`},
		{func(o *Options) { o.Forward = "http://x:1/p" }, cmd, `a gRPC endpoint takes no path`},
		{func(o *Options) { o.ForwardProtocol = "udp" }, cmd, `--forward-protocol "udp": want grpc or http`},
		{func(o *Options) { o.ExportInterval = -time.Second }, cmd, "--export-interval -1s: want a duration above 0"},
		{func(o *Options) { o.Allow = []string{"duplicates"} }, cmd, `--allow "duplicates": want nested-duplicates`},
		{func(o *Options) { o.Allow = []string{"nested-duplicates", "nested"} }, cmd, `--allow "nested": want nested-duplicates`},
		{func(o *Options) { o.Expect = []string{"spans"} }, cmd, `--expect "spans": want traces, metrics, logs`},
		{func(o *Options) { o.Expect, o.AllowEmpty = []string{"traces"}, true }, cmd, `--allow-empty and --expect contradict each other`},
		{func(o *Options) { o.Scan.Timeout = 0 }, cmd, "--scan-timeout 0s: want a duration above 0"},
		{func(o *Options) { o.Scan.MaxFiles = 0 }, cmd, "--scan-max-files 0: want a number above 0"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			if err := o.Validate(tc.argv); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
			if r := runArgv(t, o, tc.argv); r.rep != nil || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("Run: %v (report %v), want %q", r.err, r.rep, tc.want)
			}
		})
	}
	for _, argv := range [][]string{cmd, nil} {
		o := DefaultOptions()
		if argv == nil {
			o.Listen = "127.0.0.1:0"
		}
		if err := o.Validate(argv); err != nil {
			t.Errorf("the defaults (argv %q): %v", argv, err)
		}
	}
}

// TestPortInUse: a --listen address another process holds is Run's
// error, with a hint.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := testOptions()
	o.Listen, o.Duration = ln.Addr().String(), time.Second
	r := runArgv(t, o, nil)
	if r.rep != nil || r.err == nil {
		t.Fatalf("Run: report %v, error %v; want an error", r.rep, r.err)
	}
	for _, want := range []string{"address already in use", "choose another --listen address"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
}

// TestListenAndForward runs verify without a command, forwarding to a
// second receiver, and sends it a malformed request and a good one.
func TestListenAndForward(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			var mu sync.Mutex
			got := 0
			down, err := capture.Listen("127.0.0.1:0", func(r *capture.Request) error {
				mu.Lock()
				defer mu.Unlock()
				got += r.Items()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			defer down.Close()

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			o := testOptions()
			// The run is stopped by a signal once the requests are
			// answered: a duration short enough for a test could end
			// before a loaded machine sent them.
			o.Listen, o.Duration, o.Forward, o.ForwardProtocol = addr, 10*time.Minute, down.Endpoint(), proto
			errb := &lineWaiter{want: "receiving OTLP", seen: make(chan struct{})}
			done := make(chan run)
			sigs := make(chan os.Signal, 1)
			go func() {
				rep, err := Run(context.Background(), Streams{Out: io.Discard, Err: errb}, sigs, o, nil)
				done <- run{rep: rep, err: err}
			}()
			select {
			case <-errb.seen: // listening
			case r := <-done:
				t.Fatalf("Run ended before it listened: %v\n%s", r.err, errb)
			}
			body, _ := ptraceotlp.NewExportRequestFromTraces(helperSpans()).MarshalProto()
			resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("good request: status %d, want 200", resp.StatusCode)
			}
			resp, err = http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", strings.NewReader("\xff\xff\xff"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("malformed request: status %d, want 400", resp.StatusCode)
			}
			sigs <- os.Interrupt
			r := <-done
			if r.err != nil {
				t.Fatalf("Run: %v\n%s", r.err, errb)
			}
			if r.rep.Verdict != Malformed || r.rep.Malformed != 1 || r.rep.Forward == nil || r.rep.Forward.Sent != 1 || r.rep.Command != nil {
				t.Fatalf("report: %v", jsonOf(t, r.rep))
			}
			if !strings.Contains(errb.String(), "doubletake: verify: receiving OTLP (gRPC, HTTP/protobuf, HTTP/JSON) on "+r.rep.Endpoint+" for 10m0s") {
				t.Errorf("stderr: %s", errb)
			}
			mu.Lock()
			defer mu.Unlock()
			if got != 3 {
				t.Errorf("forwarded %d spans, want 3", got)
			}
		})
	}
}

// lineWaiter is a diagnostics stream that closes seen once what it was
// written contains want.
type lineWaiter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return n, err
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSignalEndsListening: without a command, a signal on the channel Run
// is given ends the receiving, and says so.
func TestSignalEndsListening(t *testing.T) {
	o := testOptions()
	o.Listen = "127.0.0.1:0"
	sigs := make(chan os.Signal, 1)
	sigs <- os.Interrupt
	var out, errb bytes.Buffer
	rep, err := Run(context.Background(), Streams{Out: &out, Err: &errb}, sigs, o, nil)
	if err != nil || rep.Verdict != NothingReceived {
		t.Fatalf("Run: %v, verdict %v", err, rep)
	}
	if !strings.Contains(errb.String(), "doubletake: verify: interrupt received, stopping") {
		t.Errorf("stderr: %s", errb.String())
	}
}
