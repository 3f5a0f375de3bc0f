package dedupprocessor

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doubletake/doubletake/internal/streams"
)

// TestSummaryCountsEveryReason: every streams.Reason a metric point can
// break the single-writer rule for has its own summary field, named after
// it, and the summary's point fields add up to every point the ledger
// holds: a reason the summary misses fails the sum.
func TestSummaryCountsEveryReason(t *testing.T) {
	h := newHarness(t, nil)
	st := h.traces.(*tracesProcessor).st
	var d signalSums
	var want int64
	for a := range numActions {
		for r := streams.Reason(1); r < streams.NumReasons; r++ {
			n := int64(1+a) << (4 * int(r)) // each action and reason a different amount
			d.metrics.points[a][r] = n
			want += n
		}
	}
	d.metrics.received = want
	fields := st.summary().fields(time.Second, d, time.Now().UnixNano())

	named := map[string]int64{}
	for _, f := range fields {
		named[f.Key] = f.Integer
	}
	var got int64
	for k, v := range named {
		if strings.HasPrefix(k, summaryReasonPrefix) && k != summaryReasonPrefix+"received" {
			got += v
		}
	}
	if got != want {
		t.Errorf("the summary's metric point fields add up to %d, the ledger holds %d points: %v", got, want, named)
	}
	for r := streams.Reason(1); r < streams.NumReasons; r++ {
		if v, ok := named[summaryReasonPrefix+r.String()]; !ok || v != d.metrics.reason(r) {
			t.Errorf("summary field %s%s = %d (present %v), want %d", summaryReasonPrefix, r, v, ok, d.metrics.reason(r))
		}
	}
}

// TestLedgerIsWhatTheCountersSay: the page's rows, the summary's sums and
// the OTel counters come from one ledger per service and agree.
func TestLedgerIsWhatTheCountersSay(t *testing.T) {
	h := newHarness(t, nil)
	for range 2 {
		if err := h.sendTraces(traces(spanSpec{service: "a", trace: 1, span: 1, name: "x"}, spanSpec{service: "b", trace: 2, span: 1, name: "y"})); err != nil {
			t.Fatal(err)
		}
	}
	st := h.traces.(*tracesProcessor).st
	sum := st.summary().sums().spans
	if sum.received != 4 || sum.duplicates != 2 {
		t.Fatalf("span ledger sums: received %d, duplicates %d; want 4, 2", sum.received, sum.duplicates)
	}
	if got := h.counter("otelcol_processor_dedup_received_items", sigTraces); got != sum.received {
		t.Errorf("received_items %d, ledger %d", got, sum.received)
	}
	if got := h.counter("otelcol_processor_dedup_duplicate_items", sigTraces); got != sum.duplicates {
		t.Errorf("duplicate_items %d, ledger %d", got, sum.duplicates)
	}
	var rows, copies int64
	for _, r := range st.traces.svcs.statusRows("dropped") {
		rows += r.Received
		copies += r.Copies
	}
	if rows != sum.received || copies != sum.duplicates {
		t.Errorf("page rows: received %d, copies %d; ledger %d, %d", rows, copies, sum.received, sum.duplicates)
	}
}

// TestSummaryEveryInterval: the summary line is logged every interval,
// with traffic or without: an idle gateway says it is alive and that
// nothing arrived, and an interval with a span says what came in.
func TestSummaryEveryInterval(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := processortest.NewNopSettings(Type)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.Telemetry.SummaryInterval = 20 * time.Millisecond
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	// waitFor polls the log until cond holds for its summary lines; only
	// a missing line fails it, never its timing.
	waitFor := func(what string, cond func(lines []observer.LoggedEntry) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond(logs.FilterMessageSnippet(summaryMessage).AllUntimed()) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within a minute; the summary lines: %v", what, logs.FilterMessageSnippet(summaryMessage).AllUntimed())
			}
			time.Sleep(5 * time.Millisecond) // a poll interval
		}
	}
	idle := func(l observer.LoggedEntry) bool {
		f := l.ContextMap()
		return l.Message == summaryIdleMessage && f["spans_received"] == int64(0) && f["logs_received"] == int64(0) &&
			f["metric_points_received"] == int64(0) && f["interval"] == cfg.Telemetry.SummaryInterval
	}
	waitFor("two idle lines before any traffic", func(lines []observer.LoggedEntry) bool {
		return len(lines) >= 2 && idle(lines[0]) && idle(lines[1])
	})

	if err := p.ConsumeTraces(context.Background(), traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 1, "x", 0})); err != nil {
		t.Fatal(err)
	}
	busy := -1
	waitFor("a line with the span and then an idle one again", func(lines []observer.LoggedEntry) bool {
		for i, l := range lines {
			f := l.ContextMap()
			if l.Message == summaryMessage && f["spans_received"] == int64(2) && f["spans_duplicate"] == int64(1) {
				busy = i
			}
		}
		return busy >= 0 && len(lines) > busy+1 && idle(lines[busy+1])
	})
	for _, l := range logs.FilterMessageSnippet(summaryMessage).AllUntimed() {
		if l.Message != summaryMessage && l.Message != summaryIdleMessage {
			t.Errorf("summary line %q", l.Message)
		}
	}
}
