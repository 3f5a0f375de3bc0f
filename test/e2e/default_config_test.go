package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

type defaultGateway struct {
	g                                                 *gateway
	grpc, http, metrics, tel, health, status, dataDir string
	args, env                                         []string
	extra                                             []string // the flags newDefault was given
}

// startDefault runs `doubletake run` with the embedded default config, on
// free ports, with OTEL_EXPORTER_OTLP_ENDPOINT pointing at its own OTLP/HTTP
// receiver: its own telemetry must not loop into it.
func startDefault(t *testing.T, extra ...string) *defaultGateway {
	t.Helper()
	d := newDefault(t, t.TempDir(), extra...)
	d.g = startGateway(t, d.health, d.env, d.args...)
	return d
}

// newDefault is startDefault's gateway on dataDir, not started (d.g nil).
func newDefault(t *testing.T, dataDir string, extra ...string) *defaultGateway {
	t.Helper()
	d := &defaultGateway{grpc: freePort(t), http: freePort(t), metrics: freePort(t), tel: freePort(t), health: freePort(t), status: freePort(t), dataDir: dataDir, extra: extra}
	d.args = append([]string{
		"--grpc-endpoint", d.grpc, "--http-endpoint", d.http, "--metrics-endpoint", d.metrics,
		"--telemetry-endpoint", d.tel, "--health-endpoint", d.health, "--data-dir", d.dataDir,
		"--summary-interval", "100ms", "--status-endpoint", d.status,
	}, extra...)
	d.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + d.http, "OTEL_TRACES_EXPORTER=otlp", "OTEL_METRICS_EXPORTER=otlp", "OTEL_LOGS_EXPORTER=otlp"}
	return d
}

// summaryLine is in the log line that sums up an interval in which items
// arrived; an interval without items logs summaryIdleLine (the embedded
// default logs one or the other every --summary-interval).
const (
	summaryLine     = "\tdedup summary\t"
	summaryIdleLine = "\tdedup summary: nothing received\t"
)

// restart starts the same gateway again: same addresses, same data dir.
func (d *defaultGateway) restart(t *testing.T) {
	t.Helper()
	d.g = startGateway(t, d.health, d.env, d.args...)
}

// restartOnNewPorts starts the same gateway again on the same data dir,
// listening on new free ports: for a test whose senders are gone, so that
// a port another test took since the kill cannot fail the restart.
func (d *defaultGateway) restartOnNewPorts(t *testing.T) {
	t.Helper()
	n := newDefault(t, d.dataDir, d.extra...)
	n.g = startGateway(t, n.health, n.env, n.args...)
	*d = *n
}

// sendDoubled exports spans spans through two BatchSpanProcessors over
// OTLP/HTTP to addr, so each arrives twice.
func sendDoubled(t *testing.T, addr string, spans int) {
	t.Helper()
	ctx := ctxTimeout(t, time.Minute)
	var opts []sdktrace.TracerProviderOption
	for range 2 {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("app"))))...)
	for range spans {
		_, s := tp.Tracer("default").Start(ctx, "op")
		s.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// readJSONLines decodes an OTLP-JSON-lines file with dec.
func readJSONLines(t *testing.T, path string, each func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			each(sc.Bytes())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultConfigLocalFiles: the embedded default writes traces and logs
// once each to OTLP-JSON-lines files, serves metrics for scraping, counts
// what it dropped in its own metrics, logs a summary, and never feeds its
// own telemetry back into itself.
func TestDefaultConfigLocalFiles(t *testing.T) {
	d := startDefault(t)
	const spans = 30
	sendDoubled(t, d.http, spans)

	// Two copies of one log record and one gauge point, as JSON.
	logBody := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]},"scopeLogs":[{"logRecords":[
	  {"timeUnixNano":"1700000000000000000","severityNumber":9,"body":{"stringValue":"started"}},
	  {"timeUnixNano":"1700000000000000000","severityNumber":9,"body":{"stringValue":"started"}}]}]}]}`
	if code, b := post(t, "http://"+d.http+"/v1/logs", "application/json", logBody); code != 200 {
		t.Fatalf("logs: %d %s", code, b)
	}
	metricBody := `{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"app"}}]},"scopeMetrics":[{"metrics":[
	  {"name":"queue_depth","gauge":{"dataPoints":[{"timeUnixNano":"1700000000000000000","asInt":"7"}]}}]}]}]}`
	if code, b := post(t, "http://"+d.http+"/v1/metrics", "application/json", metricBody); code != 200 {
		t.Fatalf("metrics: %d %s", code, b)
	}
	waitFor(t, 30*time.Second, "the gauge on the metrics endpoint", func() bool {
		return strings.Contains(get(t, "http://"+d.metrics+"/metrics"), "queue_depth")
	})
	self := get(t, "http://"+d.tel+"/metrics")
	if !strings.Contains(self, `otelcol_processor_dedup_duplicate_items{action="dropped",`) {
		t.Errorf("own metrics lack dropped duplicates:\n%s", grepLines(self, "dedup"))
	}
	waitFor(t, 30*time.Second, "a dedup summary of the traffic in the log", func() bool {
		return strings.Contains(d.g.stderr.String(), summaryLine)
	})
	d.g.stop(t)

	seen := map[string]int{}
	services := map[string]bool{}
	readJSONLines(t, filepath.Join(d.dataDir, "traces.jsonl"), func(line []byte) {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("traces.jsonl: %v", err)
		}
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			name, _ := rss.At(i).Resource().Attributes().Get("service.name")
			services[name.AsString()] = true
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					sp := sss.At(j).Spans().At(k)
					seen[sp.TraceID().String()+sp.SpanID().String()]++
				}
			}
		}
	})
	if len(seen) != spans {
		t.Errorf("traces.jsonl holds %d distinct spans, want %d", len(seen), spans)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("span %s stored %d times", id, n)
		}
	}
	if len(services) != 1 || !services["app"] {
		t.Errorf("traces.jsonl has spans of services %v, want only app's (none of the gateway's own)", services)
	}
	records := 0
	readJSONLines(t, filepath.Join(d.dataDir, "logs.jsonl"), func(line []byte) {
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
		if err != nil {
			t.Fatalf("logs.jsonl: %v", err)
		}
		records += ld.LogRecordCount()
	})
	if records != 1 {
		t.Errorf("logs.jsonl holds %d records, want 1", records)
	}
}

// TestDefaultConfigUpstream: --upstream forwards after dedup over OTLP.
func TestDefaultConfigUpstream(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			sk := newSink(t)
			d := startDefault(t, "--upstream", sk.srv.Endpoint(), "--upstream-protocol", proto)
			const spans = 20
			sendDoubled(t, d.http, spans)
			waitFor(t, 30*time.Second, "every span upstream", func() bool { _, u := sk.counts(); return u >= spans })
			d.g.stop(t)
			if total, unique := sk.counts(); total != spans || unique != spans {
				t.Fatalf("upstream got %d spans, %d distinct; want %d once each", total, unique, spans)
			}
		})
	}
}

func TestRunFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--upstream", "collector:4317"}, "--upstream"},
		{[]string{"run", "--upstream-protocol", "udp", "--upstream", "http://x:1"}, "--upstream-protocol"},
		{[]string{"run", "--config", "x.yaml", "--upstream", "http://x:1"}, "cannot be used with --config"},
		{[]string{"run", "--no-such-flag"}, "unknown flag"},
		{[]string{"frobnicate"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := runCLI(t, tc.args...)
			if cmd.code != 2 || !strings.Contains(cmd.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 mentioning %q", cmd.code, cmd.stderr, tc.want)
			}
		})
	}
}

func TestValidateSubcommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(good, []byte(dedupOnlyConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")), 0o600)
	_ = os.WriteFile(bad, []byte(strings.Replace(dedupOnlyConfig("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"), "dedup: {}", "dedup: {mode: maybe}", 1)), 0o600)
	if r := runCLI(t, "run", "validate", "--config", good); r.code != 0 {
		t.Fatalf("validate good config: exit %d: %s", r.code, r.stderr)
	}
	r := runCLI(t, "run", "validate", "--config", bad)
	if r.code == 0 || !strings.Contains(r.stderr, `mode must be "drop" or "detect"`) {
		t.Fatalf("validate bad config: exit %d, stderr %q", r.code, r.stderr)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

var _ = context.Background
