package deploy

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestBuilderManifest builds builder/manifest.yaml with the OpenTelemetry
// Collector Builder at the collector release in go.mod, with dedup from this
// checkout, runs the collector with builder/collector.yaml, and sends one
// span twice: the file exporter stores it once. It shares the module and
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

	health, otlp := freeAddr(t), freeAddr(t)
	spans := filepath.Join(t.TempDir(), "spans.jsonl")
	col := exec.Command(filepath.Join(out, "otelcol-dedup"), "--config", filepath.Join("builder", "collector.yaml"))
	col.Env = append(os.Environ(), "HEALTH_ENDPOINT="+health, "OTLP_HTTP_ENDPOINT="+otlp, "SPANS_FILE="+spans)
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
		case <-done:
		case <-time.After(30 * time.Second):
			_ = col.Process.Kill()
			<-done
			t.Errorf("the collector did not stop within 30s of SIGINT")
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("collector output:\n%s", logs.String())
		}
	})
	poll(t, 60*time.Second, "the collector to report healthy", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the collector exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + health + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	span := func(id string) string {
		return `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]},"scopeSpans":[{"spans":[` +
			`{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"` + id + `","name":"op","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000"}]}]}]}`
	}
	for _, body := range []string{span("0000000000000001"), span("0000000000000001"), span("0000000000000002")} {
		resp, err := http.Post("http://"+otlp+"/v1/traces", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/traces: %s", resp.Status)
		}
	}
	stop() // the file exporter flushes on shutdown
	seen := map[string]int{}
	f, err := os.Open(spans)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", spans, err)
		}
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					seen[sss.At(j).Spans().At(k).SpanID().String()]++
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"0000000000000001": 1, "0000000000000002": 1}
	if len(seen) != len(want) || seen["0000000000000001"] != 1 || seen["0000000000000002"] != 1 {
		t.Errorf("stored spans %v, want %v: the copy dropped, the rest kept", seen, want)
	}
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
