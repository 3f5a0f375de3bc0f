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

	"github.com/doubletake/doubletake/internal/nested"
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
// 50ms in its child span, so that on an idle machine the two wrappers'
// spans differ by far less than the 10% the detector allows; on a loaded
// one they may not (nestedRun.pairs).
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

// nestedRun is nestedserver's summary line: the trace, start and end of
// every SERVER span it exported.
type nestedRun struct {
	Requests    int `json:"requests"`
	ServerSpans []struct {
		TraceID string `json:"trace_id"`
		Start   int64  `json:"start"`
		End     int64  `json:"end"`
	} `json:"server_spans"`
}

// parseNestedRun reads nestedserver's summary line from its output.
func parseNestedRun(t *testing.T, out string) nestedRun {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, `{"requests":`) {
			continue
		}
		var r nestedRun
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("nestedserver's summary line: %v\n%s", err, line)
		}
		return r
	}
	t.Fatalf("no summary line from nestedserver in:\n%s", out)
	return nestedRun{}
}

// pairs counts the requests whose two server spans the detector's rule
// (docs/nested.md), with its default tolerances, takes for one request
// recorded twice: one span lies within the other, give or take skew,
// and lasts at least min_coverage of it, less skew. The outer span also
// times whatever kept nestedserver from a CPU between its two wrappers:
// on a loaded machine a request can fall outside the rule, and the
// detector must then not count it. The tests expect what the rule says
// of the spans as they were exported, not an idle machine.
func (r nestedRun) pairs() int {
	type span struct{ start, end int64 }
	byTrace := map[string][]span{}
	for _, s := range r.ServerSpans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], span{s.Start, s.End})
	}
	skew := nested.DefaultSkew.Nanoseconds()
	covers := func(p, c span) bool {
		return c.start >= p.start-skew && c.end <= p.end+skew &&
			float64(c.end-c.start)+float64(skew) >= nested.DefaultMinCoverage*float64(p.end-p.start)
	}
	n := 0
	for _, s := range byTrace {
		if len(s) == 2 && (covers(s[0], s[1]) || covers(s[1], s[0])) {
			n++
		}
	}
	return n
}

// nestedPairs reads how many of a double-wrapped run's requests make a
// pair, and says so when the machine's load kept some from it.
func nestedPairs(t *testing.T, out string) int {
	t.Helper()
	r := parseNestedRun(t, out)
	if r.Requests != nestedRequests || len(r.ServerSpans) != 2*nestedRequests {
		t.Fatalf("nestedserver sent %d requests and exported %d server spans, want %d and %d:\n%s",
			r.Requests, len(r.ServerSpans), nestedRequests, 2*nestedRequests, out)
	}
	p := r.pairs()
	if p < nestedRequests {
		t.Logf("%d of %d requests' server spans nest within the rule's tolerance as exported; the others' outer span includes a wait for a CPU", p, nestedRequests)
	}
	return p
}

// countOf is "1 noun" or "n nouns", as the reports count.
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// percentOf is n of total as the findings' diagnoses write it: one
// decimal, without a trailing ".0".
func percentOf(n, total int) string {
	return strings.TrimSuffix(strconv.FormatFloat(100*float64(n)/float64(total), 'f', 1, 64), ".0") + "%"
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

// checkDoubled: one finding, otelhttp inside otelhttp, pairs of the
// service's requests recorded twice (none: no finding).
func checkDoubled(t *testing.T, n nestedJSON, service string, pairs int) {
	t.Helper()
	if n.Stats.Evicted != 0 {
		t.Errorf("%d spans evicted", n.Stats.Evicted)
	}
	if pairs == 0 {
		if len(n.Findings) != 0 || n.Pairs != 0 {
			t.Errorf("%d pairs in %+v, want none", n.Pairs, n.Findings)
		}
		return
	}
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
	share := float64(pairs) / nestedRequests
	if f.Share != share || f.Traces != pairs || f.Occurrences != pairs ||
		f.AffectedSpans != 2*pairs || f.KindSpans != 2*nestedRequests || n.Pairs != pairs {
		t.Errorf("share %v, traces %d, occurrences %d, affected %d of %d, pairs %d; want %v, %d, %d, %d of %d, %d",
			f.Share, f.Traces, f.Occurrences, f.AffectedSpans, f.KindSpans, n.Pairs,
			share, pairs, pairs, 2*pairs, 2*nestedRequests, pairs)
	}
	want := fmt.Sprintf(`%[1]s %[2]s inside %[1]s %[2]s: one request recorded twice ("POST /rollouts/{id}", %[3]s of server spans): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one`,
		otelhttp.ScopeName, otelhttp.Version, percentOf(pairs, nestedRequests))
	if f.Diagnosis != want {
		t.Errorf("diagnosis:\n got %s\nwant %s", f.Diagnosis, want)
	}
}

func TestNestedVerifyDoubleWrapFails(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			junit := filepath.Join(t.TempDir(), "junit.xml")
			args := append([]string{"--format", "json", "--grace", "300ms", "--junit", junit, "--"}, nestedServerArgs(t, "double")...)
			r := runVerify(t, repoRoot, nestedProtocolEnv(proto), args...)
			pairs := nestedPairs(t, r.stdout)
			wantCode, wantVerdict := 1, "nested-duplicates"
			if pairs == 0 {
				wantCode, wantVerdict = 0, "clean"
			}
			if r.code != wantCode {
				t.Fatalf("want exit %d:\n%s", wantCode, r)
			}
			v := parseVerifyNested(t, r)
			// 4 spans a request: the client's, two server spans, the
			// handler's child; none of them twice by id.
			if v.Command.ExitCode != 0 || v.Verdict != wantVerdict || v.Ratio != 0 ||
				v.Spans.Received != 4*nestedRequests || v.Spans.ExtraCopies != 0 || v.Nested.Stats.Spans != 4*nestedRequests {
				t.Fatalf("want a %s verdict over %d unique spans:\n%s", wantVerdict, 4*nestedRequests, r)
			}
			checkDoubled(t, v.Nested, "nestedserver", pairs)
			if pairs == 0 {
				return
			}
			if len(v.Findings) != 1 || v.Findings[0].Signal != "spans" || v.Findings[0].Diagnosis != "nested-duplicate" ||
				!strings.Contains(v.Findings[0].Line, countOf(pairs, "nested duplicate")+" in "+countOf(pairs, "trace")+": ") {
				t.Errorf("findings %+v, want one nested-duplicate", v.Findings)
			}
			if !strings.Contains(r.stderr, "doubletake: verify: "+countOf(pairs, "nested duplicate")+" (double instrumentation, 1 finding; --allow nested-duplicates to pass)") {
				t.Errorf("stderr:\n%s", r.stderr)
			}
			x, err := os.ReadFile(junit)
			if err != nil || !strings.Contains(string(x), `<failure message="`+countOf(pairs, "nested duplicate")+` (double instrumentation) in 1 finding"`) {
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
	pairs := nestedPairs(t, r.stdout)
	v := parseVerifyNested(t, r)
	want := "nothing arrived twice; " + countOf(pairs, "nested duplicate") + " (double instrumentation, 1 finding) allowed by --allow nested-duplicates"
	if pairs == 0 {
		want = "nothing arrived twice"
	}
	if v.Verdict != "clean" || v.Reason != want || len(v.Allow) != 1 || v.Allow[0] != "nested-duplicates" {
		t.Fatalf("verdict %q reason %q allow %v, want clean, %q:\n%s", v.Verdict, v.Reason, v.Allow, want, r)
	}
	// Still reported.
	checkDoubled(t, v.Nested, "nestedserver", pairs)
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
	pairs := 0
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
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nestedserver -wrap %s: %v\n%s", run.wrap, err, out)
		}
		if run.wrap == "double" {
			pairs = nestedPairs(t, string(out))
		}
	}
	g.stop(t) // the file exporter writes what it holds

	path := filepath.Join(dir, "traces.jsonl")
	wantCode := 1
	if pairs == 0 {
		wantCode = 0
	}
	code, stdout, stderr := runAudit(t, "otlp", path, "--format", "json")
	if code != wantCode {
		t.Fatalf("audit otlp: exit %d, want %d\n%s\n%s", code, wantCode, stdout, stderr)
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
	checkDoubled(t, a.Nested, "nestedserver", pairs)
	if pairs == 0 {
		return
	}
	if len(a.Findings) != 1 || a.Findings[0].Diagnosis != "nested-duplicate" || a.Findings[0].Subject != `service "nestedserver"` {
		t.Errorf("findings %+v, want one nested-duplicate of nestedserver", a.Findings)
	}
	if !strings.Contains(stderr, "1 finding, 0 lines skipped as malformed; "+countOf(pairs, "nested duplicate")+" (double instrumentation)") {
		t.Errorf("stderr: %s", stderr)
	}

	html := filepath.Join(t.TempDir(), "audit.html")
	code, stdout, stderr = runAudit(t, "otlp", path, "--html", html)
	if code != 1 || !strings.Contains(stdout, countOf(pairs, "nested duplicate")+fmt.Sprintf(" in %d spans, 1 finding", 7*nestedRequests)) ||
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
