package dedupprocessor

import (
	"context"
	"testing"
)

// TestHeldRestartSentAtShutdown: a restart held when the gateway stops,
// before its elected writer was overdue and before any later request, is
// sent downstream by Shutdown, as the stream's own (unlabelled), not lost.
func TestHeldRestartSentAtShutdown(t *testing.T) {
	h := newMetricsHarness(t, createDefaultConfig())
	for _, r := range []struct {
		now  int64
		text string
	}{
		{110e9, "point 100 110 i=10"},
		{120e9, "point 100 120 i=20"},
		{125e9, "point 121 125 i=2"}, // held: the old writer is due until 150 s
	} {
		h.now = r.now
		md := parseMetricsText(t, "resource service.name=worker\nscope app\nmetric jobs_total sum cumulative monotonic\n"+r.text+"\n")
		if err := h.p.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.sw.got); n != 2 {
		t.Fatalf("%d requests forwarded before shutdown, want 2 (the restart's point held)", n)
	}
	if err := h.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.sw.got); n != 3 {
		t.Fatalf("%d requests forwarded after shutdown, want the held restart's too", n)
	}
	dp := h.sw.got[2].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if dp.IntValue() != 2 || dp.StartTimestamp() != 121e9 || dp.Attributes().Len() != 0 {
		t.Fatalf("sent at shutdown: value %d start %d attributes %v; want the restart's point, unlabelled", dp.IntValue(), dp.StartTimestamp(), dp.Attributes().AsRaw())
	}
	if s := h.p.(*metricsProcessor).st.metrics.judgeStats(); s.HeldPoints != 0 || s.HeldBytes != 0 {
		t.Fatalf("held after shutdown: %+v", s)
	}
}
