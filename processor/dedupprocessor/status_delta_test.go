package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// TestStatusDeltaChains: the status page's writer_rules count the later
// chains of delta streams by class, as verify and audit do (JudgeStats):
// a chain undecided while its evidence is consistent with a copy, then a
// peer once it is not, on status.json and on the page.
func TestStatusDeltaChains(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	send := func(metric string, start, end, v float64) {
		t.Helper()
		text := fmt.Sprintf("resource service.name=batch\nscope app\nmetric %s sum delta monotonic\npoint %g %g i=%g\n", metric, start, end, v)
		if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, text)); err != nil {
			t.Fatal(err)
		}
	}
	rules := func() statuspage.WriterRulesStatus {
		t.Helper()
		_, _, body := getStatus(t, h.p.(*metricsProcessor).st.status.Handler(), "/status.json")
		var s statuspage.Status
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		if s.WriterRules == nil {
			t.Fatalf("no writer_rules in %s", body)
		}
		return *s.WriterRules
	}
	// The steps of the golden case auto_delta_peer.
	send("jobs", 100, 110, 10)
	send("jobs", 110, 120, 10)
	send("jobs", 113, 118, 5) // a second chain: undecided
	if r := rules(); r.DeltaUndecided != 1 || r.DeltaPeers != 0 || r.DeltaCopies != 0 {
		t.Errorf("after the second chain's first point: %+v, want 1 undecided", r)
	}
	send("jobs", 120, 130, 10)
	send("jobs", 118, 128, 30)
	send("jobs", 130, 140, 10)
	send("jobs", 128, 138, 1)
	send("jobs", 140, 150, 10)
	send("jobs", 138, 148, 30) // a peer
	if r := rules(); r.DeltaPeers != 1 || r.DeltaUndecided != 0 || r.DeltaCopies != 0 {
		t.Errorf("after the peer's deciding point: %+v, want 1 peer", r)
	}
	_, _, page := getStatus(t, h.p.(*metricsProcessor).st.status.Handler(), "/")
	if !strings.Contains(page, "delta chains: 0 copies dropped, 1 peers kept as their own series, 0 undecided (held)") {
		t.Errorf("delta chains not on the page:\n%.3000s", page)
	}
}

// TestStatusDeltaAcrossGap: the status page's writer_rules count the delta
// points that went on across intervals their writer sent nothing for, and
// those across intervals known empty (the steps of the golden case
// auto_delta_empty_interval: the elected writer's exports at 120 and 140
// carry only its gauge), as otelcol_processor_dedup_writer_rules does.
func TestStatusDeltaAcrossGap(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	send := func(text string) {
		t.Helper()
		if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, "resource service.name=batch\n"+text)); err != nil {
			t.Fatal(err)
		}
	}
	jobs := func(start, end, v float64) string {
		return fmt.Sprintf("scope app\nmetric jobs sum delta monotonic\npoint %g %g i=%g\n", start, end, v)
	}
	gauge := func(end float64) string { return fmt.Sprintf("scope http\nmetric active gauge\npoint 0 %g v=1\n", end) }
	send(jobs(100, 110, 1) + gauge(110))
	send(jobs(113, 118, 5))
	send(gauge(120))
	send(jobs(118, 128, 10))
	send(jobs(120, 130, 1) + gauge(130))
	send(jobs(128, 138, 10))
	send(jobs(130, 142, 1)) // its next interval, longer: no gap
	_, _, body := getStatus(t, h.p.(*metricsProcessor).st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if r := s.WriterRules; r == nil || r.DeltaAcrossGap != 1 || r.DeltaEmpty != 1 || r.DeltaContinued != 0 {
		t.Errorf("writer_rules %+v, want 1 across a gap, 1 of them empty", r)
	}
	_, _, page := getStatus(t, h.p.(*metricsProcessor).st.status.Handler(), "/")
	if !strings.Contains(page, "that went on across intervals their writer sent nothing for: 1, 1 of them across intervals known empty") {
		t.Errorf("the points across a gap not on the page:\n%.3000s", page)
	}
}

// TestExportTimesForgottenCounted: past metrics.max_export_times the
// oldest exports are forgotten, each counted in
// otelcol_processor_dedup_evicted_entries{signal=metrics,
// reason=export_times}; with room, none is.
func TestExportTimesForgottenCounted(t *testing.T) {
	for _, tc := range []struct {
		max, want int64
	}{{max: 2, want: 3}, {max: 1000, want: 0}} {
		cfg := createDefaultConfig()
		cfg.Metrics.MaxExportTimes = int(tc.max)
		h := newMetricsHarness(t, cfg)
		for k := range 5 { // five exports, each a delta point and a gauge at one time
			text := fmt.Sprintf("resource service.name=batch\nscope app\nmetric jobs sum delta monotonic\npoint %d %d i=1\nscope http\nmetric active gauge\npoint 0 %d v=1\n", 100+10*k, 110+10*k, 110+10*k)
			if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, text)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := h.tel.GetMetric("otelcol_processor_dedup_evicted_entries")
		var got int64
		if err == nil {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if r, _ := dp.Attributes.Value("reason"); r.AsString() == "export_times" {
					if s, _ := dp.Attributes.Value("signal"); s.AsString() == "metrics" {
						got += dp.Value
					}
				}
			}
		}
		if got != tc.want {
			t.Errorf("max_export_times %d: %d exports forgotten, want %d", tc.max, got, tc.want)
		}
	}
}
