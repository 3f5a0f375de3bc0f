package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

// startScrapingPrometheus runs a real Prometheus that scrapes the targets'
// /metrics every second as job "doubletake".
func startScrapingPrometheus(t *testing.T, targets ...string) promv1.API {
	t.Helper()
	bin, err := lookPath("prometheus")
	requireDep(t, err, "Prometheus (Debian package prometheus, 2.42)")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: doubletake
    static_configs:
      - targets: ["%s"]
`, strings.Join(targets, `", "`))
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startService(t, "prometheus", exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn"), "http://"+addr+"/-/ready")
	c, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return promv1.NewAPI(c)
}

// panelQuery is one query of one dashboard panel.
type panelQuery struct {
	panel, expr string
}

// dashboardQueries reads every panel's PromQL from a Grafana dashboard, rows
// included, with the variables set as the dashboard's "All" sets them and
// $__rate_interval as Grafana computes it for a 1 s scrape interval.
func dashboardQueries(t *testing.T, path string) []panelQuery {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name     string `json:"name"`
				Type     string `json:"type"`
				AllValue string `json:"allValue"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			if v.AllValue == "" {
				t.Fatalf("%s: variable %s has no allValue", path, v.Name)
			}
			vars = append(vars, "$"+v.Name, v.AllValue)
		}
	}
	// Grafana's $__rate_interval: max(4 × scrape interval, step + scrape interval).
	vars = append(vars, "$__rate_interval", "4s")
	repl := strings.NewReplacer(vars...)
	var out []panelQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				e := repl.Replace(tg.Expr)
				if strings.Contains(e, "$") {
					t.Fatalf("panel %q: query %q keeps a variable the test does not know", p.Title, e)
				}
				out = append(out, panelQuery{panel: p.Title, expr: e})
			}
		}
	}
	walk(d.Panels)
	return out
}

// hasValue reports whether a range query's result holds a finite, non-zero
// sample: the panel would draw something.
func hasValue(v model.Value) bool {
	m, ok := v.(model.Matrix)
	if !ok {
		return false
	}
	for _, s := range m {
		for _, p := range s.Values {
			f := float64(p.Value)
			if f != 0 && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return true
			}
		}
	}
	return false
}

// TestDashboardQueriesReturnData: every query of deploy/grafana's dashboard,
// run by a real Prometheus scraping two gateways, draws a non-zero value.
// One is the embedded default, its span window made small so that it
// evicts, while the JS SDK exports every span twice and a second metric
// pipeline overlaps the first, two processes share one identity, and a
// client sends a request nested too deep for the guard. The other forwards
// to an upstream (--upstream) that refuses one span for good after the
// gateway accepted it (a loss) and then holds the next one back (retried
// from the persistent queue, which is therefore not empty).
func TestDashboardQueriesReturnData(t *testing.T) {
	queries := dashboardQueries(t, filepath.Join(repoRoot, "deploy", "grafana", "doubletake.json"))
	if len(queries) < 12 {
		t.Fatalf("dashboard has %d queries, want at least 12", len(queries))
	}
	jsClient(t) // install before starting anything
	d := startDefault(t, "--set", "processors::dedup::traces::max_spans=16", "--set", "processors::dedup::traces::nested::detect=true")
	up := newCollectorUpstream(t, freePort(t))
	var hold atomic.Bool
	up.mu.Lock()
	up.refuse = func(td ptrace.Traces) error {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if sp.Name() == "poison" {
						return consumererror.NewPermanent(status.Error(codes.InvalidArgument, "poison span refused"))
					}
				}
			}
		}
		if hold.Load() {
			return errors.New("held back") // retryable
		}
		return nil
	}
	up.mu.Unlock()
	du := startDefault(t, "--upstream", "http://"+up.addr, "--upstream-max-request-bytes", "2097152")
	t.Cleanup(func() { hold.Store(false) }) // before the gateway stops
	prom := startScrapingPrometheus(t, d.tel, du.tel)
	begin := time.Now()
	// Load only once Prometheus scrapes: a counter's first sample shows no
	// increase, and the load lasts seconds.
	waitFor(t, 30*time.Second, "Prometheus to scrape the gateway", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, _, _, err := prom.Query(ctx, `up{job="doubletake"} == 1`, time.Now())
		vec, ok := v.(model.Vector)
		return err == nil && ok && len(vec) == 2
	})

	// The upstream gateway: one span lost after acceptance, then one held
	// back in the queue.
	if code := postProto(t, "http://"+du.http+"/v1/traces", tracesProto(t, oneSpan("poisoned", "poison", 1))); code != 200 {
		t.Fatalf("posting the poison span: %d", code)
	}
	waitFor(t, 30*time.Second, "the loss to be counted", func() bool {
		return strings.Contains(get(t, "http://"+du.tel+"/metrics"), `otelcol_processor_dedup_lost_items{signal="traces"} 1`)
	})
	hold.Store(true)
	if code := postProto(t, "http://"+du.http+"/v1/traces", tracesProto(t, oneSpan("held", "op", 2))); code != 200 {
		t.Fatalf("posting the held span: %d", code)
	}
	// A span larger than the upstream takes: refused at the receiver.
	big := oneSpan("big", "op", 3)
	big.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("blob", strings.Repeat("x", 3<<20))
	if code := postProto(t, "http://"+du.http+"/v1/traces", tracesProto(t, big)); code == 200 {
		t.Fatalf("a span larger than the upstream takes was accepted")
	}
	// One span id with two contents: a conflict.
	for _, name := range []string{"first", "second"} {
		if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, oneSpan("conflicted", name, 4))); code != 200 {
			t.Fatalf("posting span %s: %d", name, code)
		}
	}
	// One operation recorded twice, by two scopes: a nested duplicate.
	if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, nestedPair("doubled"))); code != 200 {
		t.Fatalf("posting the nested pair: %d", code)
	}
	if code, msg := postOTLP(t, "http://"+d.http+"/v1/traces", "application/json", "", guardtest.DeepTracesJSON(1000)); code != 400 {
		t.Fatalf("a request nested too deep: %d %s, want 400", code, msg)
	}

	base := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + d.http, "CLIENT_PROTOCOL=http/protobuf",
		"CLIENT_ROLLOUTS=50", "CLIENT_ROLLOUT_MS=100", "CLIENT_METRIC_INTERVAL_MS=400", "CLIENT_SECOND_DELAY_MS=1500"}
	runJS(t, append(base, "CLIENT_SERVICE=double", "CLIENT_MODE=traces-double,metrics-double")...)
	sendCollision(t, d.http, "collider", "jobs_done")
	// With overlap: auto the collision's writers are peers, each its own
	// series: no election. A restart is elected whatever the policy.
	sendRestart(t, d.http, "restarter", "jobs_done")

	missing := map[string]bool{}
	for _, q := range queries {
		missing[q.panel+": "+q.expr] = true
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(missing) > 0 && time.Now().Before(deadline) {
		for _, q := range queries {
			key := q.panel + ": " + q.expr
			if !missing[key] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			v, warn, _, err := prom.QueryRange(ctx, q.expr, promv1.Range{Start: begin, End: time.Now(), Step: time.Second})
			cancel()
			if err != nil {
				t.Fatalf("panel %q: query %s: %v", q.panel, q.expr, err)
			}
			if len(warn) > 0 {
				t.Errorf("panel %q: query %s: warnings %v", q.panel, q.expr, warn)
			}
			if hasValue(v) {
				delete(missing, key)
			}
		}
		if len(missing) > 0 {
			time.Sleep(500 * time.Millisecond) // the next scrape; the loop has a deadline
		}
	}
	for k := range missing {
		t.Errorf("no data for panel %s", k)
	}
}

// nestedPair is one request of a SERVER span and its child SERVER span of
// another scope, same name and nearly the same time: double
// instrumentation.
func nestedPair(svc string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", svc)
	for i, scope := range []string{"otelhttp", "mux"} {
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{9, 9, 9})
		sp.SetSpanID(pcommon.SpanID{9, byte(i + 1)})
		if i > 0 {
			sp.SetParentSpanID(pcommon.SpanID{9, 1})
		}
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET /items")
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + uint64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_010_000_000 - uint64(i)*1000))
	}
	return td
}
