package dedupprocessor

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestConcurrentExporters: many exporters send overlapping copies of the
// same spans at once; each span comes out exactly once. Run with -race.
func TestConcurrentExporters(t *testing.T) {
	sink := new(lockedSink)
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	const exporters, traceIDs, spansPer = 8, 50, 4
	var wg sync.WaitGroup
	for e := range exporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range traceIDs {
				// Each exporter walks the traces in its own order.
				tr := byte(1 + (i+e*7)%traceIDs)
				var specs []spanSpec
				for s := range spansPer {
					specs = append(specs, spanSpec{"a", tr, byte(1 + s), "s", 0})
				}
				if err := p.ConsumeTraces(context.Background(), traces(specs...)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	seen := map[[24]byte]int{}
	for _, td := range sink.all() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < spans.Len(); j++ {
				var k [24]byte
				tid, sid := spans.At(j).TraceID(), spans.At(j).SpanID()
				copy(k[:], tid[:])
				copy(k[16:], sid[:])
				seen[k]++
			}
		}
	}
	if len(seen) != traceIDs*spansPer {
		t.Fatalf("%d distinct spans delivered, want %d", len(seen), traceIDs*spansPer)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("span %x delivered %d times", k, n)
		}
	}
}

// lockedSink records requests from many goroutines.
type lockedSink struct {
	mu  sync.Mutex
	got []ptrace.Traces
}

func (s *lockedSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, td)
	return nil
}

func (s *lockedSink) Capabilities() consumerCapabilities { return consumerCapabilities{} }

func (s *lockedSink) all() []ptrace.Traces {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// TestNoLockHeldWhileCallingNext: the next consumer may call back into the
// processor (a loop through a connector) without deadlocking.
func TestNoLockHeldWhileCallingNext(t *testing.T) {
	var p interface {
		ConsumeTraces(context.Context, ptrace.Traces) error
	}
	reentered := false
	cb := &callbackTraces{fn: func(ptrace.Traces) error {
		if !reentered {
			reentered = true
			// Re-entering would deadlock if the window lock were held.
			return p.ConsumeTraces(context.Background(), traces(spanSpec{"a", 9, 9, "inner", 0}))
		}
		return nil
	}}
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), cb)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proc.Shutdown(context.Background()) }()
	p = proc
	if err := proc.ConsumeTraces(context.Background(), traces(spanSpec{"a", 1, 1, "outer", 0})); err != nil {
		t.Fatal(err)
	}
	if !reentered {
		t.Fatal("next consumer was not called")
	}
}

type callbackTraces struct {
	fn func(ptrace.Traces) error
}

func (c *callbackTraces) ConsumeTraces(_ context.Context, td ptrace.Traces) error { return c.fn(td) }
func (c *callbackTraces) Capabilities() consumerCapabilities                      { return consumerCapabilities{} }

// TestWarningIsRateLimited: one warning per service per interval, naming the
// service and the likely cause.
func TestWarningIsRateLimited(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(Type)
	set.Logger = zap.New(core)
	p, err := NewFactory().CreateTraces(context.Background(), set, createDefaultConfig(), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	for range 5 {
		_ = p.ConsumeTraces(context.Background(), traces(spanSpec{"checkout", 1, 1, "x", 0}, spanSpec{"payments", 2, 1, "y", 0}))
	}
	warns := logs.FilterMessage("duplicate spans received").All()
	if len(warns) != 2 {
		t.Fatalf("%d warnings, want 2 (one per service within the interval)", len(warns))
	}
	for _, w := range warns {
		f := w.ContextMap()
		if f["service.name"] != "checkout" && f["service.name"] != "payments" {
			t.Errorf("warning names service %v", f["service.name"])
		}
		if s, _ := f["suggests"].(string); s == "" {
			t.Errorf("warning has no diagnosis: %v", f)
		}
	}
}

// TestWarningCarriesItsPipeline: the processors of one component share
// their state whatever pipeline made it first; a span warning carries the
// logger (the pipeline attributes) of the pipeline the spans came through,
// not the metrics pipeline's.
func TestWarningCarriesItsPipeline(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	f := NewFactory()
	cfg := createDefaultConfig()
	settings := func(pipeline string) processor.Settings {
		set := processortest.NewNopSettings(Type)
		set.Logger = zap.New(core).With(zap.String("otelcol.pipeline.id", pipeline))
		return set
	}
	m, err := f.CreateMetrics(context.Background(), settings("metrics"), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	p, err := f.CreateTraces(context.Background(), settings("traces"), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	for range 2 {
		_ = p.ConsumeTraces(context.Background(), traces(spanSpec{"checkout", 1, 1, "x", 0}))
	}
	warns := logs.FilterMessage("duplicate spans received").All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings, want 1", len(warns))
	}
	if got := warns[0].ContextMap()["otelcol.pipeline.id"]; got != "traces" {
		t.Errorf("the span warning is labelled pipeline %v, want traces", got)
	}
}
