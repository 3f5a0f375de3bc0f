package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/client"
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
	newest := newestBySeries(h, cfg.Metrics.SplitAttribute)
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
	if !strings.Contains(page, "writers sharing one start: 1 streams split by their writers' connections or export phases") {
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

// newestBySeries returns the newest value the next consumer received of
// each series of the one Sum the requests carry, by its split attribute
// ("" unlabelled).
func newestBySeries(h *metricsHarness, splitAttr string) map[string]float64 {
	newest := map[string]float64{}
	for _, md := range h.sw.got {
		if md.DataPointCount() == 0 {
			continue
		}
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
		for i := range dps.Len() {
			name := ""
			if v, ok := dps.At(i).Attributes().Get(splitAttr); ok {
				name = v.Str()
			}
			newest[name] = float64(dps.At(i).IntValue())
		}
	}
	return newest
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

// TestSharedStartSplitByConnection: two processes sharing one identity and
// one start, each exporting on its own gRPC connection (client.Info's
// address, as the OTLP gRPC receiver sets it), one of whose exports a
// late timer stamps on the other's phase above its value (round 10). The
// connections split the start and place that export on its own writer's
// series: the newest points of the two series add up to the truth, and
// the status page says how the start was split. The same requests with
// the HTTP receiver's addresses (the host's IP alone, one for both): split
// by phase, the late export on the wrong series, as before.
func TestSharedStartSplitByConnection(t *testing.T) {
	const res = "resource service.name=checkout\nscope app\nmetric http_requests sum cumulative monotonic\n"
	const rounds, moved = 14, 10
	truth := float64(10+2*(rounds-1)) + float64(100+10*(rounds-1))
	type export struct {
		tm, v float64
		w     int
	}
	var exports []export
	for k := range rounds {
		a := export{110 + float64(k), 10 + 2*float64(k), 0}
		b := export{110.4 + float64(k), 100 + 10*float64(k), 1}
		if k == moved {
			b.tm = 110.95 + float64(k)
			exports = append(exports, b, a)
			continue
		}
		exports = append(exports, a, b)
	}
	for _, tc := range []struct {
		name    string
		addr    func(w int) net.Addr
		byConn  bool
		correct bool
	}{
		{"grpc", func(w int) net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40001 + w} }, true, true},
		{"http", func(int) net.Addr { return &net.IPAddr{IP: net.IPv4(10, 0, 0, 7)} }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			statusOn(cfg)
			h := newMetricsHarness(t, cfg)
			for _, e := range exports {
				ctx := client.NewContext(context.Background(), client.Info{Addr: tc.addr(e.w)})
				if err := h.p.ConsumeMetrics(ctx, parseMetricsText(t, res+fmt.Sprintf("point 100 %g i=%g\n", e.tm, e.v))); err != nil {
					t.Fatal(err)
				}
			}
			newest := newestBySeries(h, cfg.Metrics.SplitAttribute)
			sum := 0.0
			for _, v := range newest {
				sum += v
			}
			if (sum == truth) != tc.correct {
				t.Errorf("series %v add up to %g; the truth %g (want it: %v)", newest, sum, truth, tc.correct)
			}
			_, _, body := getStatus(t, h.p.(*metricsProcessor).st.status.Handler(), "/status.json")
			var s statuspage.Status
			if err := json.Unmarshal([]byte(body), &s); err != nil {
				t.Fatal(err)
			}
			want := "writers sharing one start: split by export phase"
			if tc.byConn {
				want = "writers sharing one start: split by the connection each writer's points came on (every 1s) into 2 writers"
			}
			if len(s.Streams) != 1 || !strings.HasPrefix(s.Streams[0].Evidence, want) {
				t.Errorf("status streams %+v, want evidence %q", s.Streams, want)
			}
		})
	}
}

// TestConnOf: a request's connection as the receivers name it: the gRPC
// receiver's peer address (IP and port: one per connection, the same IP
// written in 4 or 16 bytes the same connection), the HTTP receiver's IP
// alone; none without client.Info, keyed by the seed.
func TestConnOf(t *testing.T) {
	seed := maphash.MakeSeed()
	of := func(a net.Addr) uint64 {
		return connOf(client.NewContext(context.Background(), client.Info{Addr: a}), seed)
	}
	a := of(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40001})
	if a == 0 || a != of(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7).To4(), Port: 40001}) {
		t.Errorf("one connection named %x and %x", a, of(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7).To4(), Port: 40001}))
	}
	if b := of(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40002}); b == a || b == 0 {
		t.Errorf("two connections named %x and %x", a, b)
	}
	if c := of(&net.IPAddr{IP: net.IPv4(10, 0, 0, 7)}); c == 0 || c == a || c != of(&net.IPAddr{IP: net.IPv4(10, 0, 0, 7)}) {
		t.Errorf("an HTTP sender's address named %x", c)
	}
	if got := connOf(context.Background(), seed); got != 0 {
		t.Errorf("no client.Info named %x", got)
	}
	if got := connOf(context.Background(), maphash.MakeSeed()); got != 0 {
		t.Errorf("no client.Info named %x", got)
	}
	if other := connOf(client.NewContext(context.Background(), client.Info{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40001}}), maphash.MakeSeed()); other == a {
		t.Errorf("another seed named the connection alike: %x", other)
	}
}
