package dedupprocessor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// TestAutoNamesTheCase: with overlap auto (the default) the warning and the
// status page say which case a second writer is, from its values: a
// process sharing the identity (a peer) or a second reader (a copy), with
// the evidence.
func TestAutoNamesTheCase(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	send := func(text string) {
		t.Helper()
		if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, text)); err != nil {
			t.Fatal(err)
		}
	}
	const res = "resource service.name=checkout\nscope app\nmetric http_requests sum cumulative monotonic\n"
	send(res + "point 103 108 i=50\n")
	send(res + "point 100 110 i=10\n") // below the later start's 50: a peer
	var warn map[string]any
	for _, e := range h.logs.All() {
		if e.Message == "metric stream has more than one writer" {
			warn = e.ContextMap()
		}
	}
	if warn == nil {
		t.Fatal("no warning")
	}
	if warn["class"] != "peer" || warn["suggests"] != streams.ClassPeer.Cause() ||
		!strings.HasPrefix(warn["evidence"].(string), "peer: value of the later writer is not the earlier one's less a constant") {
		t.Errorf("warning %v", warn)
	}
	st := h.p.(*metricsProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Streams) != 1 || s.Streams[0].Class != "peer" || !strings.HasPrefix(s.Streams[0].Evidence, "peer: ") ||
		s.Streams[0].Diagnosis != streams.ClassPeer.Cause() {
		t.Errorf("status streams %+v", s.Streams)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, "(peer: value of the later writer") {
		t.Errorf("class and evidence not on the page:\n%.3000s", page)
	}
}
