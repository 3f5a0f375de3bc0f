package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Tests that verify, audit and run say only what is true (issue 15) and
// keep secrets and terminals safe (issue 12, point 7).

// TestVerifyNothingReceived: a command that exports nothing is not a
// pass: exit 5 with its own verdict, unless --allow-empty; a signal
// --expect names that never arrives fails the same way.
func TestVerifyNothingReceived(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "junit.xml")
	r := runVerify(t, repoRoot, nil, "--format", "json", "--junit", junit, "--", "true")
	if r.code != 5 {
		t.Fatalf("verify -- true: want exit 5:\n%s", r)
	}
	v := parseVerifyJSON(t, r)
	if v.Verdict != "nothing-received" || v.ExitCode != 5 {
		t.Errorf("verdict %q exit_code %d, want nothing-received 5:\n%s", v.Verdict, v.ExitCode, r)
	}
	if x, err := os.ReadFile(junit); err != nil || !strings.Contains(string(x), `<failure message="nothing arrived`) {
		t.Errorf("JUnit report (%v):\n%s", err, x)
	}
	if r := runVerify(t, repoRoot, nil, "--", "true"); r.code != 5 || !strings.Contains(r.report, "verdict: NOTHING RECEIVED (exit 5)") {
		t.Errorf("text report:\n%s", r)
	}
	if r := runVerify(t, repoRoot, nil, "--allow-empty", "--", "true"); r.code != 0 {
		t.Errorf("--allow-empty: want exit 0:\n%s", r)
	}
	// The Go SDK program exporting traces only, with --expect traces,metrics.
	client := goClient(t)
	r = runVerify(t, repoRoot, nil, "--format", "json", "--expect", "traces,metrics", "--",
		client, "-mode", "traces-single", "-rollouts", "3", "-every", "50ms", "-batch", "50ms")
	var m struct {
		Verdict string   `json:"verdict"`
		Missing []string `json:"missing"`
		Spans   struct {
			Received int `json:"received"`
		} `json:"spans"`
	}
	if err := json.Unmarshal([]byte(r.report), &m); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	if r.code != 5 || m.Spans.Received != 6 || m.Verdict != "expected-signal-missing" || len(m.Missing) != 1 || m.Missing[0] != "metrics" {
		t.Errorf("6 spans and no metrics with --expect traces,metrics: want exit 5, missing [metrics]:\n%s", r)
	}
}

// TestVerifyJSONPipedToJQ: 'verify --format json -- CMD | jq' parses,
// though CMD writes to its stdout: CMD's stdout goes to verify's stderr.
func TestVerifyJSONPipedToJQ(t *testing.T) {
	jq, err := lookPath("jq")
	requireDep(t, err, "jq")
	client := goClient(t)
	script := strconv.Quote(binary) + ` verify --format json -- sh -c 'echo "starting the app (not JSON)"; exec "$0" -mode traces-single,metrics-single -rollouts 3 -every 50ms -interval 100ms -batch 50ms' ` +
		strconv.Quote(client) + ` | ` + strconv.Quote(jq) + ` -e -r .verdict`
	ctx := ctxTimeout(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("verify | jq: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "clean" {
		t.Errorf("jq .verdict = %q, want clean\nstderr:\n%s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "starting the app (not JSON)") {
		t.Errorf("the command's stdout did not reach stderr:\n%s", stderr.String())
	}
}

// otlpLine is one OTLP-JSON export request of spans of service svc, as
// the collector's file exporter writes it.
func otlpLine(t *testing.T, svc string, name string, trace byte, spans int) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", svc)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("app")
	for i := range spans {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{trace, 1})
		sp.SetSpanID(pcommon.SpanID{trace, byte(i + 1)})
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + uint64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + uint64(i)*1000 + 500))
	}
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAuditOTLPFileFacts: a gzip file with every line repeated is
// diagnosed from what a file holds (requests and lines), never from
// connections or delays; a malformed line is counted and reported and the
// exit status follows the findings unless --strict.
func TestAuditOTLPFileFacts(t *testing.T) {
	dir := t.TempDir()
	var plain bytes.Buffer
	for i := range 3 {
		line := otlpLine(t, "shop", "checkout", byte(i+1), 4)
		plain.Write(line)
		plain.WriteByte('\n')
		plain.Write(line) // a re-sent batch
		plain.WriteByte('\n')
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(plain.Bytes())
	_ = zw.Close()
	repeated := filepath.Join(dir, "traces.jsonl.gz")
	if err := os.WriteFile(repeated, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAudit(t, "otlp", repeated)
	if code != 1 {
		t.Fatalf("repeated lines: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		repeated + ": 6 export requests read (OTLP-JSON lines, gzip)",
		"3 requests repeated an earlier request item for item (e.g. " + repeated + " line 2 repeats " + repeated + " line 1 item for item): a re-sent batch, or two exporters that batched alike (the source records no arrival times to tell them apart)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	for _, not := range []string{"connection", "after the first", "DELAY", "export interval"} {
		if strings.Contains(stdout, not) {
			t.Errorf("a file audit speaks of %q:\n%s", not, stdout)
		}
	}

	// One malformed line among clean ones.
	var mixed bytes.Buffer
	mixed.Write(otlpLine(t, "shop", "checkout", 1, 40))
	mixed.WriteString("\n{\"resourceSpans\":[{\"truncated\n")
	mixed.Write(otlpLine(t, "shop", "checkout", 2, 4))
	mixed.WriteByte('\n')
	bad := filepath.Join(dir, "mixed.jsonl")
	if err := os.WriteFile(bad, mixed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runAudit(t, "otlp", bad)
	if code != 0 {
		t.Errorf("a clean file with a malformed line: exit %d, want 0\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "0 findings, 1 line skipped as malformed") ||
		!strings.Contains(stdout, bad+": 2 export requests read (OTLP-JSON lines, uncompressed); 1 malformed line skipped: not OTLP-JSON") ||
		!strings.Contains(stdout, "problem: "+bad+":2:") {
		t.Errorf("the malformed line is not counted and cited:\n%s\n%s", stdout, stderr)
	}
	if code, _, stderr := runAudit(t, "otlp", "--strict", bad); code != 1 || !strings.Contains(stderr, "1 line could not be read as OTLP-JSON (--strict)") {
		t.Errorf("--strict: exit %d, want 1\n%s", code, stderr)
	}
}

// TestAuditEscapesTerminalControls: a span name carrying ESC[2J (clear
// the screen) is printed escaped, never raw.
func TestAuditEscapesTerminalControls(t *testing.T) {
	p := filepath.Join(t.TempDir(), "traces.jsonl")
	line := otlpLine(t, "shop\x1b]0;owned\x07", "evil\x1b[2J\nname", 1, 2)
	if err := os.WriteFile(p, append(append(append(line, '\n'), line...), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAudit(t, "otlp", p)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	if strings.ContainsAny(stdout+stderr, "\x1b\x07") {
		t.Errorf("raw control characters reach the terminal:\n%q", stdout)
	}
	if !strings.Contains(stdout, `evil\x1b[2J\x0aname`) {
		t.Errorf("the span name is not shown escaped:\n%s", stdout)
	}
}

// TestCredentialsNeverPrinted: verify --forward and run --upstream refuse
// URLs with credentials, and no output (stdout, stderr, the gateway's log)
// shows the password.
func TestCredentialsNeverPrinted(t *testing.T) {
	const pw = "s3cretPassw0rd"
	for _, args := range [][]string{
		{"verify", "--forward", "http://u:" + pw + "@127.0.0.1:4317", "--", "true"},
		{"verify", "--forward", "http://u:" + pw + "@127.0.0.1:bad port", "--", "true"},
		{"verify", "--forward", "https://u:" + pw + "@127.0.0.1:4318/otlp", "--forward-protocol", "http", "--", "true"},
		{"run", "--upstream", "https://u:" + pw + "@collector:4317", "--data-dir", t.TempDir()},
		{"run", "--upstream", "http://u:" + pw + "@collector:4318", "--upstream-protocol", "http", "--data-dir", t.TempDir()},
		{"run", "default-config", "--upstream", "https://u:" + pw + "@collector:4317"},
	} {
		// A refusal is immediate; a gateway that accepted the URL would
		// run until killed.
		ctx := ctxTimeout(t, 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
		if ctx.Err() != nil {
			t.Errorf("%v: still running after 30s: the URL with credentials was accepted", args[:2])
		}
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (refused)\n%s", args[:2], r.code, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, pw) {
			t.Errorf("%v: the password is printed:\n%s%s", args[:2], r.stdout, r.stderr)
		}
		if !strings.Contains(strings.Join(args, " "), "bad port") && !strings.Contains(r.stderr, "credentials in the URL are refused") {
			t.Errorf("%v: no clear refusal:\n%s", args[:2], r.stderr)
		}
	}
}

// TestDefaultConfigLogsNoWarning: the embedded default starts, takes
// telemetry, summarises it, says in the next summary that nothing more
// arrived, and stops without one warn line in its log.
func TestDefaultConfigLogsNoWarning(t *testing.T) {
	d := startDefault(t)
	if code, body := post(t, "http://"+d.http+"/v1/traces", "application/json", string(otlpLine(t, "shop", "checkout", 1, 3))); code != 200 {
		t.Fatalf("export: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "a summary line of the traffic, then an idle one", func() bool {
		log := d.g.stderr.String()
		i := strings.Index(log, summaryLine)
		return i >= 0 && strings.Contains(log[i:], summaryIdleLine)
	})
	d.g.stop(t)
	log := d.g.stderr.String()
	if w := grepLines(log, "\twarn\t"); w != "" {
		t.Errorf("the default config logs warnings:\n%s", w)
	}
	if strings.Contains(log, "deprecated") {
		t.Errorf("the default config logs a deprecation:\n%s", grepLines(log, "deprecated"))
	}
}

// TestRunSecondGatewayOneLine: a second gateway on the same ports says so
// in one line, without a Go stack trace.
func TestRunSecondGatewayOneLine(t *testing.T) {
	d := startDefault(t)
	r := runCLI(t, append([]string{"run"}, d.args...)...)
	if r.code != 4 {
		t.Errorf("exit %d, want 4", r.code)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "is already in use (another gateway running?)") || strings.Contains(r.stderr, ".go:") {
		t.Errorf("want one clear line, got:\n%s", r.stderr)
	}
}

// TestWarningsCarryTheirPipeline: the embedded default's duplicate-span
// warning names the traces pipeline (the dedup processor is shared by all
// three), and its summary, which covers every pipeline, names none.
func TestWarningsCarryTheirPipeline(t *testing.T) {
	d := startDefault(t)
	sendDoubled(t, d.http, 20)
	waitFor(t, 30*time.Second, "a duplicate-span warning and a summary", func() bool {
		log := d.g.stderr.String()
		return strings.Contains(log, "duplicate spans received") && strings.Contains(log, summaryLine)
	})
	d.g.stop(t)
	log := d.g.stderr.String()
	for _, w := range strings.Split(grepLines(log, "duplicate spans received"), "\n") {
		if !strings.Contains(w, `"otelcol.pipeline.id": "traces"`) {
			t.Errorf("a span warning without the traces pipeline: %s", w)
		}
	}
	for _, s := range strings.Split(grepLines(log, "dedup summary"), "\n") {
		if strings.Contains(s, "otelcol.pipeline.id") {
			t.Errorf("the summary covers every pipeline but names one: %s", s)
		}
	}
}
