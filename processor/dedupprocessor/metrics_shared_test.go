package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// TestSharedStartSplit: two processes sharing one identity and one start
// time, each exporting every second at its own phase (A at whole seconds
// counting 2 a second, B 400 ms later counting 4 a second), through the
// default config: once their export interval is found (A's fifth point),
// A's points are labelled as its own series (WriterName-1), B's pass
// unlabelled; the warning says the writers share a start, the status page
// that they were split by export phase, and
// otelcol_processor_dedup_writer_rules counts the split.
func TestSharedStartSplit(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	const res = "resource service.name=checkout\nscope app\nmetric http_requests sum cumulative monotonic\n"
	for k := range 10 {
		for _, p := range []struct{ tm, v float64 }{{110 + float64(k), 10 + 2*float64(k)}, {110.4 + float64(k), 40 + 4*float64(k)}} {
			if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, res+fmt.Sprintf("point 100 %g i=%g\n", p.tm, p.v))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The newest point of each series: A's 28 labelled, B's 76 not.
	newest := map[string]float64{}
	for _, md := range h.sw.got {
		if md.DataPointCount() == 0 {
			continue
		}
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			name := ""
			if v, ok := dp.Attributes().Get(cfg.Metrics.SplitAttribute); ok {
				name = v.Str()
			}
			newest[name] = float64(dp.IntValue())
		}
	}
	sharer := streams.SharerName(100e9, 1)
	if len(newest) != 2 || newest[""] != 76 || newest[sharer] != 28 {
		t.Fatalf("series %v, want B's 76 unlabelled and A's 28 as %s", newest, sharer)
	}
	st := h.p.(*metricsProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Streams) != 1 || s.Streams[0].Class != "peer" ||
		!strings.HasPrefix(s.Streams[0].Evidence, "writers sharing one start: split by export phase (every 1s) into 2 writers") {
		t.Errorf("status streams %+v", s.Streams)
	}
	if s.WriterRules == nil || s.WriterRules.SharedSplit != 1 || s.WriterRules.SharedNow != 1 || s.WriterRules.SharedUnsplit != 0 {
		t.Errorf("writer rules %+v", s.WriterRules)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, "writers sharing one start: 1 streams split by export phase") {
		t.Errorf("writer rules not on the page:\n%.3000s", page)
	}
	// The warning (one per stream) came at the first fall, while the
	// interval was being learnt.
	var warned bool
	for _, e := range h.logs.All() {
		if m := e.ContextMap(); e.Message == "metric stream has more than one writer" &&
			strings.HasPrefix(fmt.Sprint(m["evidence"]), "writers sharing one start: not split (yet)") {
			warned = true
		}
	}
	if !warned {
		t.Error("no warning naming the shared start")
	}
	if got := writerRules(t, h); got != [numRules]int64{0, 1, 0, 0} {
		t.Errorf("otelcol_processor_dedup_writer_rules quiet, split, unsplit: %v, want [0 1 0]", got)
	}
}

// writerRules reads otelcol_processor_dedup_writer_rules by rule: quiet,
// shared_start_split, shared_start_unsplit, continued.
func writerRules(t *testing.T, h *metricsHarness) [numRules]int64 {
	t.Helper()
	m, err := h.tel.GetMetric("otelcol_processor_dedup_writer_rules")
	if err != nil {
		t.Fatal(err)
	}
	var out [numRules]int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		r, _ := dp.Attributes.Value("rule")
		for k, name := range ruleNames {
			if r.AsString() == name {
				out[k] += dp.Value
			}
		}
	}
	return out
}

// TestSharedStartUnsplitNamed: writers whose exports come within 50 ms of
// each other cannot be split: their falls are dropped and counted, and
// the status page says so.
func TestSharedStartUnsplitNamed(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	const res = "resource service.name=checkout\nscope app\nmetric http_requests sum cumulative monotonic\n"
	for k := range 5 {
		tm := 110 + float64(k)
		md := parseMetricsText(t, res+fmt.Sprintf("point 100 %g i=%g\npoint 100 %g i=%g\n", tm, 1000+tm, tm+0.002, tm))
		if err := h.p.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	st := h.p.(*metricsProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Streams) != 1 || s.Streams[0].Event != "decrease" || !strings.HasPrefix(s.Streams[0].Evidence, "writers sharing one start: not split") {
		t.Errorf("status streams %+v", s.Streams)
	}
	if s.WriterRules == nil || s.WriterRules.SharedUnsplit != 5 || s.WriterRules.SharedSplit != 0 {
		t.Errorf("writer rules %+v", s.WriterRules)
	}
	if got := writerRules(t, h); got != [numRules]int64{0, 0, 5, 0} {
		t.Errorf("otelcol_processor_dedup_writer_rules quiet, split, unsplit: %v, want [0 0 5]", got)
	}
}
