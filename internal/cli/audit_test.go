package cli

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// runAuditCmd runs `doubletake audit ARGS...` through Main and returns the
// exit code, stdout and stderr.
func runAuditCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append([]string{"audit"}, args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// promStub answers the Prometheus API with fixed bodies per path.
func promStub(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(handler))
	t.Cleanup(srv.Close)
	return srv.URL
}

func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func expect(t *testing.T, what string, code, wantCode int, stderr string, wants ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: exit %d, want %d; stderr:\n%s", what, code, wantCode, stderr)
	}
	for _, w := range wants {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr lacks %q:\n%s", what, w, stderr)
		}
	}
}

func TestAuditPrometheusBackendFailures(t *testing.T) {
	code, _, stderr := runAuditCmd(t, "prometheus", "--url", deadURL(t))
	expect(t, "unreachable", code, ExitInternal, stderr, "cannot reach http://127.0.0.1:", "connection refused")

	u := promStub(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "no token", http.StatusUnauthorized)
	})
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u)
	expect(t, "401", code, ExitInternal, stderr, "401 Unauthorized: no token", "set DOUBLETAKE_PROM_BEARER_TOKEN or --bearer-token-file")

	u = promStub(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "nope", http.StatusForbidden) })
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u)
	expect(t, "403", code, ExitInternal, stderr, "403 Forbidden", "not allowed")

	u = promStub(t, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "<html>a web page</html>") })
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u)
	expect(t, "HTML instead of JSON", code, ExitInternal, stderr, "listing metric names: malformed response")

	u = promStub(t, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector"}}`)
	})
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u)
	expect(t, "wrong data type", code, ExitInternal, stderr, "malformed response")

	u = promStub(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u+"/wrong/path")
	expect(t, "404", code, ExitInternal, stderr, "client error: 404")

	u = promStub(t, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":[]}`)
	})
	code, stdout, stderr := runAuditCmd(t, "prometheus", "--url", u, "--match", `{job="x"}`)
	expect(t, "empty", code, ExitInternal, stderr, `nothing to audit: no series match {job="x"} between`)
	if stdout != "" {
		t.Errorf("empty: stdout %q", stdout)
	}

	u = promStub(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"1:6: parse error: unexpected character"}`)
	})
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u, "--match", `{job=~"("}`)
	expect(t, "refused selector", code, ExitUsage, stderr, "the backend refused the query: 1:6: parse error")

	u = promStub(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "label") {
			fmt.Fprint(w, `{"status":"success","data":["x_total"]}`)
			return
		}
		fmt.Fprint(w, `{"status":"success","data":`)
	})
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u, "--progress-interval", "0")
	expect(t, "truncated answers", code, ExitInternal, stderr, "malformed response")
}

func TestAuditPrometheusCredentials(t *testing.T) {
	var seen []string
	u := promStub(t, func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Scope-OrgID"))
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"status":"success","data":[]}`)
	})
	t.Setenv("DOUBLETAKE_PROM_BEARER_TOKEN", "s3cret")
	code, _, stderr := runAuditCmd(t, "prometheus", "--url", u, "--tenant", "team-a")
	expect(t, "token from the environment", code, ExitInternal, stderr, "nothing to audit")
	if len(seen) == 0 || seen[0] != "Bearer s3cret|team-a" {
		t.Errorf("server saw %q, want the bearer token and tenant", seen)
	}
	if strings.Contains(stderr, "s3cret") {
		t.Errorf("the token leaked into stderr:\n%s", stderr)
	}

	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u, "--bearer-token-file", file)
	expect(t, "token in both places", code, ExitUsage, stderr, "use one")
	t.Setenv("DOUBLETAKE_PROM_BEARER_TOKEN", "")
	seen = nil
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u, "--bearer-token-file", file)
	expect(t, "token file", code, ExitInternal, stderr, "nothing to audit")
	if len(seen) == 0 || seen[0] != "Bearer from-file|" {
		t.Errorf("server saw %q, want the file's token", seen)
	}

	t.Setenv("DOUBLETAKE_PROM_USERNAME", "ops")
	t.Setenv("DOUBLETAKE_PROM_PASSWORD", "pw")
	seen = nil
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u)
	expect(t, "basic auth", code, ExitInternal, stderr, "nothing to audit")
	if len(seen) == 0 || seen[0] != "Basic b3BzOnB3|" {
		t.Errorf("server saw %q, want basic auth ops:pw", seen)
	}

	code, _, stderr = runAuditCmd(t, "prometheus", "--url", u, "--bearer-token-file", filepath.Join(t.TempDir(), "missing"))
	expect(t, "missing token file", code, ExitUsage, stderr, "--bearer-token-file: no such file")
}

func TestAuditPrometheusTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":[]}`)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runAuditCmd(t, "prometheus", "--url", srv.URL)
	expect(t, "unknown CA", code, ExitInternal, stderr, "certificate")
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", srv.URL, "--ca-file", ca)
	expect(t, "--ca-file", code, ExitInternal, stderr, "nothing to audit")
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", srv.URL, "--insecure-skip-verify")
	expect(t, "--insecure-skip-verify", code, ExitInternal, stderr, "nothing to audit")
	code, _, stderr = runAuditCmd(t, "prometheus", "--url", srv.URL, "--cert-file", ca)
	expect(t, "cert without key", code, ExitUsage, stderr, "--cert-file and --key-file go together")
}

func TestAuditUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "name what to audit"},
		{[]string{"prometheus"}, `required flag(s) "url" not set`},
		{[]string{"prometheus", "--url", "ftp://x"}, "want an http:// or https:// URL"},
		{[]string{"prometheus", "--url", "http://u:p@x"}, "credentials in the URL"},
		{[]string{"prometheus", "--url", "http://x", "--format", "yaml"}, `--format "yaml"`},
		{[]string{"prometheus", "--url", "http://x", "--range", "-1h"}, "invalid argument"},
		{[]string{"prometheus", "--url", "http://x", "--end", "yesterday"}, "RFC 3339"},
		{[]string{"prometheus", "--url", "http://x", "--concurrency", "0"}, "at least 1"},
		{[]string{"prometheus", "--url", "http://x", "--match", "rate(x[5m])"}, "not a series selector"},
		{[]string{"traces", "--service", "s"}, "exactly one of --jaeger URL and --tempo URL"},
		{[]string{"traces", "--service", "s", "--jaeger", "http://a", "--tempo", "http://b"}, "exactly one of"},
		{[]string{"traces", "--jaeger", "http://a"}, `required flag(s) "service" not set`},
		{[]string{"traces", "--jaeger", "http://a", "--service", " "}, "--service must not be empty"},
		{[]string{"traces", "--jaeger", "http://a", "--service", "s", "--limit", "0"}, "--limit must be at least 1"},
		{[]string{"otlp"}, "requires at least 1 arg"},
		{[]string{"otlp", "/no/such/file.jsonl"}, "no such file: /no/such/file.jsonl"},
		{[]string{"otlp", os.TempDir()}, "is a directory"},
		{[]string{"otlp", "--format", "xml", "x"}, `--format "xml"`},
	} {
		code, _, stderr := runAuditCmd(t, c.args...)
		expect(t, strings.Join(c.args, " "), code, ExitUsage, stderr, c.want)
	}
}

func jaegerStub(t *testing.T, traces func(w http.ResponseWriter)) string {
	t.Helper()
	return promStub(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v3/services":
			fmt.Fprint(w, `{"services":["svc"]}`)
		case "/api/v3/traces":
			traces(w)
		default:
			http.NotFound(w, r)
		}
	})
}

func oneTrace(copies int) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	for range copies {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
		sp.SetName("op")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute)))
	}
	b, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	return []byte(`{"result":` + string(b) + `}`)
}

func TestAuditTracesCommand(t *testing.T) {
	u := jaegerStub(t, func(w http.ResponseWriter) { _, _ = w.Write(oneTrace(2)) })
	code, stdout, stderr := runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc")
	expect(t, "duplicates", code, ExitFindings, stderr, "1 trace, 1 span ids stored more than once (1 extra copies)")
	if !strings.Contains(stdout, "e.g. svc \"op\": trace 0102030405060708090a0b0c0d0e0f10 span 0102030405060708 stored 2 times") {
		t.Errorf("text report:\n%s", stdout)
	}
	html := filepath.Join(t.TempDir(), "r.html")
	u = jaegerStub(t, func(w http.ResponseWriter) { _, _ = w.Write(oneTrace(1)) })
	code, stdout, stderr = runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc", "--format", "json", "--html", html)
	expect(t, "clean", code, ExitOK, stderr)
	if !strings.Contains(stdout, `"duplicated": 0`) {
		t.Errorf("json report:\n%s", stdout)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<h1>doubletake audit: traces in jaeger</h1>") {
		t.Errorf("html report: %v\n%s", err, b)
	}

	u = jaegerStub(t, func(w http.ResponseWriter) { fmt.Fprint(w, `{"result": {"resourceSpans": "no"}}`) })
	code, _, stderr = runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc")
	expect(t, "malformed", code, ExitInternal, stderr, "malformed response")

	u = jaegerStub(t, func(w http.ResponseWriter) {
		http.Error(w, `{"error":{"httpCode":404,"message":"No traces found"}}`, http.StatusNotFound)
	})
	code, _, stderr = runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc")
	expect(t, "no traces", code, ExitInternal, stderr, `nothing to audit: jaeger has no traces of "svc"`)

	u = promStub(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "login first", http.StatusUnauthorized) })
	code, _, stderr = runAuditCmd(t, "traces", "--tempo", u, "--service", "svc")
	expect(t, "401", code, ExitInternal, stderr, "401 Unauthorized", "DOUBLETAKE_TRACES_BEARER_TOKEN")

	code, _, stderr = runAuditCmd(t, "traces", "--jaeger", deadURL(t), "--service", "svc")
	expect(t, "unreachable", code, ExitInternal, stderr, "cannot reach")
}

func TestAuditOTLPCommand(t *testing.T) {
	dir := t.TempDir()
	dup := string(oneTrace(2))
	dup = strings.TrimSuffix(strings.TrimPrefix(dup, `{"result":`), "}")
	clean := strings.TrimSuffix(strings.TrimPrefix(string(oneTrace(1)), `{"result":`), "}")
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	html := filepath.Join(dir, "r.html")
	code, stdout, stderr := runAuditCmd(t, "otlp", write("dup.jsonl", dup+"\n"), "--html", html)
	expect(t, "duplicates", code, ExitFindings, stderr, "1 file read, 1 finding, 0 lines skipped")
	if !strings.Contains(stdout, "spans: 2 received, 1 unique, 1 duplicated ids") {
		t.Errorf("text report:\n%s", stdout)
	}
	if b, _ := os.ReadFile(html); !strings.Contains(string(b), "Span ids stored more than once") {
		t.Errorf("html report:\n%s", b)
	}
	// A malformed line is counted and reported; the exit status follows
	// the findings unless --strict.
	badLine := write("clean.jsonl", clean+"\n"+clean+"x\n")
	code, stdout, stderr = runAuditCmd(t, "otlp", badLine)
	expect(t, "clean with a bad line", code, ExitOK, stderr, "0 findings, 1 line skipped as malformed")
	if !strings.Contains(stdout, "1 malformed line skipped: not OTLP-JSON") || !strings.Contains(stdout, "problem: "+badLine+":2:") {
		t.Errorf("the report does not count and cite the malformed line:\n%s", stdout)
	}
	code, _, stderr = runAuditCmd(t, "otlp", "--strict", badLine)
	expect(t, "clean with a bad line, --strict", code, ExitFindings, stderr, "1 line could not be read as OTLP-JSON (--strict)")
	code, _, stderr = runAuditCmd(t, "otlp", write("clean2.jsonl", clean+"\n"))
	expect(t, "clean", code, ExitOK, stderr, "0 findings")
	code, _, stderr = runAuditCmd(t, "otlp", write("empty.jsonl", ""))
	expect(t, "empty", code, ExitInternal, stderr, "nothing to audit: no OTLP export requests in 1 file(s)")
	code, _, stderr = runAuditCmd(t, "otlp", write("c.jsonl", clean+"\n"), "-o", filepath.Join(dir, "no", "such", "dir", "out"))
	expect(t, "unwritable output", code, ExitInternal, stderr, "writing the report")
}

// nestedTraceJSON is one request of three recorded twice by one
// instrumentation (a handler wrapped twice), as OTLP JSON, of service svc.
func nestedTraceJSON() string {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
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
	b, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	return string(b)
}

func TestAuditNestedDuplicates(t *testing.T) {
	u := jaegerStub(t, func(w http.ResponseWriter) { fmt.Fprint(w, `{"result":`+nestedTraceJSON()+`}`) })
	html := filepath.Join(t.TempDir(), "r.html")
	code, stdout, stderr := runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc", "--html", html)
	expect(t, "traces", code, ExitFindings, stderr, "3 traces, 0 span ids stored more than once (0 extra copies), 1 nested duplicate (double instrumentation)")
	for _, want := range []string{
		"no duplicate span ids",
		"nested duplicates (one operation recorded as two spans, one inside the other): 1 nested duplicate in 4 spans, 1 finding",
		`  - otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice ("GET /x", 50% of server spans)`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("traces text lacks %q:\n%s", want, stdout)
		}
	}
	if b, _ := os.ReadFile(html); !strings.Contains(string(b), "Nested duplicates: one operation recorded as two spans") {
		t.Errorf("traces HTML:\n%s", b)
	}
	code, stdout, stderr = runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc", "--format", "json")
	expect(t, "traces json", code, ExitFindings, stderr)
	if !strings.Contains(stdout, `"nested_duplicates": {`) || !strings.Contains(stdout, `"diagnosis": "otelhttp 0.1.0 inside otelhttp 0.1.0: one request recorded twice`) {
		t.Errorf("traces JSON:\n%s", stdout)
	}

	p := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(p, []byte(nestedTraceJSON()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runAuditCmd(t, "otlp", p, "--format", "json", "--html", html)
	expect(t, "otlp", code, ExitFindings, stderr, "1 file read, 1 finding, 0 lines skipped as malformed; 1 nested duplicate (double instrumentation)")
	if !strings.Contains(stdout, `"diagnosis": "nested-duplicate"`) || !strings.Contains(stdout, `"nested_duplicates": {`) {
		t.Errorf("otlp JSON:\n%s", stdout)
	}
	if b, _ := os.ReadFile(html); !strings.Contains(string(b), "Nested duplicates: one operation recorded as two spans") {
		t.Errorf("otlp HTML:\n%s", b)
	}
}
