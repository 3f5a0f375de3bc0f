package deploy

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/distro"
)

// TestBuilderManifest builds builder/manifest.yaml with the OpenTelemetry
// Collector Builder at the collector release in go.mod, with doubletake's
// components from this checkout, runs the collector with
// builder/collector.yaml and then with the embedded default config (a
// gateway with --upstream in front of one writing files), and sends one
// span twice: it is stored once. It shares the module and
// build caches with every other build; the builder's -trimpath makes its
// first run compile everything once.
func TestBuilderManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a collector; -short skips it")
	}
	goBin := requireTool(t, "go", "the Go toolchain")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	version := goOutput(t, goBin, root, "list", "-m", "-f", "{{.Version}}", "go.opentelemetry.io/collector/otelcol")

	// The manifest as it is, but building into a temp dir with dedup from
	// this checkout wherever that is.
	b, err := os.ReadFile(filepath.Join("builder", "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	manifest := string(b)
	for old, new := range map[string]string{
		"output_path: ./_build": "output_path: " + out,
		"=> ../../..":           "=> " + root,
	} {
		if !strings.Contains(manifest, old) {
			t.Fatalf("builder/manifest.yaml lacks %q", old)
		}
		manifest = strings.Replace(manifest, old, new, 1)
	}
	path := filepath.Join(out, "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	build := exec.Command(goBin, "run", "go.opentelemetry.io/collector/cmd/builder@"+version, "--config", path)
	build.Dir = out
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("builder %s: %v\n%s", version, err, out)
	}
	t.Logf("builder %s built the manifest in %s", version, time.Since(start).Round(time.Second))

	bin := filepath.Join(out, "otelcol-dedup")

	// builder/collector.yaml: OTLP in, dedup, spans to a file.
	health, otlp := freeAddr(t), freeAddr(t)
	spans := filepath.Join(t.TempDir(), "spans.jsonl")
	stop := runCollector(t, bin, filepath.Join("builder", "collector.yaml"), health,
		"HEALTH_ENDPOINT="+health, "OTLP_HTTP_ENDPOINT="+otlp, "SPANS_FILE="+spans)
	postSpans(t, otlp, "0000000000000001", "0000000000000001", "0000000000000002")
	stop() // the file exporter flushes on shutdown
	want := map[string]int{"0000000000000001": 1, "0000000000000002": 1}
	if seen := storedSpans(t, spans); !equalCounts(seen, want) {
		t.Errorf("stored spans %v, want %v: the copy dropped, the rest kept", seen, want)
	}

	// The embedded default config, as `doubletake run` renders it, twice:
	// without --upstream (files, the prometheus endpoint, otlp_json, guard,
	// log_storage) as the backend, and with --upstream pointing at it
	// (dedup_otlp_grpc with its persistent queue in log_storage) in front.
	backend := defaultOptions(t)
	backStop := runDefault(t, bin, backend)
	front := defaultOptions(t)
	front.Upstream = "http://" + backend.GRPCEndpoint
	frontStop := runDefault(t, bin, front)
	postSpans(t, front.HTTPEndpoint, "0000000000000003", "0000000000000003", "0000000000000004")
	stored := filepath.Join(backend.DataDir, "traces.jsonl")
	want = map[string]int{"0000000000000003": 1, "0000000000000004": 1}
	poll(t, 60*time.Second, "the backend to store the spans sent through the front", func() bool {
		_, err := os.Stat(stored)
		return err == nil && len(storedSpans(t, stored)) == len(want)
	})
	frontStop()
	backStop()
	if seen := storedSpans(t, stored); !equalCounts(seen, want) {
		t.Errorf("the backend stored %v, want %v: the copy dropped by the front, the rest kept", seen, want)
	}

	// log_storage built from the manifest (NewFactory, without doubletake's
	// check command) holds its directory, and refuses to start on a data
	// dir whose file_storage_directory holds files it cannot check and
	// move, naming them.
	for _, o := range []distro.Options{backend, front} {
		if b, err := os.ReadFile(filepath.Join(o.DataDir, "log", "LOCK")); err != nil || len(strings.TrimSpace(string(b))) == 0 {
			t.Errorf("%s/log/LOCK: %q, %v; want the PID of the collector that held it", o.DataDir, b, err)
		}
	}
	earlier := defaultOptions(t)
	file := filepath.Join(earlier.DataDir, "queue", "processor_dedup_")
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("a file_storage file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := distro.DefaultConfig(earlier)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "default.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outb, err := exec.CommandContext(ctx, bin, "--config", path).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(outb), "holds file_storage files (processor_dedup_) and this build cannot check or move them") {
		t.Errorf("the built collector on a data dir with a file_storage file: %v; want it to refuse to start, naming the file:\n%s", err, outb)
	}
}

// defaultOptions are `doubletake run`'s options on free loopback ports,
// with a data directory of the test's own.
func defaultOptions(t *testing.T) distro.Options {
	t.Helper()
	o := distro.DefaultOptions()
	o.GRPCEndpoint, o.HTTPEndpoint = freeAddr(t), freeAddr(t)
	o.MetricsEndpoint, o.TelemetryEndpoint = freeAddr(t), freeAddr(t)
	o.HealthEndpoint, o.StatusEndpoint = freeAddr(t), freeAddr(t)
	o.DataDir = t.TempDir()
	return o
}

// runDefault runs the built collector with the default config rendered
// with o, and returns the function that stops it.
func runDefault(t *testing.T, bin string, o distro.Options) func() {
	t.Helper()
	cfg, err := distro.DefaultConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "default.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return runCollector(t, bin, path, o.HealthEndpoint)
}

// runCollector starts the built collector with config and env, waits for
// its health check on health, and returns the function that stops it
// (SIGINT, then at most 30s); the test's cleanup stops it too.
func runCollector(t *testing.T, bin, config, health string, env ...string) func() {
	t.Helper()
	col := exec.Command(bin, "--config", config)
	col.Env = append(os.Environ(), env...)
	var logs strings.Builder
	col.Stdout, col.Stderr = &logs, &logs
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- col.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = col.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the collector (%s) stopped with %v after SIGINT", config, err)
			}
		case <-time.After(30 * time.Second):
			_ = col.Process.Kill()
			t.Errorf("the collector (%s) did not stop within 30s of SIGINT (killed: %v)", config, <-done)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("collector output (%s):\n%s", config, logs.String())
		}
	})
	poll(t, 60*time.Second, "the collector to report healthy", func() bool {
		select {
		case err := <-done:
			done <- err // for stop, which the cleanup runs
			t.Fatalf("the collector (%s) exited: %v\n%s", config, err, logs.String())
		default:
		}
		resp, err := http.Get("http://" + health + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return stop
}

// postSpans sends one request per span id to the OTLP/HTTP endpoint otlp.
func postSpans(t *testing.T, otlp string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]},"scopeSpans":[{"spans":[` +
			`{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"` + id + `","name":"op","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000"}]}]}]}`
		resp, err := http.Post("http://"+otlp+"/v1/traces", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/traces: %s", resp.Status)
		}
	}
}

// storedSpans counts the spans of an OTLP JSON lines file by span id.
func storedSpans(t *testing.T, path string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					seen[sp.SpanID().String()]++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// goOutput runs go ARGS in dir and returns its trimmed output.
func goOutput(t *testing.T, goBin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// poll waits until cond holds, failing after limit: a condition, never a
// fixed time.
func poll(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
