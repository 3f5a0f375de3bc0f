package serieslimitprometheusexporter

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/doubletake/doubletake/exporter/serieslimitprometheusexporter/internal/metadatatest"
)

// gauges is one gauge point for each of the series ids, labelled id=N.
func gauges(ids ...int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "app")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("queue_depth")
	g := m.SetEmptyGauge()
	for _, id := range ids {
		dp := g.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("id", fmt.Sprint(id))
		dp.SetIntValue(int64(id))
		dp.SetTimestamp(1)
	}
	return md
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestExporterServesAtMostMaxSeries: through the real prometheus
// exporter, a scrape shows max_series series; the points of the others are
// refused and counted; the admitted series keep being updated.
func TestExporterServesAtMostMaxSeries(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	addr := freeAddr(t)
	cfg.ServerConfig.NetAddr.Endpoint = addr
	cfg.MaxSeries = 3
	set := exportertest.NewNopSettings(f.Type())
	set.TelemetrySettings = tel.NewTelemetrySettings()
	exp, err := f.CreateMetrics(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()

	if err := exp.ConsumeMetrics(context.Background(), gauges(1, 2, 3, 4, 5)); err != nil {
		t.Fatal(err)
	}
	if err := exp.ConsumeMetrics(context.Background(), gauges(6, 1)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d", resp.StatusCode)
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "queue_depth{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d series served, want 3:\n%s", len(lines), body)
	}
	for _, l := range lines {
		if !strings.Contains(l, `id="1"`) && !strings.Contains(l, `id="2"`) && !strings.Contains(l, `id="3"`) {
			t.Fatalf("served a series past the bound: %s", l)
		}
	}
	// ids 4, 5 and 6 refused, 3 series held, by this exporter's ID.
	attrs := attribute.NewSet(attribute.String("exporter", set.ID.String()))
	metadatatest.AssertEqualExporterPrometheusRefusedPoints(t, tel,
		[]metricdata.DataPoint[int64]{{Attributes: attrs, Value: 3}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualExporterPrometheusSeries(t, tel,
		[]metricdata.DataPoint[int64]{{Attributes: attrs, Value: 3}}, metricdatatest.IgnoreTimestamp())
}

// TestInvalidUTF8Served: a label value with invalid UTF-8 is served with
// U+FFFD in its place; the exporter alone leaves the series out of every
// scrape and logs an error for it each time.
func TestInvalidUTF8Served(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	addr := freeAddr(t)
	cfg.ServerConfig.NetAddr.Endpoint = addr
	exp, err := f.CreateMetrics(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	md := gauges(1)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes().PutStr("user", "bad\xfe")
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("service.name", "app\xff")
	if err := exp.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "user=\"bad\uFFFD\"") || !strings.Contains(string(body), "job=\"app\uFFFD\"") {
		t.Fatalf("scrape %d, want the series with U+FFFD:\n%s", resp.StatusCode, body)
	}
}

// TestForgetsAfterTheExporterDoes: a series is forgotten, and a new one
// admitted in its place, only twice metric_expiration (plus a second)
// after its last point.
func TestForgetsAfterTheExporterDoes(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.MaxSeries = 2
	cfg.MetricExpiration = time.Minute
	lim, err := newLimiter(exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	if n := lim.filter(gauges(1, 2), t0); n != 0 {
		t.Fatalf("refused %d of the first 2", n)
	}
	if n := lim.filter(gauges(2), t0.Add(time.Minute)); n != 0 {
		t.Fatal("refused a known series")
	}
	md := gauges(3)
	if n := lim.filter(md, t0.Add(2*time.Minute)); n != 1 || md.DataPointCount() != 0 {
		t.Fatalf("refused %d, left %d points: want series 3 refused while 1 may still be served", n, md.DataPointCount())
	}
	// Series 1 is past 2m1s since its point; series 2 is not.
	if n := lim.filter(gauges(3), t0.Add(2*time.Minute+2*time.Second)); n != 0 {
		t.Fatal("series 3 refused after series 1 expired")
	}
	if n := lim.filter(gauges(4), t0.Add(2*time.Minute+4*time.Second)); n != 1 {
		t.Fatal("series 4 admitted while 2 and 3 are held")
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.MaxSeries = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "max_series must be at least 1, got 0") {
		t.Fatalf("error %v", err)
	}
}

// BenchmarkScrapeAtBound: one scrape of the real prometheus exporter
// holding DefaultMaxSeries gauge series, with the series bound in front.
func BenchmarkScrapeAtBound(b *testing.B) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg.ServerConfig.NetAddr.Endpoint = addr
	exp, err := f.CreateMetrics(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	ids := make([]int, DefaultMaxSeries*11/10) // 10% past the bound
	for i := range ids {
		ids[i] = i
	}
	if err := exp.ConsumeMetrics(context.Background(), gauges(ids...)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatalf("scrape: %d, %d bytes", resp.StatusCode, n)
		}
	}
}
