package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 36, case 7: the OpenTelemetry Java agent with an application that
// builds its own SDK and OTLP exporter (test/java/App.java), the double
// export users report outside Python. The agent and the app's dependencies
// come by Maven coordinates (test/java/pom.xml) through
// scripts/javadeps.sh into the cache, which scripts/test.sh runs first.

var (
	javaOnce sync.Once
	javaDir  string
	javaErr  error
)

// javaApp returns the directory scripts/javadeps.sh filled: lib/, agent/,
// classes/.
func javaApp(t *testing.T) string {
	t.Helper()
	javaOnce.Do(func() {
		if _, err := lookPath("java"); err != nil {
			javaErr = err
			return
		}
		cmd := exec.Command(filepath.Join(repoRoot, "scripts", "javadeps.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		javaDir = strings.TrimSpace(string(out))
		switch {
		case err != nil:
			javaErr = fmt.Errorf("scripts/javadeps.sh: %w\n%s", err, stderr.String())
		case javaDir == "":
			javaErr = fmt.Errorf("scripts/javadeps.sh printed no directory\n%s", stderr.String())
		}
	})
	requireDep(t, javaErr, "the Java agent and the Java app's dependencies (scripts/javadeps.sh: mvn, javac)")
	return javaDir
}

// TestJavaAgentOwnSDK: the app records a SERVER span per request with its
// own SDK and exporter, the agent records its own for the same request and
// exports its spans and metrics with its own exporter. Each SDK exports
// what it recorded once: no span id arrives twice, and the agent alone
// writes metrics. What is doubled is the request: one span inside the
// other, two instrumentations.
//
//   - verify: no span id twice, no metric stream with two writers, exit 1
//     and the cause named (two instrumentations, the agent's scope outside
//     the app's);
//   - through `doubletake run` (dedup's nested finder on, as in the embedded
//     default), side by side with a pipeline without dedup: every span
//     stored once, both server spans of every request kept, one series per
//     metric stream with no reset and the counts of the pipeline without
//     dedup, no stream with two writers on the status page, and the status
//     page naming the pair (what fails without dedup in the pipeline).
func TestJavaAgentOwnSDK(t *testing.T) {
	dir := javaApp(t)
	agent, err := filepath.Glob(filepath.Join(dir, "agent", "opentelemetry-javaagent-*.jar"))
	if err != nil || len(agent) != 1 {
		t.Fatalf("the agent jar in %s/agent: %v %v", dir, agent, err)
	}
	javaArgv := func(port string, requests int) []string {
		return []string{"java", "-javaagent:" + agent[0], "-cp", filepath.Join(dir, "lib", "*") + ":" + filepath.Join(dir, "classes"), "App", port, strconv.Itoa(requests)}
	}
	javaEnv := []string{"OTEL_SERVICE_NAME=java-app", "OTEL_METRIC_EXPORT_INTERVAL=500", "OTEL_BSP_SCHEDULE_DELAY=100"}
	const requests = 8
	t.Run("verify", func(t *testing.T) {
		addr := freePort(t)
		_, port, _ := net.SplitHostPort(addr)
		done := make(chan verifyRun, 1)
		go func() {
			done <- runVerify(t, t.TempDir(), javaEnv, append([]string{"--format", "json", "--grace", "2s", "--"}, javaArgv(port, requests)...)...)
		}()
		s := &pyServer{name: "java", addr: addr}
		var r verifyRun
		waitFor(t, 120*time.Second, "the Java app under verify to serve", func() bool {
			select {
			case r = <-done:
				t.Fatalf("verify ended before the app served:\n%s", r)
			default:
			}
			code, _, err := s.get("/ready")
			return err == nil && code == 200
		})
		for i := 1; i <= requests; i++ {
			if code, body, err := s.get("/items/" + strconv.Itoa(i)); err != nil || code != 200 {
				t.Fatalf("GET /items/%d: %d %s %v", i, code, body, err)
			}
		}
		r = <-done
		v := parseVerifyNested(t, r)
		t.Logf("exit %d: %d spans (%d distinct), %d nested pairs; metric points %d in streams with more than one writer: %d", r.code, v.Spans.Received, v.Spans.Unique, v.Nested.Pairs, v.Metrics.Points, v.Metrics.Overlapping)
		if r.code != 1 || v.Spans.Received != v.Spans.Unique || v.Metrics.Overlapping != 0 {
			t.Fatalf("want exit 1, no span id twice, no metric stream with two writers:\n%s", r)
		}
		// A request pairs when the app's span covers at least min_coverage
		// (90%) of the agent's: the first ones run cold (class loading, JIT)
		// and the agent's span takes far longer than the app's 50 ms; later
		// ones pair (7 of 8 here, on a loaded machine).
		if len(v.Nested.Findings) != 1 || v.Nested.Pairs < 1 {
			t.Fatalf("want one finding:\n%s", r)
		}
		f := v.Nested.Findings[0]
		t.Logf("finding: %s inside %s %s, %q, %d pairs: %s", f.InnerScope.Name, f.OuterScope.Name, f.OuterScope.Version, f.Name, f.Occurrences, f.Diagnosis)
		if f.Service != "java-app" || f.Kind != "SERVER" || f.Name != "GET /items/" || f.InnerScope.Name != "app.http" ||
			f.OuterScope.Name != "io.opentelemetry.java-http-server" || !strings.Contains(f.Diagnosis, "two instrumentations are active") {
			t.Errorf("finding %+v: want the app's SERVER span inside the agent's, two instrumentations", f)
		}
	})
	t.Run("gateway", func(t *testing.T) {
		r := startSeedRun(t, "    traces: {nested: {detect: true}}\n")
		addr := freePort(t)
		_, port, _ := net.SplitHostPort(addr)
		argv := javaArgv(port, requests)
		s := &pyServer{name: "java", out: &syncBuffer{}, addr: addr, done: make(chan struct{})}
		s.cmd = exec.Command(argv[0], argv[1:]...)
		s.cmd.Env = append(os.Environ(), append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.httpAddr}, javaEnv...)...)
		s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { s.err = s.cmd.Wait(); close(s.done) }()
		t.Cleanup(func() {
			s.stop(t)
			if t.Failed() {
				t.Logf("java output:\n%s", s.out.String())
			}
		})
		waitFor(t, 120*time.Second, "the Java app to serve", func() bool {
			select {
			case <-s.done:
				t.Fatalf("the Java app exited before it served: %v\n%s", s.err, s.out.String())
			default:
			}
			code, _, err := s.get("/ready")
			return err == nil && code == 200
		})
		for i := 1; i <= requests; i++ {
			if code, body, err := s.get("/items/" + strconv.Itoa(i)); err != nil || code != 200 {
				t.Fatalf("GET /items/%d: %d %s %v", i, code, body, err)
			}
		}
		// The app exits after its requests: the app's SDK shuts down, then
		// the agent's at the JVM's exit, each exporting what it holds.
		waitFor(t, 120*time.Second, "the Java app to exit after its requests", func() bool {
			select {
			case <-s.done:
				return true
			default:
				return false
			}
		})
		if s.err != nil {
			t.Fatalf("the Java app: %v\n%s", s.err, s.out.String())
		}
		// The app's last spans are exported at its exit; the page counts
		// them once they have arrived.
		var statusJSON string
		var st javaStatus
		waitFor(t, 60*time.Second, "the gateway to have the app's spans", func() bool {
			statusJSON = r.statusJSON()
			st = javaStatus{}
			if json.Unmarshal([]byte(statusJSON), &st) != nil {
				return false
			}
			for _, row := range st.Services {
				if row.Service == "java-app" && row.Signal == "traces" && row.Received >= 2*requests {
					return true
				}
			}
			return false
		})
		r.g.stop(t)
		checkJavaGateway(t, r, st, requests)
		if t.Failed() {
			t.Logf("status.json: %s", statusJSON)
		}
	})
}

// javaStatus is the part of status.json the Java test reads.
type javaStatus struct {
	Services []struct {
		Service  string `json:"service"`
		Signal   string `json:"signal"`
		Received int64  `json:"received"`
		Copies   int64  `json:"copies"`
	} `json:"services"`
	Streams []struct {
		Service string `json:"service"`
		Metric  string `json:"metric"`
	} `json:"streams"`
	Nested []struct {
		Service    string `json:"service"`
		OuterScope string `json:"outer_scope"`
		InnerScope string `json:"inner_scope"`
		Spans      int64  `json:"spans"`
		Action     string `json:"action"`
		Name       string `json:"name"`
		Diagnosis  string `json:"diagnosis"`
	} `json:"nested"`
}

// javaDurCount is the agent's HTTP server histogram's count in Prometheus.
const javaDurCount = "http_server_request_duration_seconds_count"

// checkJavaGateway asserts what the Java app left behind the gateway.
func checkJavaGateway(t *testing.T, r *seedRun, st javaStatus, requests int) {
	t.Helper()
	tp := readSeedTraces(t, filepath.Join(r.dir, "traces-plain.jsonl"), "java-app")
	td := readSeedTraces(t, filepath.Join(r.dir, "traces-dedup.jsonl"), "java-app")
	t.Logf("spans: without dedup %d stored (%d distinct), with dedup %d stored (%d distinct); distinct per name %v", tp.total, tp.unique, td.total, td.unique, td.names)
	if td.total != td.unique || td.unique != tp.unique || tp.total != tp.unique {
		t.Errorf("spans: with dedup %d stored, %d distinct; without %d, %d distinct; want each span once in both", td.total, td.unique, tp.total, tp.unique)
	}
	if n := td.names["GET /items/"]; n != 2*requests {
		t.Errorf("with dedup: %d distinct \"GET /items/\" spans, want %d (the agent's and the app's per request)", n, 2*requests)
	}
	for _, row := range st.Services {
		if row.Service == "java-app" {
			t.Logf("status page: %s %s: %d received, %d copies", row.Service, row.Signal, row.Received, row.Copies)
			if row.Copies != 0 {
				t.Errorf("status page: %s %s has %d copies, want none", row.Service, row.Signal, row.Copies)
			}
		}
	}
	for _, s := range st.Streams {
		if s.Service == "java-app" {
			t.Errorf("status page: stream %s of java-app has more than one writer", s.Metric)
		}
	}
	// The double instrumentation, named by the gateway: the app's span
	// inside the agent's.
	named := false
	for _, n := range st.Nested {
		t.Logf("status page, nested: %s: %s inside %s, %d spans %s, latest %q: %s", n.Service, n.InnerScope, n.OuterScope, n.Spans, n.Action, n.Name, n.Diagnosis)
		if n.Service == "java-app" && strings.HasPrefix(n.OuterScope, "io.opentelemetry.java-http-server ") && n.InnerScope == "app.http" && n.Spans >= 1 &&
			n.Action == "counted" && strings.Contains(n.Diagnosis, "two instrumentations are active") {
			named = true
		}
	}
	if !named {
		t.Errorf("the status page does not name app.http inside io.opentelemetry.java-http-server for java-app")
	}
	// Metrics: the agent writes them alone: one series per stream, no
	// reset, the same counts with dedup as without.
	plain := r.prom.storedIn(t, javaDurCount, "java-app", "plain")
	dedup := r.prom.storedIn(t, javaDurCount, "java-app", "dedup")
	pTotal, pResets := countedAll(plain)
	dTotal, dResets := countedAll(dedup)
	t.Logf("%s: without dedup %d series, %d samples, %d resets, counted %v; with dedup %d series, %d samples, %d resets, counted %v",
		javaDurCount, len(plain), samples(plain), pResets, pTotal, len(dedup), samples(dedup), dResets, dTotal)
	if len(dedup) == 0 || len(dedup) != len(plain) || dResets != 0 || dTotal != pTotal || dTotal < float64(requests) {
		t.Errorf("%s with dedup: %d series (%d without), %d resets, counted %v (%v without); want one series per stream, 0 resets, the same count, at least %d",
			javaDurCount, len(dedup), len(plain), dResets, dTotal, pTotal, requests)
	}
}
