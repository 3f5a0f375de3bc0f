package dedupotlpexporter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// spansOf builds a request of n spans over three resources; span i is
// named name(i).
func spansOf(n int, name func(int) string) ptrace.Traces {
	td := ptrace.NewTraces()
	var ss ptrace.SpanSlice
	for i := range n {
		if i%(n/3+1) == 0 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc%d", i))
			ss = rs.ScopeSpans().AppendEmpty().Spans()
		}
		s := ss.AppendEmpty()
		s.SetName(name(i))
		s.SetTraceID(pcommon.TraceID{1, byte(i >> 8), byte(i)})
		s.SetSpanID(pcommon.SpanID{1, byte(i >> 8), byte(i)})
	}
	return td
}

func names(td ptrace.Traces) []string {
	var out []string
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				out = append(out, s.Name())
			}
		}
	}
	return out
}

// TestSplittingLosesOnlyTheRefusedItems: the upstream refuses for good any
// request holding a "bad" span; the batch is split until only the bad
// spans are lost, every other span is delivered exactly once, and the
// resources stay with their spans.
func TestSplittingLosesOnlyTheRefusedItems(t *testing.T) {
	bad := map[int]bool{7: true, 40: true, 41: true, 99: true}
	td := spansOf(100, func(i int) string {
		if bad[i] {
			return fmt.Sprintf("bad%d", i)
		}
		return fmt.Sprintf("ok%d", i)
	})
	delivered := map[string]int{}
	sends := 0
	send := func(_ context.Context, td ptrace.Traces) error {
		sends++
		for _, n := range names(td) {
			if strings.HasPrefix(n, "bad") {
				return consumererror.NewPermanent(status.Error(codes.InvalidArgument, "bad span"))
			}
		}
		for _, rs := range td.ResourceSpans().All() {
			if _, ok := rs.Resource().Attributes().Get("service.name"); !ok {
				t.Error("a split resource lost its attributes")
			}
		}
		for _, n := range names(td) {
			delivered[n]++
		}
		return nil
	}
	var lost []string
	err := sendSplitting(context.Background(), td, send, tracesOps, func(_ context.Context, l ptrace.Traces, cause error) {
		if status.Code(cause) != codes.InvalidArgument {
			t.Errorf("lost with cause %v", cause)
		}
		lost = append(lost, names(l)...)
	})
	if !consumererror.IsPermanent(err) {
		t.Fatalf("err = %v, want the permanent refusal", err)
	}
	if len(lost) != 4 {
		t.Fatalf("lost %v, want exactly the 4 bad spans", lost)
	}
	for _, n := range lost {
		if !strings.HasPrefix(n, "bad") {
			t.Fatalf("lost %q, a span the upstream did not refuse", n)
		}
	}
	if len(delivered) != 96 {
		t.Fatalf("delivered %d distinct spans, want 96", len(delivered))
	}
	for n, c := range delivered {
		if c != 1 {
			t.Fatalf("span %s delivered %d times", n, c)
		}
	}
	t.Logf("%d sends for 100 spans with 4 refused", sends)
}

// TestSplittingLeavesOnlyTheRetryableItems: when a half fails with a
// retryable error, the request is left holding only the items not yet
// delivered or lost, so the retry sends nothing twice.
func TestSplittingLeavesOnlyTheRetryableItems(t *testing.T) {
	td := spansOf(64, func(i int) string {
		switch {
		case i == 3:
			return "bad"
		case i >= 32:
			return fmt.Sprintf("flaky%d", i)
		}
		return fmt.Sprintf("ok%d", i)
	})
	delivered := map[string]int{}
	down := true
	send := func(_ context.Context, td ptrace.Traces) error {
		ns := names(td)
		for _, n := range ns {
			if n == "bad" {
				return consumererror.NewPermanent(status.Error(codes.InvalidArgument, "bad span"))
			}
		}
		for _, n := range ns {
			if down && strings.HasPrefix(n, "flaky") {
				return errors.New("upstream unavailable")
			}
		}
		for _, n := range ns {
			delivered[n]++
		}
		return nil
	}
	lost := 0
	onLost := func(_ context.Context, l ptrace.Traces, _ error) { lost += l.SpanCount() }
	err := sendSplitting(context.Background(), td, send, tracesOps, onLost)
	if err == nil || consumererror.IsPermanent(err) {
		t.Fatalf("err = %v, want the retryable one", err)
	}
	if td.SpanCount() != 32 {
		t.Fatalf("left %d spans to retry, want the 32 flaky ones", td.SpanCount())
	}
	down = false
	if err := sendSplitting(context.Background(), td, send, tracesOps, onLost); err != nil {
		t.Fatal(err)
	}
	if lost != 1 || len(delivered) != 63 {
		t.Fatalf("lost %d, delivered %d distinct, want 1 and 63", lost, len(delivered))
	}
	for n, c := range delivered {
		if c != 1 {
			t.Fatalf("span %s delivered %d times", n, c)
		}
	}
}

// TestRequestIndependentRefusalIsNotSplit: a refusal that says nothing
// about the data (credentials) is not multiplied by splitting.
func TestRequestIndependentRefusalIsNotSplit(t *testing.T) {
	sends := 0
	send := func(context.Context, ptrace.Traces) error {
		sends++
		return consumererror.NewPermanent(status.Error(codes.Unauthenticated, "no token"))
	}
	lost := 0
	_ = sendSplitting(context.Background(), spansOf(100, func(int) string { return "x" }), send, tracesOps,
		func(_ context.Context, l ptrace.Traces, _ error) { lost += l.SpanCount() })
	if sends != 1 || lost != 100 {
		t.Fatalf("%d sends, %d lost; want 1 and 100", sends, lost)
	}
}

// TestSplitHalvesEverySignal: for each signal, split moves the first half
// of the items (metrics for metrics) into a new request and leaves the
// rest, every item once, each under a copy of its resource and scope.
func TestSplitHalvesEverySignal(t *testing.T) {
	const n = 37
	// Item i sits under resource i/10 and scope i/4 of it; its name is i.
	traces, logs, metrics := ptrace.NewTraces(), plog.NewLogs(), pmetric.NewMetrics()
	for i := range n {
		if i%10 == 0 {
			for _, r := range []pcommon.Resource{
				traces.ResourceSpans().AppendEmpty().Resource(),
				logs.ResourceLogs().AppendEmpty().Resource(),
				metrics.ResourceMetrics().AppendEmpty().Resource(),
			} {
				r.Attributes().PutInt("resource", int64(i/10))
			}
		}
		rs, rl, rm := traces.ResourceSpans(), logs.ResourceLogs(), metrics.ResourceMetrics()
		last := func(l int) int { return l - 1 }
		if i%10 == 0 || i%4 == 0 {
			for _, s := range []pcommon.InstrumentationScope{
				rs.At(last(rs.Len())).ScopeSpans().AppendEmpty().Scope(),
				rl.At(last(rl.Len())).ScopeLogs().AppendEmpty().Scope(),
				rm.At(last(rm.Len())).ScopeMetrics().AppendEmpty().Scope(),
			} {
				s.SetName(fmt.Sprint(i / 4))
			}
		}
		sss := rs.At(last(rs.Len())).ScopeSpans()
		sss.At(last(sss.Len())).Spans().AppendEmpty().SetName(fmt.Sprint(i))
		sls := rl.At(last(rl.Len())).ScopeLogs()
		sls.At(last(sls.Len())).LogRecords().AppendEmpty().Body().SetStr(fmt.Sprint(i))
		sms := rm.At(last(rm.Len())).ScopeMetrics()
		m := sms.At(last(sms.Len())).Metrics().AppendEmpty()
		m.SetName(fmt.Sprint(i))
		m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(int64(i))
	}
	// items lists "resource/scope/name" in order.
	type item = string
	tracesItems := func(td ptrace.Traces) (out []item) {
		for _, rs := range td.ResourceSpans().All() {
			r, _ := rs.Resource().Attributes().Get("resource")
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out = append(out, fmt.Sprintf("%s/%s/%s", r.AsString(), ss.Scope().Name(), s.Name()))
				}
			}
		}
		return out
	}
	logsItems := func(ld plog.Logs) (out []item) {
		for _, rl := range ld.ResourceLogs().All() {
			r, _ := rl.Resource().Attributes().Get("resource")
			for _, sl := range rl.ScopeLogs().All() {
				for _, l := range sl.LogRecords().All() {
					out = append(out, fmt.Sprintf("%s/%s/%s", r.AsString(), sl.Scope().Name(), l.Body().AsString()))
				}
			}
		}
		return out
	}
	metricsItems := func(md pmetric.Metrics) (out []item) {
		for _, rm := range md.ResourceMetrics().All() {
			r, _ := rm.Resource().Attributes().Get("resource")
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					out = append(out, fmt.Sprintf("%s/%s/%s", r.AsString(), sm.Scope().Name(), m.Name()))
				}
			}
		}
		return out
	}
	var want []item
	for i := range n {
		want = append(want, fmt.Sprintf("%d/%d/%d", i/10, i/4, i))
	}
	check := func(signal string, half, rest []item) {
		t.Helper()
		if len(half) != n/2 {
			t.Errorf("%s: split moved %d items, want %d", signal, len(half), n/2)
		}
		if got := strings.Join(append(half, rest...), " "); got != strings.Join(want, " ") {
			t.Errorf("%s: half and rest hold\n%s\nwant\n%s", signal, got, strings.Join(want, " "))
		}
	}
	half := tracesOps.split(traces)
	check("traces", tracesItems(half), tracesItems(traces))
	halfLogs := logsOps.split(logs)
	check("logs", logsItems(halfLogs), logsItems(logs))
	halfMetrics := metricsOps.split(metrics)
	check("metrics", metricsItems(halfMetrics), metricsItems(metrics))
}
