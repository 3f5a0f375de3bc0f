package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	case "once":
		return send(1)
	case "twice":
		return send(2)
	case "nested":
		return send(1)
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
	case "evil":
		return send(2)
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

type result struct {
	code           int
	stdout, stderr string
}

// verify runs `doubletake verify ARGS...` in process; helperMode, when set,
// is appended as the command (this test binary in that mode).
func verify(t *testing.T, helperMode string, args ...string) result {
	t.Helper()
	argv := append([]string{"verify", "--grace", "100ms", "--grace-max", "2s"}, args...)
	if helperMode != "" {
		t.Setenv("DOUBLETAKE_VERIFY_HELPER", helperMode)
		argv = append(argv, "--", os.Args[0], "-test.run=^TestVerifyHelperProcess$")
	}
	var out, errb bytes.Buffer
	code := Main(argv, Streams{Out: &out, Err: &errb})
	return result{code, out.String(), errb.String()}
}

func jsonReport(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, r.stdout)
	}
	return m
}

// at digs a number out of a decoded JSON report.
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

func TestVerifyCleanRun(t *testing.T) {
	r := verify(t, "once", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	m := jsonReport(t, r)
	if at(t, m, "verdict") != "clean" || at(t, m, "spans", "received") != 3.0 || at(t, m, "spans", "extra_copies") != 0.0 {
		t.Fatalf("report: %s", r.stdout)
	}
	if at(t, m, "command", "exit_code") != 0.0 {
		t.Errorf("command exit code: %v", at(t, m, "command"))
	}
}

func TestVerifyDuplicatesExitOne(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "verify.xml")
	r := verify(t, "twice", "--junit", junit)
	if r.code != ExitFindings {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"spans: 6 received, 3 unique, 3 duplicated ids, 3 extra copies",
		`spans of service "helper": 3 extra copies of spans op, identical`,
		"two exporters in one process",
		"verdict: FAIL (exit 1): duplicate ratio 0.5 exceeds --max-duplicate-ratio 0",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	if !hasRow(r.stdout, "helper", "op", "6", "3", "3", "3", "3×2") {
		t.Errorf("report lacks the row for helper/op:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "doubletake: verify: duplicate ratio 0.5 exceeds --max-duplicate-ratio 0") {
		t.Errorf("stderr: %s", r.stderr)
	}
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<testsuite name="doubletake verify" tests="7" failures="1"`, `<failure message="3 of 6 spans are extra copies"`, `name="command succeeds"`} {
		if !strings.Contains(string(x), want) {
			t.Errorf("JUnit lacks %q:\n%s", want, x)
		}
	}
	// A ratio allowance lets the same run pass.
	if r := verify(t, "twice", "--max-duplicate-ratio", "0.5"); r.code != ExitOK {
		t.Errorf("--max-duplicate-ratio 0.5: exit %d, want 0\n%s", r.code, r.stdout)
	}
}

func TestVerifyNestedDuplicates(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "verify.xml")
	// --max-duplicate-ratio is about id duplicates: 1 does not pass
	// nested duplicates.
	r := verify(t, "nested", "--format", "json", "--junit", junit, "--max-duplicate-ratio", "1")
	if r.code != ExitFindings {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	m := jsonReport(t, r)
	wantReason := "1 nested duplicate (double instrumentation, 1 finding; --allow nested-duplicates to pass)"
	if at(t, m, "verdict") != "nested-duplicates" || at(t, m, "verdict_reason") != wantReason || at(t, m, "duplicate_ratio") != 0.0 {
		t.Fatalf("verdict: %s", r.stdout)
	}
	if !strings.Contains(r.stderr, "doubletake: verify: "+wantReason) {
		t.Errorf("stderr: %s", r.stderr)
	}
	fs, _ := at(t, m, "nested_duplicates", "findings").([]any)
	if len(fs) != 1 {
		t.Fatalf("nested findings: %s", r.stdout)
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
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`tests="7" failures="1"`, `<failure message="1 nested duplicate (double instrumentation) in 1 finding"`} {
		if !strings.Contains(string(x), want) {
			t.Errorf("JUnit lacks %q:\n%s", want, x)
		}
	}

	// The text report has the section and the verdict.
	r = verify(t, "nested")
	for _, want := range []string{
		"nested duplicates (one operation recorded as two spans, one inside the other): 1 nested duplicate in 4 spans, 1 finding",
		"  - otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice",
		`    service helper, SERVER span "GET /x": 1 pair in 1 trace; 2 of 4 server spans of the service (50%) are part of one; matched by name`,
		`  - spans of service "helper": double instrumentation, 1 nested duplicate in 1 trace: otelhttp 0.1.0 inside`,
		"verdict: FAIL (exit 1): " + wantReason,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, r.stdout)
		}
	}

	// --allow nested-duplicates passes the run and still reports.
	for _, allow := range [][]string{{"--allow", "nested-duplicates"}, {"--allow", " nested-duplicates", "--allow=nested-duplicates"}} {
		r = verify(t, "nested", append([]string{"--format", "json", "--junit", junit}, allow...)...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d, want 0\n%s\n%s", allow, r.code, r.stdout, r.stderr)
		}
		m = jsonReport(t, r)
		if at(t, m, "verdict") != "clean" || at(t, m, "nested_duplicates", "pairs") != 1.0 ||
			!reflect.DeepEqual(at(t, m, "allow"), []any{"nested-duplicates"}) ||
			at(t, m, "verdict_reason") != "nothing arrived twice; 1 nested duplicate (double instrumentation, 1 finding) allowed by --allow nested-duplicates" {
			t.Fatalf("%v: report: %s", allow, r.stdout)
		}
		if x, _ := os.ReadFile(junit); !strings.Contains(string(x), `failures="0"`) {
			t.Errorf("%v: JUnit:\n%s", allow, x)
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

func TestVerifyCommandFailure(t *testing.T) {
	r := verify(t, "exit7", "--format", "json")
	if r.code != ExitCommand {
		t.Fatalf("exit %d, want 3\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	m := jsonReport(t, r)
	if at(t, m, "command", "exit_code") != 7.0 || at(t, m, "command", "failed") != true || at(t, m, "verdict") != "command-failed" {
		t.Fatalf("report: %s", r.stdout)
	}
	if !strings.Contains(r.stderr, "exited with status 7") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if r := verify(t, "exit7", "--ignore-exit"); r.code != ExitOK {
		t.Errorf("--ignore-exit: exit %d, want 0\n%s", r.code, r.stderr)
	}
}

// TestVerifyNothingReceived: a command that exports nothing is not a clean
// run: exit 5 (verdict nothing-received) in text, JSON and JUnit, unless
// --allow-empty says it is expected.
func TestVerifyNothingReceived(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "verify.xml")
	r := verify(t, "none", "--format", "json", "--junit", junit)
	if r.code != ExitNothing {
		t.Fatalf("exit %d, want 5\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	m := jsonReport(t, r)
	if at(t, m, "verdict") != "nothing-received" || at(t, m, "exit_code") != 5.0 ||
		!strings.Contains(at(t, m, "verdict_reason").(string), "--allow-empty") {
		t.Fatalf("report: %s", r.stdout)
	}
	x, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(x), `<testcase name="telemetry arrives" classname="doubletake.verify.received" time="0">`) ||
		!strings.Contains(string(x), `<failure message="nothing arrived`) {
		t.Errorf("JUnit report (%v):\n%s", err, x)
	}
	if r := verify(t, "none"); r.code != ExitNothing || !strings.Contains(r.stdout, "verdict: NOTHING RECEIVED (exit 5): nothing arrived") {
		t.Errorf("text: exit %d\n%s", r.code, r.stdout)
	}
	r = verify(t, "none", "--allow-empty", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("--allow-empty: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if m := jsonReport(t, r); at(t, m, "verdict") != "clean" || at(t, m, "allow_empty") != true {
		t.Errorf("--allow-empty report: %s", r.stdout)
	}
}

// TestVerifyExpect: a signal --expect names that never arrived fails with
// exit 5 and is named; one that arrived passes.
func TestVerifyExpect(t *testing.T) {
	r := verify(t, "once", "--format", "json", "--expect", "traces,metrics")
	if r.code != ExitNothing {
		t.Fatalf("exit %d, want 5\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	m := jsonReport(t, r)
	if at(t, m, "verdict") != "expected-signal-missing" || !reflect.DeepEqual(at(t, m, "missing"), []any{"metrics"}) ||
		at(t, m, "verdict_reason") != "expected metrics never arrived (--expect traces,metrics)" {
		t.Fatalf("report: %s", r.stdout)
	}
	if r := verify(t, "once", "--expect", "traces"); r.code != ExitOK {
		t.Errorf("--expect traces with spans: exit %d\n%s", r.code, r.stdout)
	}
	// Duplicates decide the code; what is missing is still said.
	r = verify(t, "twice", "--format", "json", "--expect", "logs")
	if m := jsonReport(t, r); r.code != ExitFindings || !strings.Contains(at(t, m, "verdict_reason").(string), "also expected logs never arrived") {
		t.Errorf("exit %d, report: %s", r.code, r.stdout)
	}
}

// TestVerifyJSONStdoutIsTheReportAlone: with --format json and no
// --output, the command's stdout goes to stderr, so verify's stdout parses
// as JSON.
func TestVerifyJSONStdoutIsTheReportAlone(t *testing.T) {
	r := verify(t, "stdout", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not the JSON report alone: %v\n%s", err, r.stdout)
	}
	if !strings.Contains(r.stderr, "{not json: the command's own output") {
		t.Errorf("the command's stdout did not reach stderr: %s", r.stderr)
	}
	// Text reports and --output keep the command's stdout on stdout.
	if r := verify(t, "stdout"); !strings.HasPrefix(r.stdout, "{not json") {
		t.Errorf("text: stdout %q", r.stdout)
	}
}

// TestVerifyTextEscapesTerminalControls: names from telemetry reach the
// text report escaped.
func TestVerifyTextEscapesTerminalControls(t *testing.T) {
	r := verify(t, "evil")
	if r.code != ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.ContainsAny(r.stdout, "\x1b\x07") {
		t.Errorf("raw control characters in the report:\n%q", r.stdout)
	}
	if !strings.Contains(r.stdout, `evil\x1b[2J\x1b]0;owned\x07`) {
		t.Errorf("the span name is not shown escaped:\n%s", r.stdout)
	}
}

// TestVerifyForwardNeverShowsThePassword: credentials in --forward are
// refused, and no output shows the password.
func TestVerifyForwardNeverShowsThePassword(t *testing.T) {
	for _, u := range []string{"http://u:s3cret@127.0.0.1:4317", "http://u:s3cret@127.0.0.1:bad", "ftp://u:s3cret@x:1"} {
		r := verify(t, "", "--forward", u, "--", "true")
		if r.code != ExitUsage {
			t.Errorf("%s: exit %d, want 2\n%s", u, r.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "s3cret") {
			t.Errorf("%s: the password is shown:\n%s%s", u, r.stdout, r.stderr)
		}
	}
}

func TestVerifyCommandNotFound(t *testing.T) {
	r := verify(t, "", "--", "doubletake-no-such-command-here")
	if r.code != ExitCommand {
		t.Fatalf("exit %d, want 3\n%s", r.code, r.stderr)
	}
	want := `doubletake: verify: cannot run "doubletake-no-such-command-here": executable file not found in $PATH`
	if strings.TrimSpace(r.stderr) != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if r.stdout != "" {
		t.Errorf("no report expected, got %q", r.stdout)
	}
}

func TestVerifyChildEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://elsewhere:4318/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	r := verify(t, "env", "--allow-empty")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout[:strings.Index(r.stdout, "doubletake verify:")]), "\n")
	slices.Sort(lines)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:") || lines[1] != "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" {
		t.Fatalf("child environment: %q", lines)
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

func TestVerifyUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give a command after --"},
		{[]string{"--format", "xml", "--", "true"}, `--format "xml": want text or json`},
		{[]string{"--max-duplicate-ratio", "1.5", "--", "true"}, "--max-duplicate-ratio 1.5: want a number from 0 to 1"},
		{[]string{"--grace", "0s", "--", "true"}, "--grace 0s: want a duration above 0"},
		{[]string{"--grace", "5s", "--grace-max", "1s", "--", "true"}, "--grace-max 1s: want at least --grace (5s)"},
		{[]string{"--duration", "1s", "--", "true"}, "--duration is for --listen without a command"},
		{[]string{"--listen", "nonsense", "--duration", "1s"}, `--listen "nonsense": want host:port`},
		{[]string{"--forward", "ftp://x:1", "--", "true"}, `--forward: "ftp://x:1": want an http:// or https:// URL`},
		{[]string{"--forward", "http://x:1/p", "--", "true"}, `a gRPC endpoint takes no path`},
		{[]string{"--forward-protocol", "udp", "--", "true"}, `--forward-protocol "udp": want grpc or http`},
		{[]string{"--export-interval", "-1s", "--", "true"}, "--export-interval -1s: want a duration above 0"},
		{[]string{"--no-such-flag", "--", "true"}, "unknown flag: --no-such-flag"},
		{[]string{"--allow", "duplicates", "--", "true"}, `--allow "duplicates": want nested-duplicates`},
		{[]string{"--allow", "nested-duplicates,nested", "--", "true"}, `--allow "nested": want nested-duplicates`},
		{[]string{"--expect", "spans", "--", "true"}, `--expect "spans": want traces, metrics, logs`},
		{[]string{"--expect", "traces", "--allow-empty", "--", "true"}, `--allow-empty and --expect contradict each other`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(append([]string{"verify"}, tc.args...), Streams{Out: &out, Err: &errb})
			if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d stderr %q, want exit 2 and %q", code, errb.String(), tc.want)
			}
		})
	}
}

func TestVerifyPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errb bytes.Buffer
	code := Main([]string{"verify", "--listen", ln.Addr().String(), "--duration", "1s"}, Streams{Out: &out, Err: &errb})
	if code != ExitInternal {
		t.Fatalf("exit %d, want 4\n%s", code, errb.String())
	}
	for _, want := range []string{"address already in use", "choose another --listen address"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, errb.String())
		}
	}
}

// TestVerifyListenAndForward runs verify without a command, forwarding to a
// second receiver, and sends it a malformed request and a good one.
func TestVerifyListenAndForward(t *testing.T) {
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
			var out, errb bytes.Buffer
			done := make(chan int)
			go func() {
				done <- Main([]string{"verify", "--listen", addr, "--duration", "1500ms", "--format", "json",
					"--forward", down.Endpoint(), "--forward-protocol", proto}, Streams{Out: &out, Err: &errb})
			}()
			body, _ := ptraceotlp.NewExportRequestFromTraces(helperSpans()).MarshalProto()
			deadline := time.Now().Add(5 * time.Second)
			for {
				resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
				if err == nil {
					resp.Body.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("verify never listened on %s: %v", addr, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", strings.NewReader("\xff\xff\xff"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("malformed request: status %d, want 400", resp.StatusCode)
			}
			code := <-done
			if code != ExitFindings {
				t.Fatalf("exit %d, want 1 (malformed request)\n%s\n%s", code, out.String(), errb.String())
			}
			var m map[string]any
			if err := json.Unmarshal(out.Bytes(), &m); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if m["verdict"] != "malformed" || m["malformed_requests"] != 1.0 || at(t, m, "forward", "sent") != 1.0 {
				t.Fatalf("report: %s", out.String())
			}
			if !strings.Contains(errb.String(), "1 export request could not be decoded and refused") {
				t.Errorf("stderr: %s", errb.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if got != 3 {
				t.Errorf("forwarded %d spans, want 3", got)
			}
		})
	}
}

// TestVerifyJSONWhenCommandCannotStart: --format json prints a report even
// when the command cannot be started, with its verdict and exit code.
func TestVerifyJSONWhenCommandCannotStart(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-command")
	code, out, errs := runMain("verify", "--format", "json", "--", missing)
	if code != ExitCommand || !strings.Contains(errs, "no-such-command") {
		t.Fatalf("exit %d, stderr %q; want exit 3 naming the command", code, errs)
	}
	var rep struct {
		Verdict       string `json:"verdict"`
		ExitCode      int    `json:"exit_code"`
		VerdictReason string `json:"verdict_reason"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%q", err, out)
	}
	if rep.Verdict != "command-not-started" || rep.ExitCode != ExitCommand || !strings.Contains(rep.VerdictReason, "no-such-command") {
		t.Errorf("report %+v", rep)
	}
}
