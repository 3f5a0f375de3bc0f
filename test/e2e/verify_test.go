package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tests of `doubletake verify -- CMD` running real programs: the Go SDK
// program in test/goclient and the JS SDK client in test/jsclient.

var (
	goClientOnce sync.Once
	goClientPath string
	goClientErr  error
)

// goClient builds test/goclient once per run, next to the doubletake
// binary (TestMain removes that directory).
func goClient(t *testing.T) string {
	t.Helper()
	goClientOnce.Do(func() {
		goClientPath = filepath.Join(filepath.Dir(binary), "goclient")
		cmd := exec.Command("go", "build", "-o", goClientPath, "./test/goclient")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			goClientErr = fmt.Errorf("building test/goclient: %w\n%s", err, out)
		}
	})
	if goClientErr != nil {
		t.Fatal(goClientErr)
	}
	return goClientPath
}

// verifyRun is one finished `doubletake verify`.
type verifyRun struct {
	code           int
	stdout, stderr string
	report         string // the --output file's content
}

// runVerify runs `doubletake verify --output FILE ARGS...` in dir with env
// added, and returns what it printed and the report file.
func runVerify(t *testing.T, dir string, env []string, args ...string) verifyRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report")
	ctx := ctxTimeout(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, binary, append([]string{"verify", "--output", out}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := verifyRun{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running doubletake verify: %v\nstderr:\n%s", err, r.stderr)
	}
	if b, err := os.ReadFile(out); err == nil {
		r.report = string(b)
	}
	return r
}

func (r verifyRun) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s\n--- stderr:\n%s\n--- report:\n%s", r.code, r.stdout, r.stderr, r.report)
}

// verifyJSON is the part of verify's JSON report the tests check.
type verifyJSON struct {
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exit_code"`
	Command  struct {
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal"`
	} `json:"command"`
	Requests struct {
		Protocols map[string]int `json:"protocols"`
	} `json:"requests"`
	Spans struct {
		Received    int `json:"received"`
		Unique      int `json:"unique"`
		ExtraCopies int `json:"extra_copies"`
		Groups      []struct {
			Service    string `json:"service"`
			Name       string `json:"name"`
			Duplicated int    `json:"duplicated"`
			Copies     []struct {
				Copies int `json:"copies"`
				IDs    int `json:"ids"`
			} `json:"copies"`
		} `json:"groups"`
	} `json:"spans"`
	Metrics struct {
		Points      int `json:"points"`
		ExtraPoints int `json:"extra_points"`
		Overlapping int `json:"overlapping"`
		List        []struct {
			Name    string `json:"name"`
			Overlap bool   `json:"overlap"`
			Writers []struct {
				Start  uint64 `json:"start_time_unix_nano"`
				Points int    `json:"points"`
			} `json:"writers"`
			Prometheus *struct {
				Resets int `json:"resets"`
			} `json:"prometheus"`
		} `json:"streams_list"`
	} `json:"metrics"`
	Logs struct {
		Received    int `json:"received"`
		ExtraCopies int `json:"extra_copies"`
	} `json:"logs"`
	Findings []struct {
		Signal    string `json:"signal"`
		Diagnosis string `json:"diagnosis"`
		Line      string `json:"line"`
	} `json:"findings"`
	Malformed int `json:"malformed_requests"`
}

func parseVerifyJSON(t *testing.T, r verifyRun) verifyJSON {
	t.Helper()
	var v verifyJSON
	if err := json.Unmarshal([]byte(r.report), &v); err != nil {
		t.Fatalf("the JSON report does not parse: %v\n%s", err, r)
	}
	return v
}

// clientCase is one program run under verify.
type clientCase struct {
	name     string
	dir      string
	env      []string
	argv     []string
	rollouts int
	logs     bool // the program also emits one log record per rollout
}

// verifyRollouts iterations of 100ms, metric exports every 250ms, the
// second metric pipeline from 1.2s: the second writer's counter trails the
// first by about 12, far more than the adds between two exports, so every
// step from a first-writer sample to a second-writer sample is a reset.
const verifyRollouts = 30

func goClientCases(t *testing.T, mode string) []clientCase {
	var cs []clientCase
	for _, proto := range []string{"grpc", "http/protobuf"} {
		modes := "traces-" + mode + ",metrics-" + mode + ",logs-" + mode
		cs = append(cs, clientCase{
			name: "go/" + proto, dir: repoRoot, rollouts: verifyRollouts, logs: true,
			env:  []string{"OTEL_EXPORTER_OTLP_PROTOCOL=" + proto},
			argv: []string{goClient(t), "-mode", modes, "-rollouts", strconv.Itoa(verifyRollouts), "-every", "100ms", "-interval", "250ms", "-second", "1200ms", "-batch", "200ms"},
		})
	}
	return cs
}

func jsClientCases(t *testing.T, mode string) []clientCase {
	dir := jsClient(t)
	var cs []clientCase
	for _, proto := range []string{"grpc", "http/protobuf", "http/json"} {
		cs = append(cs, clientCase{
			name: "js/" + proto, dir: dir, rollouts: verifyRollouts,
			env: []string{"CLIENT_PROTOCOL=" + proto, "CLIENT_MODE=traces-" + mode + ",metrics-" + mode,
				"CLIENT_ROLLOUTS=" + strconv.Itoa(verifyRollouts), "CLIENT_ROLLOUT_MS=100", "CLIENT_METRIC_INTERVAL_MS=250",
				"CLIENT_SECOND_DELAY_MS=1200", "CLIENT_SPAN_DELAY_MS=200"},
			argv: []string{"node", "client.mjs"},
		})
	}
	return cs
}

func TestVerifySingleExportIsClean(t *testing.T) {
	cases := append(goClientCases(t, "single"), jsClientCases(t, "single")...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runVerify(t, c.dir, c.env, append([]string{"--format", "json", "--"}, c.argv...)...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			v := parseVerifyJSON(t, r)
			spans := 2 * c.rollouts
			if v.Verdict != "clean" || v.Spans.Received != spans || v.Spans.Unique != spans || v.Spans.ExtraCopies != 0 {
				t.Fatalf("want %d unique spans and a clean verdict:\n%s", spans, r)
			}
			if v.Metrics.Points == 0 || v.Metrics.ExtraPoints != 0 || v.Metrics.Overlapping != 0 || len(v.Findings) != 0 {
				t.Fatalf("want metric points and no findings:\n%s", r)
			}
			if c.logs && (v.Logs.Received != c.rollouts || v.Logs.ExtraCopies != 0) {
				t.Fatalf("want %d log records, none twice:\n%s", c.rollouts, r)
			}
			proto := strings.TrimPrefix(strings.TrimPrefix(c.name, "go/"), "js/")
			if len(v.Requests.Protocols) != 1 || v.Requests.Protocols[proto] == 0 {
				t.Errorf("requests arrived over %v, want only %s", v.Requests.Protocols, proto)
			}
		})
	}
}

var resetsRE = regexp.MustCompile(`Prometheus: \d+ samples stored in arrival order, \d+ refused \(timestamp not after the previous\), resets\(\) = (\d+)`)

// TestVerifyDoubleExportFails runs its cases one at a time (the metric
// checks depend on export timing; parallel SDK processes on a small machine
// starve each other).
func TestVerifyDoubleExportFails(t *testing.T) {
	cases := append(goClientCases(t, "double"), jsClientCases(t, "double")...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			junit := filepath.Join(t.TempDir(), "junit.xml")
			r := runVerify(t, c.dir, c.env, append([]string{"--format", "json", "--junit", junit, "--"}, c.argv...)...)
			if r.code != 1 {
				t.Fatalf("want exit 1:\n%s", r)
			}
			v := parseVerifyJSON(t, r)
			spans := 2 * c.rollouts
			// Every span arrived twice; the report names them by service
			// and span name.
			if v.Verdict != "duplicates" || v.Spans.Received != 2*spans || v.Spans.Unique != spans || v.Spans.ExtraCopies != spans {
				t.Fatalf("want every one of %d spans twice:\n%s", spans, r)
			}
			names := map[string]bool{}
			for _, g := range v.Spans.Groups {
				if g.Duplicated == c.rollouts && len(g.Copies) == 1 && g.Copies[0].Copies == 2 && g.Copies[0].IDs == c.rollouts {
					names[g.Name] = true
				}
			}
			if !names["rollout"] || !names["verify"] {
				t.Fatalf("want spans rollout and verify each duplicated %d times:\n%s", c.rollouts, r)
			}
			// The counter stream has two writers that overlap, and
			// Prometheus would count resets on it.
			var resets int
			found := false
			for _, s := range v.Metrics.List {
				if s.Name == "rollouts" && s.Overlap && len(s.Writers) == 2 && s.Prometheus != nil {
					found, resets = true, s.Prometheus.Resets
				}
			}
			if !found || resets < 1 {
				t.Fatalf("want stream rollouts with 2 overlapping writers and resets:\n%s", r)
			}
			diag := map[string]string{}
			for _, f := range v.Findings {
				diag[f.Signal] = f.Diagnosis
			}
			// One process exports everything twice: its doubled spans and
			// its two metric writers have one cause, stated first, though
			// the resource has no service.instance.id.
			if diag["spans"] != "two-exporters" || diag["metrics"] != "two-exporters" {
				t.Errorf("diagnoses %v, want spans and metrics two-exporters (one cause)", diag)
			}
			for _, f := range v.Findings {
				if f.Signal == "metrics" && !strings.Contains(f.Line, ": the same cause as its doubled spans, two exporters in one process") {
					t.Errorf("the metric finding does not lead with the common cause: %s", f.Line)
				}
			}
			if c.logs && (v.Logs.Received != 2*c.rollouts || v.Logs.ExtraCopies != c.rollouts || diag["logs"] != "two-exporters") {
				t.Errorf("want %d log records twice, diagnosed two-exporters:\n%s", c.rollouts, r)
			}
			x, err := os.ReadFile(junit)
			if err != nil || !strings.Contains(string(x), `<failure message="`+strconv.Itoa(spans)+` of `+strconv.Itoa(2*spans)+` spans are extra copies"`) {
				t.Errorf("JUnit report (%v):\n%s", err, x)
			}
		})
	}
}

// TestVerifyDoubleExportTextReport checks the text report of one double
// export per SDK: it names the duplicated spans, the stream with two
// writers and its resets.
func TestVerifyDoubleExportTextReport(t *testing.T) {
	cases := []clientCase{goClientCases(t, "double")[1], jsClientCases(t, "double")[2]}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runVerify(t, c.dir, c.env, append([]string{"--"}, c.argv...)...)
			if r.code != 1 {
				t.Fatalf("want exit 1:\n%s", r)
			}
			n := strconv.Itoa(c.rollouts)
			for _, row := range [][]string{
				{"rollout", strconv.Itoa(2 * c.rollouts), n, n, n, n + "×2"},
				{"verify", strconv.Itoa(2 * c.rollouts), n, n, n, n + "×2"},
			} {
				if !hasFields(r.report, row...) {
					t.Errorf("no row %v in the span table", row)
				}
			}
			if !strings.Contains(r.report, "stream rollouts (sum/cumulative/monotonic, unit 1)") ||
				!strings.Contains(r.report, ": 2 writers overlap") {
				t.Errorf("the report does not name stream rollouts with 2 overlapping writers")
			}
			m := resetsRE.FindAllStringSubmatch(r.report, -1)
			if len(m) == 0 {
				t.Fatalf("no resets line:\n%s", r)
			}
			if k, _ := strconv.Atoi(m[0][1]); k < 1 {
				t.Errorf("resets() = %d, want at least 1", k)
			}
			for _, want := range []string{"two exporters in one process", "the same cause as its doubled spans", "verdict: FAIL (exit 1)"} {
				if !strings.Contains(r.report, want) {
					t.Errorf("report lacks %q", want)
				}
			}
			if t.Failed() {
				t.Logf("%s", r)
			}
		})
	}
}

// hasFields reports whether a line of text has the fields want in a row,
// after its first (service) column.
func hasFields(text string, want ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) > len(want) && slicesEqual(f[1:1+len(want)], want) {
			return true
		}
	}
	return false
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestVerifyCommandNotFound(t *testing.T) {
	r := runVerify(t, repoRoot, nil, "--", "doubletake-no-such-command")
	want := `doubletake: verify: cannot run "doubletake-no-such-command": executable file not found in $PATH`
	if r.code != 3 || strings.TrimSpace(r.stderr) != want {
		t.Fatalf("want exit 3 and %q:\n%s", want, r)
	}
}

func TestVerifyCommandKilledBySignal(t *testing.T) {
	sh, err := lookPath("sh")
	requireDep(t, err, "sh")
	r := runVerify(t, repoRoot, nil, "--format", "json", "--", sh, "-c", "kill -KILL $$")
	if r.code != 3 || !strings.Contains(r.stderr, "doubletake: verify: sh was killed by signal killed") {
		t.Fatalf("want exit 3 and a message naming the signal:\n%s", r)
	}
	v := parseVerifyJSON(t, r)
	if v.Verdict != "command-failed" || v.Command.Signal != "killed" || v.Command.ExitCode != -1 {
		t.Fatalf("report: %s", r)
	}
}

func TestVerifyMalformedOTLP(t *testing.T) {
	r := runVerify(t, repoRoot, nil, "--format", "json", "--", goClient(t), "-mode", "malformed")
	if r.code != 1 || !strings.Contains(r.stderr, "doubletake: verify: 1 export request could not be decoded and refused") {
		t.Fatalf("want exit 1 and a message about the malformed request:\n%s", r)
	}
	if !strings.Contains(r.stderr, "goclient: malformed request refused with 400 Bad Request") {
		t.Errorf("the client should see a 400:\n%s", r)
	}
	if v := parseVerifyJSON(t, r); v.Verdict != "malformed" || v.Malformed != 1 {
		t.Fatalf("report: %s", r)
	}
}

func TestVerifyPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := runVerify(t, repoRoot, nil, "--listen", ln.Addr().String(), "--", "true")
	if r.code != 4 || !strings.Contains(r.stderr, "address already in use") || !strings.Contains(r.stderr, "choose another --listen address") {
		t.Fatalf("want exit 4 and a clear message:\n%s", r)
	}
}

func TestVerifyUsageError(t *testing.T) {
	r := runVerify(t, repoRoot, nil)
	if r.code != 2 || !strings.Contains(r.stderr, "give a command after --") {
		t.Fatalf("want exit 2:\n%s", r)
	}
}

// TestVerifyPassesStdinAndSignals: CMD reads verify's stdin, and SIGINT sent
// to verify reaches CMD, whose exit status verify reports.
func TestVerifyPassesStdinAndSignals(t *testing.T) {
	sh, err := lookPath("sh")
	requireDep(t, err, "sh")
	ctx := ctxTimeout(t, time.Minute)
	script := `trap 'echo interrupted; exit 42' INT; read line; echo "got $line"; while :; do sleep 0.05; done`
	cmd := exec.CommandContext(ctx, binary, "verify", "--grace", "100ms", "--", sh, "-c", script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "hello\n"); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdoutPipe)
	line, err := rd.ReadString('\n')
	if err != nil || line != "got hello\n" {
		t.Fatalf("CMD's first line %q (%v), want %q; stderr:\n%s", line, err, "got hello\n", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(rd)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("verify: %v, want exit 3\nstdout:\n%s\nstderr:\n%s", err, rest, stderr.String())
	}
	if !strings.HasPrefix(string(rest), "interrupted\n") || !strings.Contains(stderr.String(), "sh exited with status 42") {
		t.Fatalf("CMD did not get SIGINT:\nstdout:\n%s\nstderr:\n%s", rest, stderr.String())
	}
}

// TestVerifyListenUntilSIGINT: without CMD, verify receives from a running
// program until SIGINT and then reports.
func TestVerifyListenUntilSIGINT(t *testing.T) {
	addr := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.CommandContext(ctx, binary, "verify", "--listen", addr, "--duration", "2m", "--format", "json", "--output", out)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "verify to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	client := exec.CommandContext(ctx, goClient(t), "-mode", "traces-single", "-rollouts", "5", "-every", "10ms")
	client.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+addr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	if b, err := client.CombinedOutput(); err != nil {
		t.Fatalf("client: %v\n%s", err, b)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("verify: %v, want exit 0\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	v := parseVerifyJSON(t, verifyRun{report: string(b)})
	if v.Verdict != "clean" || v.Spans.Received != 10 || v.Requests.Protocols["grpc"] == 0 {
		t.Fatalf("report:\n%s\nstderr:\n%s", b, stderr.String())
	}
	if !strings.Contains(stderr.String(), "receiving OTLP (gRPC, HTTP/protobuf, HTTP/JSON) on http://"+addr) {
		t.Errorf("stderr: %s", stderr.String())
	}
}
