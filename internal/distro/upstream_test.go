package distro

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/processor/dedupprocessor"
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

// TestOversizedItemIsRefusedBeforeQueueing: a request holding a span that
// no upstream request can carry is refused with InvalidArgument, naming
// the span; a request as large made of small spans passes, since the
// queue's batcher splits it.
func TestOversizedItemIsRefusedBeforeQueueing(t *testing.T) {
	up := &upstream{cfg: &upstreamConfig{MaxRequestBytes: 64 << 10}, splits: true}
	many := spansOf(3000, func(int) string { return strings.Repeat("n", 40) })
	if err := up.checkTraces(many); err != nil {
		t.Fatalf("a request of many small spans (%d bytes) was refused: %v", tracesSizer.TracesSize(many), err)
	}
	big := spansOf(30, func(i int) string {
		if i == 17 {
			return strings.Repeat("x", 70<<10)
		}
		return "small"
	})
	err := up.checkTraces(big)
	if !consumererror.IsPermanent(err) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want a permanent InvalidArgument", err)
	}
	if !strings.Contains(err.Error(), "max_request_bytes 65536") || !strings.Contains(err.Error(), `service "svc11"`) {
		t.Fatalf("error %q does not name the limit and the span's service", err)
	}
	// Just under the limit, alone with its resource and scope, passes.
	edge := spansOf(1, func(int) string { return strings.Repeat("y", 64<<10-200) })
	if err := up.checkTraces(edge); err != nil {
		t.Fatalf("a span that fits was refused: %v", err)
	}
	// Without a splitting batcher the whole request must fit.
	up.splits = false
	if err := up.checkTraces(many); err == nil {
		t.Fatal("without batching, a request over the limit passed")
	}
}

// TestUpstreamConfigKeepsOTLPKeys: the wrapper takes every otlp_grpc key
// plus its own, and refuses a batch that could exceed max_request_bytes.
func TestUpstreamConfigKeepsOTLPKeys(t *testing.T) {
	_, tb := dedupprocessor.NewFactoryWithTakeBack()
	f := newDedupOTLPFactory(dedupOTLPGRPCType, otlpGRPCFactoryForTest(), tb)
	load := func(raw map[string]any) (*upstreamConfig, error) {
		cfg := f.CreateDefaultConfig().(*upstreamConfig)
		if err := confmap.NewFromStringMap(raw).Unmarshal(cfg); err != nil {
			return nil, err
		}
		return cfg, confmap.Validate(cfg)
	}
	cfg, err := load(map[string]any{
		"endpoint": "upstream:4317", "dedup": "dedup/x", "max_request_bytes": 1 << 20,
		"sending_queue": map[string]any{"enabled": true, "sizer": "bytes", "queue_size": 1 << 24,
			"batch": map[string]any{"flush_timeout": "100ms", "sizer": "bytes", "max_size": 1 << 20}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dedup != component.MustNewIDWithName("dedup", "x") || cfg.MaxRequestBytes != 1<<20 {
		t.Fatalf("own keys not read: %+v", cfg)
	}
	if q, _ := queueAndRetry(cfg.Exporter); !q.HasValue() || q.Get().QueueSize != 1<<24 {
		t.Fatal("the queue settings did not reach the exporter config")
	}
	for _, bad := range []map[string]any{
		{"endpoint": "u:1", "sending_queue": map[string]any{"batch": map[string]any{"flush_timeout": "1s", "sizer": "items", "max_size": 100}}},
		{"endpoint": "u:1", "max_request_bytes": 1 << 20, "sending_queue": map[string]any{"sizer": "bytes", "queue_size": 1 << 24, "batch": map[string]any{"flush_timeout": "1s", "max_size": 2 << 20}}},
	} {
		if _, err := load(bad); err == nil || !strings.Contains(err.Error(), "sending_queue::batch") {
			t.Errorf("%v: err = %v, want one naming sending_queue::batch", bad, err)
		}
	}
}

func otlpGRPCFactoryForTest() exporter.Factory { return otlpexporter.NewFactory() }

// TestInnerRejectingIsNotLogged: the inner exporter's advice to turn on
// retries (they run in the wrapper) is dropped; its other entries pass.
func TestInnerRejectingIsNotLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := zap.New(core).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return withoutRejecting{c} })).With(zap.String("k", "v"))
	l.Error("Exporting failed. Rejecting data. Try enabling retry_on_failure config option to retry on retryable errors.")
	l.Warn("Partial success response")
	if logs.Len() != 1 || logs.All()[0].Message != "Partial success response" || logs.All()[0].ContextMap()["k"] != "v" {
		t.Fatalf("logged %v, want only the partial success warning with its fields", logs.All())
	}
}
