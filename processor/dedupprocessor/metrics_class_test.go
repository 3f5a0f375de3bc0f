package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

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

// TestJudgementsSurviveARestart: a peer found before a restart of the
// collector is still a peer after it: its first point after the restart is
// kept (labelled), not dropped while the evidence is gathered again.
func TestJudgementsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := createDefaultConfig()
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	s := uint64(time.Second)
	run := func(reqs ...pmetric.Metrics) []string {
		host, ext := startFileStorage(t, dir)
		defer func() { _ = ext.Shutdown(context.Background()) }()
		sink := new(consumertest.MetricsSink)
		p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(Type), cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			_ = p.ConsumeMetrics(context.Background(), r)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, md := range sink.AllMetrics() {
			got = append(got, strings.TrimSpace(printMetricsText(md)))
		}
		return got
	}
	// A (start 1 s) elected; B (start 3 s) has 50 where A has 10, then 20:
	// no copy, a peer.
	first := run(sumPoint(1*s, 10*s, 10), sumPoint(3*s, 11*s, 50), sumPoint(1*s, 20*s, 20), sumPoint(3*s, 21*s, 60))
	if len(first) != 3 || !strings.Contains(first[2], "service.instance.id=") {
		t.Fatalf("first run delivered %q; want A's 2 points and B's second, labelled", first)
	}
	after := run(sumPoint(3*s, 31*s, 70))
	if len(after) != 1 || !strings.Contains(after[0], "i=70 | service.instance.id=") {
		t.Fatalf("after the restart: %q; want B's point, labelled", after)
	}
}

// TestStatusFoldsTheStream: the status page's class of a stream is folded
// over all its later writers (streams.Fold): a copy and a peer of one
// stream make it a peer's, though the newest event is the copy's.
func TestStatusFoldsTheStream(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	h := newMetricsHarness(t, cfg)
	const res = "resource service.name=checkout\nscope app\nmetric http_requests sum cumulative monotonic\n"
	send := func(start, tm, v int) {
		t.Helper()
		if err := h.p.ConsumeMetrics(context.Background(), parseMetricsText(t, res+fmt.Sprintf("point %d %d i=%d\n", start, tm, v))); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 40 {
		tm := 110 + 10*k
		send(100, tm, tm)
		send(107, tm+2, 3*tm)  // a peer
		send(105, tm+1, tm-50) // a copy of the first writer: 50 less
	}
	st := h.p.(*metricsProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Streams) != 1 || s.Streams[0].Class != "peer" || !strings.HasPrefix(s.Streams[0].Evidence, "peer: ") ||
		s.Streams[0].Diagnosis != streams.ClassPeer.Cause() {
		t.Errorf("status streams %+v, want the stream a peer's", s.Streams)
	}
}
