package dedupprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
)

// TestMemoryPressureShrinks: with a soft limit below what the process
// already holds, the span window is shrunk and the removals are counted.
func TestMemoryPressureShrinks(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	cfg := createDefaultConfig()
	cfg.MemorySoftLimitMiB = 1 // any live process is above 1 MiB
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, new(failingTraces))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	var specs []spanSpec
	for i := range 200 {
		specs = append(specs, spanSpec{"a", 1, byte(i + 1), "x", 0})
	}
	if err := p.ConsumeTraces(context.Background(), traces(specs...)); err != nil {
		t.Fatal(err)
	}
	w := p.(*tracesProcessor).st.traces
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.mu.Lock()
		n := w.set.Len()
		w.mu.Unlock()
		if n < 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the window was not shrunk under memory pressure")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, tel: tel}
	if got := h.counter("otelcol_processor_dedup_evicted_entries", sigTraces, attribute.String("reason", "shrink")); got == 0 {
		t.Fatal("shrink evictions not counted")
	}
}

func TestMemorySoftLimitValidated(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.MemorySoftLimitMiB = -1
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative memory_soft_limit_mib accepted")
	}
}
