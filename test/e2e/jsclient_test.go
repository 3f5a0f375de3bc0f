package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	jsOnce sync.Once
	jsErr  error
)

// jsClient makes sure the OpenTelemetry JS SDK client is installed (npm ci
// once per run) and returns its directory.
func jsClient(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "test", "jsclient")
	jsOnce.Do(func() {
		if _, err := lookPath("node"); err != nil {
			jsErr = err
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@opentelemetry")); err == nil {
			return
		}
		npm, err := lookPath("npm")
		if err != nil {
			jsErr = err
			return
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			jsErr = fmt.Errorf("npm ci: %w\n%s", err, out)
		}
	})
	requireDep(t, jsErr, "the OpenTelemetry JS SDK client (node and npm ci in test/jsclient)")
	return dir
}

// jsResult is the JSON line the client prints when it is done.
type jsResult struct {
	Spans    int    `json:"spans"`
	Rollouts int    `json:"rollouts"`
	Protocol string `json:"protocol"`
	Mode     string `json:"mode"`
}

// runJS runs the JS client with env and returns its summary line.
func runJS(t *testing.T, env ...string) jsResult {
	t.Helper()
	dir := jsClient(t)
	cmd := exec.Command("node", "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("JS client: %v\nstderr:\n%s", err, stderr.String())
	}
	var r jsResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(stdout.Bytes())), &r); err != nil {
		t.Fatalf("JS client output %q: %v", stdout.String(), err)
	}
	return r
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// TestJSSDKTwoBatchSpanProcessors: the OpenTelemetry JS SDK from npm with two
// BatchSpanProcessors on one provider, through the real gateway, over each
// OTLP protocol the SDK offers.
func TestJSSDKTwoBatchSpanProcessors(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf", "http/json"} {
		t.Run(proto, func(t *testing.T) {
			s := startSideBySide(t)
			endpoint := "http://" + s.grpcAddr
			if proto != "grpc" {
				endpoint = "http://" + s.httpAddr
			}
			r := runJS(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "CLIENT_PROTOCOL="+proto,
				"CLIENT_MODE=traces-double", "CLIENT_ROLLOUTS=25", "CLIENT_ROLLOUT_MS=20", "CLIENT_SERVICE=js-double")
			if r.Spans != 50 {
				t.Fatalf("client made %d spans, want 50", r.Spans)
			}
			s.check(t, r.Spans)
		})
	}
}
