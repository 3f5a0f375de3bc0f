package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// prometheus is a real Prometheus server (Debian's package) accepting
// remote write.
type prometheus struct {
	addr string
	api  promv1.API
}

// startPrometheus runs prometheus with the remote-write receiver on a free
// port and an empty TSDB, and waits until it is ready.
func startPrometheus(t *testing.T) *prometheus {
	t.Helper()
	bin, err := lookPath("prometheus")
	requireDep(t, err, "Prometheus (Debian package prometheus, 2.42)")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startService(t, "prometheus", exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=warn"), "http://"+addr+"/-/ready")
	c, err := api.NewClient(api.Config{Address: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	return &prometheus{addr: addr, api: promv1.NewAPI(c)}
}

// writeURL is the remote-write endpoint.
func (p *prometheus) writeURL() string { return "http://" + p.addr + "/api/v1/write" }

// scalar evaluates a PromQL expression that yields one sample (or none:
// ok false).
func (p *prometheus) scalar(t *testing.T, q string) (float64, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, _, _, err := p.api.Query(ctx, q, time.Now())
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		t.Fatalf("query %s: got %s, want a vector", q, v.Type())
	}
	switch len(vec) {
	case 0:
		return 0, false
	case 1:
		return float64(vec[0].Value), true
	default:
		t.Fatalf("query %s: %d series, want one: %v", q, len(vec), vec)
		return 0, false
	}
}

func (p *prometheus) mustScalar(t *testing.T, q string) float64 {
	t.Helper()
	v, ok := p.scalar(t, q)
	if !ok {
		t.Fatalf("query %s: no result", q)
	}
	return v
}

// metricsSideBySideConfig sends the same metrics to Prometheus through a
// pipeline without dedup and one with it, told apart by an external label.
// The exporters make no target_info series, which processes sharing one
// resource would write in turns (see peersConfig).
func metricsSideBySideConfig(health, grpcAddr, httpAddr, writeURL, dedupYAML string) string {
	return fmt.Sprintf(`
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
processors:
  dedup:
%s
exporters:
  prometheusremotewrite/plain:
    endpoint: %s
    external_labels: {pipeline: plain}
    tls: {insecure: true}
    target_info: {enabled: false}
  prometheusremotewrite/dedup:
    endpoint: %s
    external_labels: {pipeline: dedup}
    tls: {insecure: true}
    target_info: {enabled: false}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics/plain:
      receivers: [otlp]
      exporters: [prometheusremotewrite/plain]
    metrics/dedup:
      receivers: [otlp]
      processors: [dedup]
      exporters: [prometheusremotewrite/dedup]
`, health, grpcAddr, httpAddr, dedupYAML, writeURL, writeURL)
}
