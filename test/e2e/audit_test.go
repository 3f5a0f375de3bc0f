package e2e

// End-to-end tests of `doubletake audit` against real backends: Debian's
// Prometheus 2.42 loaded through remote write, Jaeger v2.13.0 (module v1.76.0) built
// from test/jaeger once per run, and the HTML report opened in headless
// Chromium.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// runAudit runs `doubletake audit ARGS...` and returns its exit code,
// stdout and stderr.
func runAudit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Minute)
	cmd := exec.CommandContext(ctx, binary, append([]string{"audit"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running audit: %v", err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// remoteWrite sends series to Prometheus's remote-write receiver as
// snappy-compressed prompb, as any remote-write client does.
func remoteWrite(t *testing.T, u string, series []prompb.TimeSeries) {
	t.Helper()
	data, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(snappy.Encode(nil, data)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("remote write: %s: %s", resp.Status, b.String())
	}
}

func promSeries(name string, labels map[string]string, samples []prompb.Sample) prompb.TimeSeries {
	ls := []prompb.Label{{Name: "__name__", Value: name}}
	for k, v := range labels {
		ls = append(ls, prompb.Label{Name: k, Value: v})
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	return prompb.TimeSeries{Labels: ls, Samples: samples}
}

// auditJSON is the part of the JSON report the tests read.
type auditJSON struct {
	Series   int            `json:"series"`
	Classes  map[string]int `json:"classes"`
	Skipped  int            `json:"skipped_names"`
	Start    time.Time      `json:"start"`
	End      time.Time      `json:"end"`
	Affected []struct {
		Series           string   `json:"series"`
		Class            string   `json:"class"`
		Samples          int      `json:"samples"`
		Resets           int      `json:"resets"`
		Chains           int      `json:"chains"`
		Increase         *float64 `json:"increase"`
		DominantIncrease *float64 `json:"dominant_chain_increase"`
		Factor           *float64 `json:"factor"`
	} `json:"affected"`
}

// TestAuditPrometheus loads a real Prometheus 2.42 through remote write
// with one counter written by two interleaved writers, one that restarts,
// one clean counter and a gauge, and checks what audit makes of them: the
// interleaved series ranked first with as many resets as the server's own
// resets() counts, its increase() equal to the server's, the restart not
// called interleaving. The HTML report is then opened in headless Chromium.
func TestAuditPrometheus(t *testing.T) {
	p := startPrometheus(t)

	const step = 15 * time.Second
	now := time.Now().Truncate(time.Second)
	t0 := now.Add(-30 * time.Minute)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	var twice, restart, clean, gauge []prompb.Sample
	for k := range 120 {
		ts := t0.Add(time.Duration(k) * step)
		// Writer A has counted since before the window; writer B, a second
		// reader added 5 minutes in, has fresh state and counts only what
		// happened since. Both count the same events (3 a step).
		twice = append(twice, prompb.Sample{Timestamp: ms(ts), Value: float64(40 + 3*k)})
		if k >= 20 {
			twice = append(twice, prompb.Sample{Timestamp: ms(ts.Add(step / 2)), Value: float64(1 + 3*(k-20))})
		}
		v := float64(500 + 4*k)
		if k >= 60 {
			v = float64(2 + 4*(k-60)) // the process restarted
		}
		restart = append(restart, prompb.Sample{Timestamp: ms(ts), Value: v})
		clean = append(clean, prompb.Sample{Timestamp: ms(ts), Value: float64(7 * k)})
		gauge = append(gauge, prompb.Sample{Timestamp: ms(ts), Value: float64(k % 7)})
	}
	remoteWrite(t, p.writeURL(), []prompb.TimeSeries{
		promSeries("audit_rollouts_total", map[string]string{"job": "twice"}, twice),
		promSeries("audit_rollouts_total", map[string]string{"job": "restart"}, restart),
		promSeries("audit_rollouts_total", map[string]string{"job": "clean"}, clean),
		promSeries("audit_queue_depth", map[string]string{"job": "twice"}, gauge),
	})

	end := now.Add(time.Second)
	dir := t.TempDir()
	html := filepath.Join(dir, "audit.html")
	code, stdout, stderr := runAudit(t, "prometheus", "--url", "http://"+p.addr,
		"--match", `{__name__=~"audit_.*"}`, "--range", "1h", "--end", strconv.FormatInt(end.Unix(), 10),
		"--format", "json", "--html", html)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (findings)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "doubletake audit: done: metric names 2/2, 3 series read, 2 with resets") {
		t.Errorf("no final progress line on stderr:\n%s", stderr)
	}
	var rep auditJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, stdout)
	}
	if rep.Series != 3 || rep.Skipped != 1 || rep.Classes["interleaved"] != 1 || rep.Classes["restart"] != 1 || rep.Classes["clean"] != 1 {
		t.Errorf("series %d skipped %d classes %v, want 3 series (the gauge skipped): 1 interleaved, 1 restart, 1 clean", rep.Series, rep.Skipped, rep.Classes)
	}
	if len(rep.Affected) != 2 {
		t.Fatalf("%d affected series, want 2:\n%s", len(rep.Affected), stdout)
	}
	first, second := rep.Affected[0], rep.Affected[1]
	if first.Series != `audit_rollouts_total{job="twice"}` || first.Class != "interleaved" {
		t.Errorf("ranked first: %s (%s), want the interleaved series", first.Series, first.Class)
	}
	if second.Series != `audit_rollouts_total{job="restart"}` || second.Class != "restart" {
		t.Errorf("ranked second: %s (%s), want the restart, classed restart", second.Series, second.Class)
	}

	// The server's own answers over the same window, at the same time.
	window := fmt.Sprintf("[%dms]", rep.End.Sub(rep.Start).Milliseconds())
	serverAt := func(q string) float64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, _, _, err := p.api.Query(ctx, q, rep.End)
		if err != nil {
			t.Fatalf("query %s: %v", q, err)
		}
		vec, ok := v.(model.Vector)
		if !ok || len(vec) != 1 {
			t.Fatalf("query %s: %v, want one sample", q, v)
		}
		return float64(vec[0].Value)
	}
	for _, s := range rep.Affected {
		sel := s.Series
		if got := serverAt("resets(" + sel + window + ")"); float64(s.Resets) != got {
			t.Errorf("%s: audit counts %d resets, the server's resets() %v", sel, s.Resets, got)
		}
		if got := serverAt("increase(" + sel + window + ")"); s.Increase == nil || math.Abs(*s.Increase-got) > 1e-9*math.Max(1, got) {
			t.Errorf("%s: audit's increase() %v, the server's %v", sel, s.Increase, got)
		}
	}
	if first.Resets != 100 || first.Chains != 2 || first.Samples != 220 {
		t.Errorf("interleaved: resets %d chains %d samples %d, want 100 2 220", first.Resets, first.Chains, first.Samples)
	}
	// Writer A alone counted 3 a step for 119 steps: about 357, extrapolated
	// to the window. increase() over both writers is far larger.
	if first.DominantIncrease == nil || *first.DominantIncrease < 350 || *first.DominantIncrease > 400 ||
		first.Factor == nil || *first.Factor < 10 {
		t.Errorf("interleaved: dominant chain increase %v, factor %v; want about 360 and a factor above 10", first.DominantIncrease, first.Factor)
	}
	if second.Resets != 1 || second.Factor != nil {
		t.Errorf("restart: resets %d factor %v, want 1 and none", second.Resets, second.Factor)
	}

	// The text report ranks the same way.
	code, text, stderr := runAudit(t, "prometheus", "--url", "http://"+p.addr,
		"--match", `audit_rollouts_total`, "--range", "1h", "--end", strconv.FormatInt(end.Unix(), 10), "--progress-interval", "0")
	if code != 1 || !regexpMatch(`(?m)^1\s+interleaved\s+100\s+220\s+2\s.*audit_rollouts_total\{job="twice"\}$`, text) ||
		!regexpMatch(`(?m)^2\s+restart\s+1\s+120\s+2\s.*audit_rollouts_total\{job="restart"\}$`, text) {
		t.Errorf("text report (exit %d):\n%s\n%s", code, text, stderr)
	}
	t.Logf("text report:\n%s", text)

	t.Run("html in chromium", func(t *testing.T) { checkHTMLInChromium(t, html) })
}

func regexpMatch(re, s string) bool {
	return regexp.MustCompile(re).MatchString(s)
}

// TestAuditPrometheusBadInput: what an operator sees when the backend is
// not there or says no.
func TestAuditPrometheusBadInput(t *testing.T) {
	code, _, stderr := runAudit(t, "prometheus", "--url", "http://"+freePort(t), "--progress-interval", "0")
	if code != 4 || !strings.Contains(stderr, "cannot reach http://127.0.0.1:") {
		t.Errorf("unreachable: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runAudit(t, "prometheus")
	if code != 2 || !strings.Contains(stderr, `required flag(s) "url" not set`) {
		t.Errorf("no --url: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runAudit(t, "prometheus", "--url", "http://user:secret@127.0.0.1:9090")
	if code != 2 || strings.Contains(stderr, "secret") {
		t.Errorf("credentials in the URL: exit %d, stderr:\n%s", code, stderr)
	}
	p := startPrometheus(t)
	code, _, stderr = runAudit(t, "prometheus", "--url", "http://"+p.addr, "--match", `{job="nothing"}`, "--progress-interval", "0")
	if code != 4 || !strings.Contains(stderr, `nothing to audit: no series match {job="nothing"}`) {
		t.Errorf("empty result: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runAudit(t, "prometheus", "--url", "http://"+p.addr, "--match", `{job=~"("}`, "--progress-interval", "0")
	if code != 2 || !strings.Contains(stderr, "the backend refused the query") {
		t.Errorf("a selector the server refuses: exit %d, stderr:\n%s", code, stderr)
	}
}

// checkHTMLInChromium opens the report in headless Chromium and checks the
// chart is drawn: the SVG's paths and dips are in the rendered DOM, and a
// screenshot holds the chain's blue and the dips' red.
func checkHTMLInChromium(t *testing.T, html string) {
	bin := chromium(t)
	u := (&url.URL{Scheme: "file", Path: html}).String()
	flags := func() []string {
		return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--hide-scrollbars", "--window-size=1200,1600"}
	}
	run := func(args ...string) []byte {
		t.Helper()
		ctx := ctxTimeout(t, 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
		}
		return out.Bytes()
	}
	dom := string(run(append(flags(), "--dump-dom", u)...))
	for _, want := range []string{`<svg`, `<path class="stored" d="M`, `<path class="chain" d="M`, `<circle class="dip"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if n := strings.Count(dom, `<section class="chart"`); n != 2 {
		t.Errorf("%d charts in the DOM, want 2 (interleaved and restart)", n)
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	if d := os.Getenv("DOUBLETAKE_KEEP_SCREENSHOT"); d != "" {
		shot = d
	}
	run(append(flags(), "--screenshot="+shot, u)...)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	blue := countColor(img, 0x09, 0x69, 0xda)
	red := countColor(img, 0xd1, 0x24, 0x2f)
	grey := countColor(img, 0x8c, 0x95, 0x9f)
	t.Logf("screenshot %v: %d chain-blue, %d dip-red, %d stored-grey pixels", img.Bounds().Size(), blue, red, grey)
	if blue < 500 || red < 100 || grey < 500 {
		t.Errorf("the charts are not drawn: %d chain-blue, %d dip-red, %d stored-grey pixels", blue, red, grey)
	}
}

// countColor counts pixels within a small distance of a colour.
func countColor(img image.Image, r, g, b uint8) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if absDiff(uint8(cr>>8), r) <= 12 && absDiff(uint8(cg>>8), g) <= 12 && absDiff(uint8(cb>>8), b) <= 12 {
				n++
			}
		}
	}
	return n
}

func absDiff(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}

// chromium finds Debian's chromium, installing it when this runs as root
// with apt-get and it is absent.
func chromium(t *testing.T) string {
	t.Helper()
	if p, err := lookPath("chromium"); err == nil {
		return p
	}
	err := fmt.Errorf("chromium: %w", errNotFound)
	if os.Geteuid() == 0 {
		if _, aerr := exec.LookPath("apt-get"); aerr == nil {
			t.Log("installing chromium from Debian's packages")
			ctx := ctxTimeout(t, 15*time.Minute)
			install := func() error {
				cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium")
				cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
				out, err := cmd.CombinedOutput()
				if err != nil {
					return fmt.Errorf("apt-get install chromium: %w: %s", err, lastLines(string(out), 5))
				}
				return nil
			}
			if err = install(); err != nil {
				_ = exec.CommandContext(ctx, "apt-get", "update", "-qq").Run()
				err = install()
			}
			if err == nil {
				var p string
				if p, err = lookPath("chromium"); err == nil {
					return p
				}
			}
		}
	}
	requireDep(t, err, "Chromium (Debian package chromium)")
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Jaeger v2, built once per run from test/jaeger (its own module, so its
// dependency versions never touch ours) into a cache directory keyed by
// that module's go.mod, go.sum and the Go version; DOUBLETAKE_JAEGER_BIN
// names a prebuilt binary instead.
var (
	jaegerOnce sync.Once
	jaegerBin  string
	jaegerErr  error
)

func jaegerBinary(t *testing.T) string {
	t.Helper()
	jaegerOnce.Do(func() { jaegerBin, jaegerErr = buildJaeger(t) })
	requireDep(t, jaegerErr, "Jaeger v2.13.0 (module v1.76.0, go build in test/jaeger)")
	return jaegerBin
}

func buildJaeger(t *testing.T) (string, error) {
	if p := os.Getenv("DOUBLETAKE_JAEGER_BIN"); p != "" {
		return p, nil
	}
	dir := filepath.Join(repoRoot, "test", "jaeger")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	binDir := filepath.Join(cache, "doubletake-test", "jaeger-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(binDir, "jaeger")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	start := time.Now()
	t.Logf("building Jaeger from test/jaeger (about 4 minutes on 2 cores when nothing is cached)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "github.com/jaegertracing/jaeger/cmd/jaeger")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build jaeger: %w\n%s", err, lastLines(string(out), 20))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	t.Logf("built Jaeger in %s", time.Since(start).Round(time.Second))
	return bin, nil
}

// jaeger is a running Jaeger v2 all-in-one: OTLP in, in-memory storage,
// the query service.
type jaeger struct {
	otlpHTTP string
	query    string
}

func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	j := &jaeger{otlpHTTP: freePort(t), query: freePort(t)}
	health, queryGRPC, otlpGRPC := freePort(t), freePort(t), freePort(t)
	// A minimal all-in-one: the shape of cmd/jaeger/internal/all-in-one.yaml
	// without the Jaeger and Zipkin receivers, sampling, batching and the
	// fixed ports.
	cfg := fmt.Sprintf(`
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %s
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, health, j.query, queryGRPC, otlpGRPC, j.otlpHTTP)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startService(t, "jaeger", exec.Command(bin, "--config", path), "http://"+j.query+"/api/v3/services")
	return j
}

// sendTraces exports spans of service through the OpenTelemetry Go SDK
// with copies span processors, each with its own OTLP/HTTP exporter (the
// double-export failure: copies=2). It returns the trace ids.
func sendTraces(t *testing.T, endpoint, service string, copies, traces int) []string {
	t.Helper()
	ctx := ctxTimeout(t, time.Minute)
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	}
	for range copies {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	tr := tp.Tracer("doubletake-e2e")
	var ids []string
	for range traces {
		rctx, root := tr.Start(ctx, "checkout")
		for _, name := range []string{"reserve", "charge"} {
			_, child := tr.Start(rctx, name, trace.WithSpanKind(trace.SpanKindClient))
			child.End()
		}
		root.End()
		ids = append(ids, root.SpanContext().TraceID().String())
		time.Sleep(5 * time.Millisecond) // traces apart in time, for paging
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// countJaegerSpans reads one trace through Jaeger's api/v3 as a UI would
// (raw false) or raw, and counts its spans.
func countJaegerSpans(t *testing.T, query, traceID string, raw bool) int {
	t.Helper()
	u := "http://" + query + "/api/v3/traces/" + traceID
	if raw {
		u += "?raw_traces=true"
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Result struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []json.RawMessage `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	n := 0
	for _, rs := range body.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	return n
}

// TestAuditJaeger sends every span twice (two BatchSpanProcessors of the Go
// SDK) to a real Jaeger v2 and shows audit finds the copies that Jaeger's
// default query hides.
func TestAuditJaeger(t *testing.T) {
	j := startJaeger(t)
	ids := sendTraces(t, j.otlpHTTP, "checkout-twice", 2, 5)
	sendTraces(t, j.otlpHTTP, "checkout-once", 1, 3)

	code, stdout, stderr := runAudit(t, "traces", "--jaeger", "http://"+j.query, "--service", "checkout-twice", "--lookback", "10m", "--format", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (findings)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep struct {
		Traces int    `json:"traces"`
		Read   string `json:"read"`
		Spans  struct {
			Received    int `json:"received"`
			Unique      int `json:"unique"`
			Duplicated  int `json:"duplicated"`
			ExtraCopies int `json:"extra_copies"`
			Conflicting int `json:"conflicting"`
			Groups      []struct {
				Service     string `json:"service"`
				Name        string `json:"name"`
				Duplicated  int    `json:"duplicated"`
				ExtraCopies int    `json:"extra_copies"`
			} `json:"groups"`
		} `json:"spans"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	s := rep.Spans
	if rep.Traces != 5 || s.Received != 30 || s.Unique != 15 || s.Duplicated != 15 || s.ExtraCopies != 15 || s.Conflicting != 0 {
		t.Errorf("traces %d, spans received %d unique %d duplicated %d extra %d conflicting %d; want 5 30 15 15 15 0",
			rep.Traces, s.Received, s.Unique, s.Duplicated, s.ExtraCopies, s.Conflicting)
	}
	groups := map[string]int{}
	for _, g := range s.Groups {
		groups[g.Service+" "+g.Name] = g.Duplicated
	}
	for _, name := range []string{"checkout", "reserve", "charge"} {
		if groups["checkout-twice "+name] != 5 {
			t.Errorf("group %q: %d duplicated ids, want 5 (groups %v)", name, groups["checkout-twice "+name], groups)
		}
	}
	if !strings.Contains(rep.Read, "raw_traces=true") {
		t.Errorf("read: %q", rep.Read)
	}

	// What Jaeger's default query shows: one copy of each span.
	if n := countJaegerSpans(t, j.query, ids[0], false); n != 3 {
		t.Errorf("Jaeger's default query shows %d spans of trace %s, want 3 (DeduplicateSpans)", n, ids[0])
	}
	// Jaeger v2.13.0's memory store hands the query service the trace it
	// holds, and the adjusters rewrite it in place: after one default
	// query the copies are gone from storage too. An audit must run
	// before the traces are viewed (memory storage only).
	if n := countJaegerSpans(t, j.query, ids[0], true); n != 3 {
		t.Errorf("raw read after a default query: %d spans, want 3 (the memory store rewritten by the adjusters)", n)
	}
	if n := countJaegerSpans(t, j.query, ids[1], true); n != 6 {
		t.Errorf("raw read of a trace never queried by default: %d spans, want 6", n)
	}

	code, stdout, stderr = runAudit(t, "traces", "--jaeger", "http://"+j.query, "--service", "checkout-once", "--lookback", "10m")
	if code != 0 || !strings.Contains(stdout, "no duplicate span ids") {
		t.Errorf("clean service: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = runAudit(t, "traces", "--jaeger", "http://"+j.query, "--service", "nobody", "--lookback", "10m")
	if code != 4 || !strings.Contains(stderr, `knows no service "nobody"`) {
		t.Errorf("unknown service: exit %d\n%s", code, stderr)
	}
	// --limit 2 pages five traces through split windows.
	code, stdout, stderr = runAudit(t, "traces", "--jaeger", "http://"+j.query, "--service", "checkout-twice", "--lookback", "10m", "--limit", "2", "--format", "json")
	if code != 1 || !strings.Contains(stdout, `"traces": 5`) {
		t.Errorf("paged: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestAuditOTLPFiles writes doubled spans through the real gateway's file
// exporter, plain and zstd-compressed, as a run without dedup would, and
// audits the files (and a gzip copy); then runs the embedded default
// config, whose dedup processor drops the copies, and audits its sink.
func TestAuditOTLPFiles(t *testing.T) {
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
  file/plain:
    path: %s/traces.jsonl
    format: json
  file/zstd:
    path: %s/traces.jsonl.zst
    format: json
    compression: zstd
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/plain, file/zstd]
`, health, grpcAddr, httpAddr, dir, dir))
	sendTraces(t, httpAddr, "shop", 2, 4)
	g.stop(t)

	plain := filepath.Join(dir, "traces.jsonl")
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(data)
	_ = zw.Close()
	gzPath := filepath.Join(dir, "traces.jsonl.gz")
	if err := os.WriteFile(gzPath, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	type otlpReport struct {
		Files []struct {
			Compression string `json:"compression"`
			Requests    int    `json:"requests"`
		} `json:"files"`
		Analysis struct {
			Spans struct {
				Received    int `json:"received"`
				Unique      int `json:"unique"`
				Duplicated  int `json:"duplicated"`
				ExtraCopies int `json:"extra_copies"`
			} `json:"spans"`
		} `json:"analysis"`
	}
	for path, compression := range map[string]string{plain: "none", filepath.Join(dir, "traces.jsonl.zst"): "zstd-length-prefixed", gzPath: "gzip"} {
		code, stdout, stderr := runAudit(t, "otlp", path, "--format", "json")
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\n%s\n%s", path, code, stdout, stderr)
			continue
		}
		var rep otlpReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		s := rep.Analysis.Spans
		if rep.Files[0].Compression != compression || rep.Files[0].Requests < 2 || s.Received != 24 || s.Unique != 12 || s.Duplicated != 12 || s.ExtraCopies != 12 {
			t.Errorf("%s: files %+v spans %+v; want %s, 24 spans received, 12 ids twice", path, rep.Files, s, compression)
		}
	}

	// The embedded default: dedup drops the copies before the sink.
	d := t.TempDir()
	health, grpcAddr, httpAddr = freePort(t), freePort(t), freePort(t)
	g = startGateway(t, health, nil, "--grpc-endpoint", grpcAddr, "--http-endpoint", httpAddr,
		"--metrics-endpoint", freePort(t), "--telemetry-endpoint", freePort(t), "--health-endpoint", health, "--data-dir", d,
		"--status-endpoint", freePort(t))
	sendTraces(t, httpAddr, "shop", 2, 4)
	g.stop(t)
	code, stdout, stderr := runAudit(t, "otlp", filepath.Join(d, "traces.jsonl"))
	if code != 0 || !strings.Contains(stdout, "spans: 12 received, 12 unique, 0 duplicated ids") {
		t.Errorf("the default config's sink: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestAuditPrometheusScale measures an audit of many series in a real
// Prometheus (wall time, peak RSS of the audit process). It runs only with
// DOUBLETAKE_AUDIT_SCALE=N (series per layout); numbers go to docs/benchmarks.md.
func TestAuditPrometheusScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DOUBLETAKE_AUDIT_SCALE"))
	if n <= 0 {
		t.Skip("set DOUBLETAKE_AUDIT_SCALE=N to measure an audit of N series")
	}
	p := startPrometheus(t)
	const samples, step = 200, 15 * time.Second
	now := time.Now().Truncate(time.Second)
	first := now.Add(-samples * step)
	layouts := []struct {
		prefix  string
		perName int
	}{{"scale_wide", 1000}, {"scale_narrow", 100}}
	for _, l := range layouts {
		var batch []prompb.TimeSeries
		flush := func() {
			if len(batch) > 0 {
				remoteWrite(t, p.writeURL(), batch)
				batch = batch[:0]
			}
		}
		for i := range n {
			name := fmt.Sprintf("%s_%03d_total", l.prefix, i/l.perName)
			ss := make([]prompb.Sample, samples)
			for k := range ss {
				v := float64(k)
				if i%1000 == 7 && k%2 == 1 {
					v = float64(k / 4)
				}
				ss[k] = prompb.Sample{Timestamp: first.Add(time.Duration(k) * step).UnixMilli(), Value: v}
			}
			batch = append(batch, promSeries(name, map[string]string{"instance": fmt.Sprintf("host-%d", i)}, ss))
			if len(batch) == 500 {
				flush()
			}
		}
		flush()
	}
	for _, l := range layouts {
		start := time.Now()
		ctx := ctxTimeout(t, 30*time.Minute)
		cmd := exec.CommandContext(ctx, binary, "audit", "prometheus", "--url", "http://"+p.addr, "--match", `{__name__=~"`+l.prefix+`_.*"}`,
			"--range", "1h", "--end", strconv.FormatInt(now.Add(time.Second).Unix(), 10), "--format", "json", "-o", filepath.Join(t.TempDir(), "r.json"),
			"--progress-interval", "10s")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		elapsed := time.Since(start)
		var ee *exec.ExitError
		if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
			t.Fatalf("%s: %v\n%s", l.prefix, err, stderr.String())
		}
		rss := int64(0)
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss // KiB on Linux
		}
		t.Logf("%s: %d series (%d per name, %d samples each): %s, %.0f series/s, peak RSS %d MiB\n%s",
			l.prefix, n, l.perName, samples, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), rss/1024, lastLines(stderr.String(), 2))
	}
}
