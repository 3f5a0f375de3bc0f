package dedupprocessor

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/goleak"
)

// backgroundOn makes a state start every loop it has: summary, memory
// pressure (a limit no process stays under) and, with storage, checkpoints.
func backgroundOn(cfg *Config) {
	cfg.Telemetry.SummaryInterval = 10 * time.Millisecond
	cfg.MemorySoftLimitMiB = 1 << 20
	cfg.CheckpointInterval = 10 * time.Millisecond
}

// TestFailedStartLeavesNothingRunning: when the status page cannot listen
// after storage was opened, Start fails and the storage and its
// checkpoint loop do not stay behind.
func TestFailedStartLeavesNothingRunning(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	host, ext := startFileStorage(t, t.TempDir())
	cfg := createDefaultConfig()
	backgroundOn(cfg)
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	cfg.Status.HTTP.NetAddr.Endpoint = busy.Addr().String()
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(context.Background(), host)
	if err == nil || !strings.Contains(err.Error(), "status::http::endpoint") {
		t.Fatalf("Start with the status port taken: %v, want an error naming status::http::endpoint", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ext.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	busy.Close()
	goleak.VerifyNone(t, ignore)
}

// TestStartAfterShutdownStartsNothing: a processor started after its own
// Shutdown (the last of its state) starts no background work.
func TestStartAfterShutdownStartsNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	cfg := createDefaultConfig()
	backgroundOn(cfg)
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestReloadStartsAFreshState: when every processor of a component has
// shut down (a config reload), the next ones of the same ID get a new
// state with the new config: a span seen before passes again.
func TestReloadStartsAFreshState(t *testing.T) {
	f := NewFactory()
	set := processortest.NewNopSettings(Type)
	ctx := context.Background()
	run := func(cfg *Config) (*state, int) {
		sink := new(consumertest.TracesSink)
		p, err := f.CreateTraces(ctx, set, cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := p.ConsumeTraces(ctx, traces(spanSpec{"a", 1, 1, "x", 0})); err != nil {
			t.Fatal(err)
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		return p.(*tracesProcessor).st, sink.SpanCount()
	}
	first, second := createDefaultConfig(), createDefaultConfig()
	second.Traces.MaxSpans = 1000
	st1, n1 := run(first)
	st2, n2 := run(second)
	if n1 != 1 || n2 != 1 {
		t.Fatalf("the span passed %d and %d times, want once per run", n1, n2)
	}
	if st1 == st2 || st2.cfg != second {
		t.Fatal("the reloaded processor kept the old state")
	}
}

// TestConcurrentLifecycle: the processors of every signal sharing one
// state start and shut down concurrently, some twice and some without
// Start; the background work starts once and stops with the last.
func TestConcurrentLifecycle(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	f := NewFactory()
	set := processortest.NewNopSettings(Type)
	cfg := createDefaultConfig()
	backgroundOn(cfg)
	ctx := context.Background()
	var comps []component.Component
	for range 2 {
		tp, err := f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		lp, err := f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		mp, err := f.CreateMetrics(ctx, set, cfg, consumertest.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		comps = append(comps, tp, lp, mp)
	}
	st := comps[0].(*tracesProcessor).st
	var wg sync.WaitGroup
	for i, c := range comps {
		wg.Go(func() {
			if i%3 != 2 { // the metric processors are never started
				if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
					t.Error(err)
				}
			}
			for range 2 {
				if err := c.Shutdown(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st.mu.Lock()
	running := st.cancel != nil
	st.mu.Unlock()
	if running {
		t.Fatal("the background work outlived the last Shutdown")
	}
	goleak.VerifyNone(t, ignore)
}
