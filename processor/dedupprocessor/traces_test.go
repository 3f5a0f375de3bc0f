package dedupprocessor

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

var (
	sigTraces = attribute.String("signal", "traces")
	dropped   = attribute.String("action", "dropped")
	passed    = attribute.String("action", "passed")
)

func svc(name string) attribute.KeyValue { return attribute.String("service.name", name) }

// TestTraces is the table of span cases: each sends requests in order,
// advancing the clock before each, and lists what must come out of each.
func TestTraces(t *testing.T) {
	type step struct {
		advance time.Duration
		in      ptrace.Traces
		want    []string // span names delivered
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		steps  []step
		// counters, by metric name suffix, for service "a"
		dups, conflicts, invalid, evicted int64
		action                            attribute.KeyValue // of duplicates and conflicts
		dupAction                         attribute.KeyValue // of duplicates, when it differs
	}{
		{
			name: "duplicates inside one batch",
			steps: []step{{in: traces(
				spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0}, spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0},
			), want: []string{"x", "y"}}},
			dups: 2, action: dropped,
		},
		{
			name: "duplicates across batches and resources",
			steps: []step{
				{in: traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 2, 1, "other-trace-same-span-id", 0}), want: []string{"x", "other-trace-same-span-id"}},
				{advance: time.Second, in: traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 3, "z", 0}), want: []string{"z"}},
				{advance: time.Second, in: traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 2, 1, "other-trace-same-span-id", 0}), want: nil},
			},
			dups: 3, action: dropped,
		},
		{
			name: "a copy after the window passes",
			steps: []step{
				{in: traces(spanSpec{"a", 1, 1, "x", 0}), want: []string{"x"}},
				{advance: 4 * time.Minute, in: traces(spanSpec{"a", 1, 1, "x", 0}), want: nil},
				{advance: 2 * time.Minute, in: traces(spanSpec{"a", 1, 1, "x", 0}), want: []string{"x"}},
			},
			dups: 1, action: dropped,
		},
		{
			name:   "eviction at max_spans",
			mutate: func(c *Config) { c.Traces.MaxSpans = 2 },
			steps: []step{
				{in: traces(spanSpec{"a", 1, 1, "p", 0}, spanSpec{"a", 1, 2, "q", 0}, spanSpec{"a", 1, 3, "r", 0}), want: []string{"p", "q", "r"}},
				// p was evicted, so its copy passes; r is still held.
				{in: traces(spanSpec{"a", 1, 1, "p", 0}, spanSpec{"a", 1, 3, "r", 0}), want: []string{"p"}},
			},
			dups: 1, evicted: 2, action: dropped,
		},
		{
			name: "zero ids pass untouched and are counted",
			steps: []step{
				{in: traces(spanSpec{"a", 0, 1, "zero-trace", 0}, spanSpec{"a", 1, 0, "zero-span", 0}, spanSpec{"a", 1, 1, "ok", 0}), want: []string{"zero-trace", "zero-span", "ok"}},
				{in: traces(spanSpec{"a", 0, 1, "zero-trace", 0}, spanSpec{"a", 1, 0, "zero-span", 0}), want: []string{"zero-trace", "zero-span"}},
			},
			invalid: 4,
		},
		{
			name: "conflict keep_first",
			steps: []step{
				{in: traces(spanSpec{"a", 1, 1, "x", 0}), want: []string{"x"}},
				{in: traces(spanSpec{"a", 1, 1, "x", 500}), want: nil}, // re-sent with a new end time
			},
			conflicts: 1, action: dropped,
		},
		{
			name:   "conflict pass",
			mutate: func(c *Config) { c.Traces.OnConflict = ConflictPass },
			steps: []step{
				{in: traces(spanSpec{"a", 1, 1, "x", 0}), want: []string{"x"}},
				{in: traces(spanSpec{"a", 1, 1, "x", 500}, spanSpec{"a", 1, 1, "x", 0}), want: []string{"x"}},
			},
			conflicts: 1, dups: 1, action: passed, dupAction: dropped,
		},
		{
			name:   "detect mode forwards everything",
			mutate: func(c *Config) { c.Mode = ModeDetect },
			steps: []step{
				{in: traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 1, "x", 0}), want: []string{"x", "x"}},
				{in: traces(spanSpec{"a", 1, 1, "x", 700}), want: []string{"x"}},
			},
			dups: 1, conflicts: 1, action: passed,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mutate)
			for i, s := range tc.steps {
				h.clock.t += int64(s.advance)
				if err := h.sendTraces(s.in); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got := h.delivered(); !slices.Equal(got, s.want) {
					t.Fatalf("step %d: delivered %q, want %q", i, got, s.want)
				}
			}
			a := svc("a")
			if tc.dups+tc.conflicts > 0 || tc.action.Key != "" {
				dupAction := tc.action
				if tc.dupAction.Key != "" {
					dupAction = tc.dupAction
				}
				if got := h.counter("otelcol_processor_dedup_duplicate_items", sigTraces, a, dupAction); got != tc.dups {
					t.Errorf("duplicates = %d, want %d", got, tc.dups)
				}
				if got := h.counter("otelcol_processor_dedup_conflict_items", sigTraces, a, tc.action); got != tc.conflicts {
					t.Errorf("conflicts = %d, want %d", got, tc.conflicts)
				}
			}
			if got := h.counter("otelcol_processor_dedup_invalid_id_items", sigTraces, a); got != tc.invalid {
				t.Errorf("invalid ids = %d, want %d", got, tc.invalid)
			}
			if got := h.counter("otelcol_processor_dedup_evicted_entries", sigTraces, attribute.String("reason", "capacity")); got != tc.evicted {
				t.Errorf("evicted = %d, want %d", got, tc.evicted)
			}
		})
	}
}

func TestTracesReceivedAndGauges(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.MaxSpans = 1000 })
	_ = h.sendTraces(traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"b", 1, 2, "y", 0}, spanSpec{"b", 1, 2, "y", 0}))
	h.clock.t += int64(30 * time.Second)
	h.delivered()
	if got := h.counter("otelcol_processor_dedup_received_items", sigTraces, svc("b")); got != 2 {
		t.Errorf("received{b} = %d, want 2", got)
	}
	if got := h.gauge("otelcol_processor_dedup_entries", sigTraces); got != 2 {
		t.Errorf("entries = %v, want 2", got)
	}
	if got := h.gauge("otelcol_processor_dedup_entries_limit", sigTraces); got != 1000 {
		t.Errorf("entries_limit = %v, want 1000", got)
	}
	// Nothing evicted: the window reaches back as far as configured, 30 s
	// after its first span.
	if got := h.gauge("otelcol_processor_dedup_effective_window", sigTraces); got != (5 * time.Minute).Seconds() {
		t.Errorf("effective_window = %v, want 300", got)
	}
}

func TestServiceLabelIsCapped(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Telemetry.MaxServices = 2 })
	_ = h.sendTraces(traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"b", 1, 2, "x", 0}, spanSpec{"c", 1, 3, "x", 0}, spanSpec{"d", 1, 4, "x", 0}))
	if got := h.counter("otelcol_processor_dedup_received_items", sigTraces, svc(otherService)); got != 2 {
		t.Errorf("received{_other} = %d, want 2", got)
	}
	if got := h.counter("otelcol_processor_dedup_received_items", sigTraces, svc("c")); got != 0 {
		t.Errorf("received{c} = %d, want 0: past the cap", got)
	}
}

// TestRollbackOnDownstreamError: a request the next component refuses is
// taken back, so the sender's retry passes instead of being dropped.
func TestRollbackOnDownstreamError(t *testing.T) {
	next := &failingTraces{err: errDownstream}
	set := processortest.NewNopSettings(Type)
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set.TelemetrySettings = tel.NewTelemetrySettings()
	p, err := NewFactory().CreateTraces(context.Background(), set, createDefaultConfig(), next)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	req := func() ptrace.Traces {
		return traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0})
	}
	if err := p.ConsumeTraces(context.Background(), req()); !errors.Is(err, errDownstream) {
		t.Fatalf("first attempt: err = %v, want the downstream error", err)
	}
	// The two spans the refused request inserted are counted as rolled back.
	rolled, err := tel.GetMetric("otelcol_processor_dedup_rolled_back_entries")
	if err != nil {
		t.Fatalf("rolled_back_entries not recorded: %v", err)
	}
	if dps := rolled.Data.(metricdata.Sum[int64]).DataPoints; len(dps) != 1 || dps[0].Value != 2 {
		t.Fatalf("rolled_back_entries = %+v, want one point of 2", dps)
	}
	next.err = nil
	if err := p.ConsumeTraces(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if got := next.SpanCount(); got != 2 {
		t.Fatalf("retry delivered %d spans, want 2 (x once, y once)", got)
	}
}

// TestStateIsSharedAcrossPipelines: one dedup component in two pipelines
// catches a copy that arrives through the other.
func TestStateIsSharedAcrossPipelines(t *testing.T) {
	f := NewFactory()
	set := processortest.NewNopSettings(Type)
	s1, s2 := new(failingTraces), new(failingTraces)
	p1, err := f.CreateTraces(context.Background(), set, createDefaultConfig(), s1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := f.CreateTraces(context.Background(), set, createDefaultConfig(), s2)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	_ = p1.Start(context.Background(), host)
	_ = p2.Start(context.Background(), host)
	_ = p1.ConsumeTraces(context.Background(), traces(spanSpec{"a", 1, 1, "x", 0}))
	_ = p2.ConsumeTraces(context.Background(), traces(spanSpec{"a", 1, 1, "x", 0}))
	if s1.SpanCount() != 1 || s2.SpanCount() != 0 {
		t.Fatalf("pipelines got %d and %d spans, want 1 and 0", s1.SpanCount(), s2.SpanCount())
	}
	for _, p := range []interface{ Shutdown(context.Context) error }{p1, p2, p1} {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	f := NewFactory()
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), new(failingTraces))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCapabilities(t *testing.T) {
	for mode, want := range map[Mode]bool{ModeDrop: true, ModeDetect: false} {
		cfg := createDefaultConfig()
		cfg.Mode = mode
		p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, new(failingTraces))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Capabilities().MutatesData; got != want {
			t.Errorf("mode %s: MutatesData = %v, want %v", mode, got, want)
		}
		_ = p.Shutdown(context.Background())
	}
}
