package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
