package e2e

// End-to-end tests of nested duplicates (double instrumentation: one
// operation recorded as two spans): test/nestedserver, a real net/http
// server whose handler is wrapped twice (or once) with otelhttp from
// opentelemetry-go-contrib, driven by real requests, run under
// `doubletake verify`, and its spans written by the gateway's file
// exporter and read by `doubletake audit otlp`.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

var (
	nestedServerOnce sync.Once
	nestedServerPath string
	nestedServerErr  error
)

// nestedServer builds test/nestedserver once per run, next to the
// doubletake binary (TestMain removes that directory).
func nestedServer(t *testing.T) string {
	t.Helper()
	nestedServerOnce.Do(func() {
		nestedServerPath = filepath.Join(filepath.Dir(binary), "nestedserver")
		cmd := exec.Command("go", "build", "-o", nestedServerPath, "./test/nestedserver")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			nestedServerErr = fmt.Errorf("building test/nestedserver: %w\n%s", err, out)
		}
	})
	if nestedServerErr != nil {
		t.Fatal(nestedServerErr)
	}
	return nestedServerPath
}

// nestedRequests is how many requests each run sends. The handler spends
// 50ms in its child span, so scheduling noise between the two wrappers'
// starts and ends stays well inside the 10% the detector allows.
const nestedRequests = 8

// nestedServerArgs runs nestedserver with every setting given as a flag
// (flags take precedence over any NESTEDSERVER_* in the environment).
func nestedServerArgs(t *testing.T, wrap string, extra ...string) []string {
	return append([]string{nestedServer(t), "-wrap", wrap, "-requests", strconv.Itoa(nestedRequests), "-work", "50ms",
		"-flush", "end", "-propagate=true", "-late-child=false"}, extra...)
}

// nestedProtocolEnv pins the exporter's protocol, whatever the
// environment says.
func nestedProtocolEnv(proto string) []string {
	return []string{"OTEL_EXPORTER_OTLP_PROTOCOL=" + proto, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=" + proto}
}

type scopeJSON struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// nestedFindingJSON is one finding of the nested_duplicates section.
type nestedFindingJSON struct {
	Service       string    `json:"service"`
	Kind          string    `json:"kind"`
	Name          string    `json:"name"`
	InnerName     string    `json:"inner_name"`
	OuterScope    scopeJSON `json:"outer_scope"`
	InnerScope    scopeJSON `json:"inner_scope"`
	MatchedBy     string    `json:"matched_by"`
	Traces        int       `json:"traces"`
	Occurrences   int       `json:"occurrences"`
	AffectedSpans int       `json:"affected_spans"`
	KindSpans     int       `json:"kind_spans"`
	Share         float64   `json:"share"`
	Diagnosis     string    `json:"diagnosis"`
	Examples      []struct {
		TraceID string `json:"trace_id"`
	} `json:"examples"`
}

// nestedJSON is the nested_duplicates section (verify's top level, audit
// otlp's analysis).
type nestedJSON struct {
	Findings []nestedFindingJSON `json:"findings"`
	Pairs    int                 `json:"pairs"`
	Stats    struct {
		Spans   int `json:"spans"`
		Evicted int `json:"evicted"`
	} `json:"stats"`
}

// verifyNestedJSON is the part of verify's report these tests read.
type verifyNestedJSON struct {
	verifyJSON
	Allow  []string   `json:"allow"`
	Reason string     `json:"verdict_reason"`
	Ratio  float64    `json:"duplicate_ratio"`
	Nested nestedJSON `json:"nested_duplicates"`
}

func parseVerifyNested(t *testing.T, r verifyRun) verifyNestedJSON {
	t.Helper()
	var v verifyNestedJSON
	if err := json.Unmarshal([]byte(r.report), &v); err != nil {
		t.Fatalf("the JSON report does not parse: %v\n%s", err, r)
	}
	return v
}

var otelhttpScope = scopeJSON{Name: otelhttp.ScopeName, Version: otelhttp.Version}

// checkDoubled: one finding, otelhttp inside otelhttp, every request's
// server spans affected.
func checkDoubled(t *testing.T, n nestedJSON, service string) {
	t.Helper()
	if len(n.Findings) != 1 {
		t.Fatalf("%d nested findings, want 1: %+v", len(n.Findings), n.Findings)
	}
	f := n.Findings[0]
	if f.Service != service || f.Kind != "SERVER" || f.Name != "POST /rollouts/{id}" || f.InnerName != "" || f.MatchedBy != "name" {
		t.Errorf("finding %+v, want SERVER \"POST /rollouts/{id}\" of %s matched by name", f, service)
	}
	if f.OuterScope != otelhttpScope || f.InnerScope != otelhttpScope {
		t.Errorf("scopes %+v inside %+v, want %+v on both sides", f.InnerScope, f.OuterScope, otelhttpScope)
	}
	if f.Share != 1.0 || f.Traces != nestedRequests || f.Occurrences != nestedRequests ||
		f.AffectedSpans != 2*nestedRequests || f.KindSpans != 2*nestedRequests || n.Pairs != nestedRequests {
		t.Errorf("share %v, traces %d, occurrences %d, affected %d of %d, pairs %d; want 1, %d, %d, %d of %d, %d",
			f.Share, f.Traces, f.Occurrences, f.AffectedSpans, f.KindSpans, n.Pairs,
			nestedRequests, nestedRequests, 2*nestedRequests, 2*nestedRequests, nestedRequests)
	}
	want := fmt.Sprintf(`%[1]s %[2]s inside %[1]s %[2]s: one request recorded twice ("POST /rollouts/{id}", 100%% of server spans): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one`,
		otelhttp.ScopeName, otelhttp.Version)
	if f.Diagnosis != want {
		t.Errorf("diagnosis:\n got %s\nwant %s", f.Diagnosis, want)
	}
	if n.Stats.Evicted != 0 {
		t.Errorf("%d spans evicted", n.Stats.Evicted)
	}
}

func TestNestedVerifyDoubleWrapFails(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			junit := filepath.Join(t.TempDir(), "junit.xml")
			args := append([]string{"--format", "json", "--grace", "300ms", "--junit", junit, "--"}, nestedServerArgs(t, "double")...)
			r := runVerify(t, repoRoot, nestedProtocolEnv(proto), args...)
			if r.code != 1 {
				t.Fatalf("want exit 1:\n%s", r)
			}
			v := parseVerifyNested(t, r)
			// 4 spans a request: the client's, two server spans, the
			// handler's child; none of them twice by id.
			if v.Command.ExitCode != 0 || v.Verdict != "nested-duplicates" || v.Ratio != 0 ||
				v.Spans.Received != 4*nestedRequests || v.Spans.ExtraCopies != 0 || v.Nested.Stats.Spans != 4*nestedRequests {
				t.Fatalf("want a nested-duplicates verdict over %d unique spans:\n%s", 4*nestedRequests, r)
			}
			checkDoubled(t, v.Nested, "nestedserver")
			if len(v.Findings) != 1 || v.Findings[0].Signal != "spans" || v.Findings[0].Diagnosis != "nested-duplicate" ||
				!strings.Contains(v.Findings[0].Line, fmt.Sprintf("%d nested duplicates in %d traces: ", nestedRequests, nestedRequests)) {
				t.Errorf("findings %+v, want one nested-duplicate", v.Findings)
			}
			if !strings.Contains(r.stderr, "doubletake: verify: "+strconv.Itoa(nestedRequests)+" nested duplicates (double instrumentation, 1 finding; --allow nested-duplicates to pass)") {
				t.Errorf("stderr:\n%s", r.stderr)
			}
			x, err := os.ReadFile(junit)
			if err != nil || !strings.Contains(string(x), `<failure message="`+strconv.Itoa(nestedRequests)+` nested duplicates (double instrumentation) in 1 finding"`) {
				t.Errorf("JUnit report (%v):\n%s", err, x)
			}
			if t.Failed() {
				t.Logf("%s", r)
			}
		})
	}
}

func TestNestedVerifySingleWrapClean(t *testing.T) {
	args := append([]string{"--format", "json", "--grace", "300ms", "--"}, nestedServerArgs(t, "single")...)
	r := runVerify(t, repoRoot, nestedProtocolEnv("http/protobuf"), args...)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	v := parseVerifyNested(t, r)
	if v.Verdict != "clean" || v.Spans.Received != 3*nestedRequests || len(v.Findings) != 0 ||
		len(v.Nested.Findings) != 0 || v.Nested.Pairs != 0 || v.Nested.Stats.Spans != 3*nestedRequests {
		t.Fatalf("want a clean run of %d spans, no nested finding:\n%s", 3*nestedRequests, r)
	}
}

func TestNestedVerifyAllowed(t *testing.T) {
	args := append([]string{"--format", "json", "--grace", "300ms", "--allow", "nested-duplicates", "--"}, nestedServerArgs(t, "double")...)
	r := runVerify(t, repoRoot, nestedProtocolEnv("grpc"), args...)
	if r.code != 0 {
		t.Fatalf("want exit 0 with --allow nested-duplicates:\n%s", r)
	}
	v := parseVerifyNested(t, r)
	want := fmt.Sprintf("nothing arrived twice; %d nested duplicates (double instrumentation, 1 finding) allowed by --allow nested-duplicates", nestedRequests)
	if v.Verdict != "clean" || v.Reason != want || len(v.Allow) != 1 || v.Allow[0] != "nested-duplicates" {
		t.Fatalf("verdict %q reason %q allow %v, want clean, %q:\n%s", v.Verdict, v.Reason, v.Allow, want, r)
	}
	// Still reported.
	checkDoubled(t, v.Nested, "nestedserver")
	if t.Failed() {
		t.Logf("%s", r)
	}
}

func TestNestedVerifyUnknownAllow(t *testing.T) {
	r := runVerify(t, repoRoot, nil, "--allow", "nested-duplicates,everything", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, `--allow "everything": want nested-duplicates`) {
		t.Fatalf("want exit 2:\n%s", r)
	}
}

// TestNestedAuditOTLP runs nestedserver, double-wrapped and (as another
// service) single-wrapped, against the real gateway with an OTLP receiver
// and the file exporter, and audits the file.
func TestNestedAuditOTLP(t *testing.T) {
	dir := t.TempDir()
	health, grpcAddr, httpAddr := freePort(t), freePort(t), freePort(t)
	g := startGatewayConfig(t, health, fmt.Sprintf(`
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s/traces.jsonl
    format: json
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`, health, grpcAddr, httpAddr, dir))
	for _, run := range []struct{ wrap, service, proto, endpoint string }{
		{"double", "nestedserver", "http/protobuf", "http://" + httpAddr},
		{"single", "nestedserver-single", "grpc", "http://" + grpcAddr},
	} {
		ctx := ctxTimeout(t, 2*time.Minute)
		cmd := exec.CommandContext(ctx, nestedServer(t), nestedServerArgs(t, run.wrap, "-service", run.service)[1:]...)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "NESTEDSERVER_") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, append(nestedProtocolEnv(run.proto), "OTEL_EXPORTER_OTLP_ENDPOINT="+run.endpoint)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nestedserver -wrap %s: %v\n%s", run.wrap, err, out)
		}
	}
	g.stop(t) // the file exporter writes what it holds

	path := filepath.Join(dir, "traces.jsonl")
	code, stdout, stderr := runAudit(t, "otlp", path, "--format", "json")
	if code != 1 {
		t.Fatalf("audit otlp: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Analysis struct {
			Spans struct {
				Received    int `json:"received"`
				ExtraCopies int `json:"extra_copies"`
			} `json:"spans"`
			Nested   nestedJSON `json:"nested_duplicates"`
			Findings []struct {
				Diagnosis string `json:"diagnosis"`
				Subject   string `json:"subject"`
			} `json:"findings"`
		} `json:"analysis"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	a := rep.Analysis
	if a.Spans.Received != 7*nestedRequests || a.Spans.ExtraCopies != 0 {
		t.Errorf("spans %+v, want %d received, none twice", a.Spans, 7*nestedRequests)
	}
	checkDoubled(t, a.Nested, "nestedserver")
	if len(a.Findings) != 1 || a.Findings[0].Diagnosis != "nested-duplicate" || a.Findings[0].Subject != `service "nestedserver"` {
		t.Errorf("findings %+v, want one nested-duplicate of nestedserver", a.Findings)
	}
	if !strings.Contains(stderr, fmt.Sprintf("1 finding, 0 lines skipped as malformed; %d nested duplicates (double instrumentation)", nestedRequests)) {
		t.Errorf("stderr: %s", stderr)
	}

	html := filepath.Join(t.TempDir(), "audit.html")
	code, stdout, stderr = runAudit(t, "otlp", path, "--html", html)
	if code != 1 || !strings.Contains(stdout, fmt.Sprintf("%d nested duplicates in %d spans, 1 finding", nestedRequests, 7*nestedRequests)) ||
		!strings.Contains(stdout, "  - "+otelhttp.ScopeName+" "+otelhttp.Version+" inside "+otelhttp.ScopeName+" "+otelhttp.Version+": one request recorded twice") {
		t.Errorf("text: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "Nested duplicates: one operation recorded as two spans") {
		t.Errorf("HTML (%v):\n%s", err, b)
	}
	if t.Failed() {
		t.Logf("audit output:\n%s", stdout)
	}
}
