package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// These tests are about the command: its flags, where the report goes and
// the exit status of each verdict. The engine's own tests are in
// internal/verify.

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
	post := func(contentType string, body []byte) int {
		resp, err := http.Post(endpoint+"/v1/traces", contentType, bytes.NewReader(body))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 10
		}
		resp.Body.Close()
		return 0
	}
	send := func(n int, name string) int {
		body, _ := ptraceotlp.NewExportRequestFromTraces(helperSpans(name)).MarshalJSON()
		for range n {
			if code := post("application/json", body); code != 0 {
				return code
			}
		}
		return 0
	}
	switch mode {
	case "once":
		return send(1, "op")
	case "twice":
		return send(2, "op")
	case "evil":
		return send(2, "evil\x1b[2J\x1b]0;owned\x07")
	case "malformed":
		if code := send(1, "op"); code != 0 {
			return code
		}
		return post("application/x-protobuf", []byte("\xff\xff\xff"))
	case "exit7":
		send(1, "op")
		return 7
	case "none":
		fmt.Println("exported nothing")
		return 0
	case "stdout":
		fmt.Println("{not json: the command's own output")
		return send(1, "op")
	}
	return 99
}

// helperSpans are three spans of service helper named name.
func helperSpans(name string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "helper")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range 3 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1, byte(i + 1)})
		sp.SetSpanID(pcommon.SpanID{2, byte(i + 1)})
		sp.SetName(name)
		sp.SetStartTimestamp(1)
		sp.SetEndTimestamp(2)
	}
	return td
}

type result struct {
	code           int
	stdout, stderr string
}

// verifyMain runs `doubletake verify ARGS...` in process; helperMode, when
// set, is appended as the command (this test binary in that mode).
func verifyMain(t *testing.T, helperMode string, args ...string) result {
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

// TestVerifyExitStatus: each verdict's exit status, in the JSON report
// and as the process's, with the verdict on stderr when it fails.
func TestVerifyExitStatus(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		args    []string
		code    int
		verdict string
		stderr  string // a line stderr must hold
	}{
		{"once", nil, ExitOK, "clean", ""},
		{"twice", nil, ExitFindings, "duplicates", "doubletake: verify: duplicate ratio 0.5 exceeds --max-duplicate-ratio 0\n"},
		{"twice", []string{"--max-duplicate-ratio", "0.5"}, ExitOK, "clean", ""},
		{"malformed", nil, ExitFindings, "malformed", "doubletake: verify: 1 export request could not be decoded and refused (see the client's errors)\n"},
		{"exit7", nil, ExitCommand, "command-failed", "exited with status 7"},
		{"exit7", []string{"--ignore-exit"}, ExitOK, "clean", ""},
		{"none", nil, ExitNothing, "nothing-received", "doubletake: verify: nothing arrived: no span, metric point or log record in 0 requests"},
		{"none", []string{"--allow-empty"}, ExitOK, "clean", ""},
		{"once", []string{"--expect", "traces,metrics"}, ExitNothing, "expected-signal-missing", "doubletake: verify: expected metrics never arrived (--expect traces,metrics)\n"},
		{"twice", []string{"--expect", "logs"}, ExitFindings, "duplicates", "; also expected logs never arrived (--expect logs)\n"},
	} {
		t.Run(tc.mode+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			r := verifyMain(t, tc.mode, append([]string{"--format", "json"}, tc.args...)...)
			m := jsonReport(t, r)
			if r.code != tc.code || m["exit_code"] != float64(tc.code) || m["verdict"] != tc.verdict {
				t.Fatalf("exit %d, report exit_code %v verdict %v; want %d, %s\nstderr:\n%s", r.code, m["exit_code"], m["verdict"], tc.code, tc.verdict, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
			if tc.code == ExitOK && strings.Contains(r.stderr, "doubletake: verify: ") {
				t.Errorf("a pass says something on stderr:\n%s", r.stderr)
			}
			// The text report ends with the same exit status.
			r = verifyMain(t, tc.mode, tc.args...)
			if want := fmt.Sprintf(" (exit %d): ", tc.code); r.code != tc.code || !strings.Contains(r.stdout, "\nverdict: ") || !strings.Contains(r.stdout, want) {
				t.Errorf("text: exit %d, want %d and %q in:\n%s", r.code, tc.code, want, r.stdout)
			}
		})
	}
}

// TestVerifyJSONStdoutIsTheReportAlone: with --format json and no
// --output, the command's stdout goes to stderr, so verify's stdout parses
// as JSON.
func TestVerifyJSONStdoutIsTheReportAlone(t *testing.T) {
	r := verifyMain(t, "stdout", "--format", "json")
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
	if r := verifyMain(t, "stdout"); !strings.HasPrefix(r.stdout, "{not json") {
		t.Errorf("text: stdout %q", r.stdout)
	}
	out := filepath.Join(t.TempDir(), "r.json")
	if r := verifyMain(t, "stdout", "--format", "json", "--output", out); !strings.HasPrefix(r.stdout, "{not json") {
		t.Errorf("--output: stdout %q", r.stdout)
	}
}

// TestVerifyTextEscapesTerminalControls: names from telemetry reach the
// text report escaped.
func TestVerifyTextEscapesTerminalControls(t *testing.T) {
	r := verifyMain(t, "evil")
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
		r := verifyMain(t, "", "--forward", u, "--", "true")
		if r.code != ExitUsage {
			t.Errorf("%s: exit %d, want 2\n%s", u, r.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "s3cret") {
			t.Errorf("%s: the password is shown:\n%s%s", u, r.stdout, r.stderr)
		}
	}
}

func TestVerifyCommandNotFound(t *testing.T) {
	r := verifyMain(t, "", "--", "doubletake-no-such-command-here")
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
		{[]string{"--listen", "", "--duration", "1s"}, `--listen "": want host:port`},
		{[]string{"--forward", "ftp://x:1", "--", "true"}, `--forward: "ftp://x:1": want an http:// or https:// URL`},
		{[]string{"--forward", "http://x:1/p", "--", "true"}, `a gRPC endpoint takes no path`},
		{[]string{"--forward-protocol", "udp", "--", "true"}, `--forward-protocol "udp": want grpc or http`},
		{[]string{"--export-interval", "-1s", "--", "true"}, "--export-interval -1s: want a duration above 0"},
		{[]string{"--no-such-flag", "--", "true"}, "unknown flag: --no-such-flag"},
		{[]string{"--allow", "duplicates", "--", "true"}, `--allow "duplicates": want nested-duplicates`},
		{[]string{"--allow", "nested-duplicates,nested", "--", "true"}, `--allow "nested": want nested-duplicates`},
		{[]string{"--expect", "spans", "--", "true"}, `--expect "spans": want traces, metrics, logs`},
		{[]string{"--expect", "traces", "--allow-empty", "--", "true"}, `--allow-empty and --expect contradict each other`},
		{[]string{"--scan-timeout", "0s", "--", "true"}, "--scan-timeout 0s: want a duration above 0"},
		{[]string{"--scan-max-files", "0", "--", "true"}, "--scan-max-files 0: want a number above 0"},
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

// TestVerifyHazardsFile: --hazards reaches the scan after a double
// export, with scan's loader: a file that does not validate is a usage
// error before the command runs.
func TestVerifyHazardsFile(t *testing.T) {
	dir := t.TempDir()
	sp := filepath.Join(dir, "env", "lib", "python3.12", "site-packages", "otelwrap-2.1.0.dist-info")
	writeFile(t, filepath.Join(dir, "env", "pyvenv.cfg"), "home = /usr/bin\n")
	writeFile(t, filepath.Join(sp, "METADATA"), "Metadata-Version: 2.4\nName: otelwrap\nVersion: 2.1.0\n\n")
	hz := writeFile(t, filepath.Join(t.TempDir(), "extra.yaml"), `hazards:
  - package: otelwrap
    affected: ">=2.0,<2.2"
    exclusion: "<2.0"
    effect: otelwrap 2.0 and 2.1 add an exporter.
    summary: add a span exporter of its own
    reference: example/otelwrap#1
`)
	t.Chdir(dir)
	t.Setenv("VIRTUAL_ENV", "")
	r := verifyMain(t, "twice", "--hazards", hz)
	want := "\n  - otelwrap 2.1.0 is installed in env (known to add a span exporter of its own): install a release that satisfies otelwrap<2.0 (pip install 'otelwrap<2.0') and restart what runs from this environment\n"
	if r.code != ExitFindings || !strings.Contains(r.stdout, want) {
		t.Errorf("exit %d, the report lacks %q:\n%s", r.code, want, r.stdout)
	}

	bad := writeFile(t, filepath.Join(t.TempDir(), "bad.yaml"), "hazards:\n  - package: x\n")
	r = verifyMain(t, "stdout", "--hazards", bad)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "verify: --hazards: invalid hazards file:") || !strings.Contains(r.stderr, "hazards[0] (x): affected: required") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "not json") {
		t.Errorf("the command ran despite the usage error")
	}
}

// TestScanAndVerifyGiveTheSameAdvice: run from a tree with an affected
// release installed, locked and admitted, verify's line for each ends with
// the fix scan prints under the same finding.
func TestScanAndVerifyGiveTheSameAdvice(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".venv", "pyvenv.cfg"), "home = /usr/bin\n")
	writeFile(t, filepath.Join(dir, ".venv", "lib", "python3.12", "site-packages", "fastapi-0.142.2.dist-info", "METADATA"),
		"Metadata-Version: 2.4\nName: fastapi\nVersion: 0.142.2\n\n")
	writeFile(t, filepath.Join(dir, "uv.lock"), "version = 1\n\n[[package]]\nname = \"fastapi\"\nversion = \"0.142.1\"\n")
	writeFile(t, filepath.Join(dir, "pyproject.toml"), "[project]\nname = \"app\"\nversion = \"1\"\ndependencies = [\"fastapi>=0.135\"]\n")
	t.Chdir(dir)
	t.Setenv("VIRTUAL_ENV", "")

	code, out, errOut := runScan(t, ".")
	if code != ExitFindings {
		t.Fatalf("scan: exit %d\n%s", code, errOut)
	}
	var fixes []string // scan's fix lines, unwrapped
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  fix:    "):
			fixes = append(fixes, strings.TrimPrefix(line, "  fix:    "))
		case len(fixes) > 0 && strings.HasPrefix(line, "          "):
			fixes[len(fixes)-1] += " " + strings.TrimSpace(line)
		}
	}
	r := verifyMain(t, "twice", "--format", "json")
	var rep struct {
		ReleaseScan struct {
			Lines []string `json:"lines"`
		} `json:"release_scan"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	lines := rep.ReleaseScan.Lines
	if len(fixes) != 3 || len(lines) != 3 {
		t.Fatalf("scan's fixes %q, verify's lines %q; want 3 of each", fixes, lines)
	}
	for _, line := range lines {
		matched := false
		for _, fix := range fixes {
			matched = matched || strings.HasSuffix(line, "): "+fix)
		}
		if !matched {
			t.Errorf("verify's line ends with none of scan's fixes:\n  %s\nfixes:\n  %s", line, strings.Join(fixes, "\n  "))
		}
	}
}
