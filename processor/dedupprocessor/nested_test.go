package dedupprocessor

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
)

// doubleWrapped is one request recorded twice by one instrumentation applied
// twice: an outer SERVER span, an inner SERVER span of the same name
// covering 96% of it, and the handler's child span under the inner one.
func doubleWrapped(trace byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "api")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otelhttp")
	ss.Scope().SetVersion("0.71.0")
	tid := pcommon.TraceID{trace, 1}
	add := func(id, parent byte, name string, kind ptrace.SpanKind, start, end uint64) {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(tid)
		s.SetSpanID(pcommon.SpanID{trace, id})
		if parent != 0 {
			s.SetParentSpanID(pcommon.SpanID{trace, parent})
		}
		s.SetName(name)
		s.SetKind(kind)
		s.SetStartTimestamp(pcommon.Timestamp(start))
		s.SetEndTimestamp(pcommon.Timestamp(end))
	}
	add(3, 2, "load", ptrace.SpanKindInternal, 1_100_000, 1_500_000)
	add(2, 1, "GET /rollouts", ptrace.SpanKindServer, 1_020_000, 1_980_000)
	add(1, 0, "GET /rollouts", ptrace.SpanKindServer, 1_000_000, 2_000_000)
	return td
}

func TestNestedDuplicatesAreCountedNotDropped(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.Nested.Detect = true })
	for i := range 3 {
		if err := h.sendTraces(doubleWrapped(byte(i + 1))); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(h.delivered()); got != 9 {
		t.Fatalf("%d spans delivered, want all 9: counting never drops", got)
	}
	got := h.counter("otelcol_processor_dedup_nested_spans", svc("api"),
		attribute.String("outer_scope", "otelhttp 0.71.0"), attribute.String("inner_scope", "otelhttp 0.71.0"), attribute.String("action", "counted"))
	if got != 3 {
		t.Fatalf("nested_spans{counted} = %d, want 3", got)
	}
}

func TestCollapseNested(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.Nested.Detect, c.Traces.CollapseNested = true, true })
	if err := h.sendTraces(doubleWrapped(1)); err != nil {
		t.Fatal(err)
	}
	out := h.tsink.AllTraces()
	if len(out) != 1 {
		t.Fatalf("%d requests delivered", len(out))
	}
	spans := out[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	if spans.Len() != 2 {
		t.Fatalf("%d spans delivered, want 2 (the inner server span removed)", spans.Len())
	}
	for i := 0; i < spans.Len(); i++ {
		s := spans.At(i)
		if s.Name() == "load" && s.ParentSpanID() != (pcommon.SpanID{1, 1}) {
			t.Fatalf("child span's parent is %s, want the outer span", s.ParentSpanID())
		}
		if s.SpanID() == (pcommon.SpanID{1, 2}) {
			t.Fatal("the inner span is still there")
		}
	}
	if got := h.counter("otelcol_processor_dedup_nested_spans", svc("api"), attribute.String("action", "collapsed")); got != 1 {
		t.Fatalf("nested_spans{collapsed} = %d, want 1", got)
	}
}

func TestCollapseNeedsDetect(t *testing.T) {
	c := createDefaultConfig()
	c.Traces.CollapseNested = true
	c.Traces.Nested.Detect = false
	if err := confmap.Validate(c); err == nil {
		t.Fatal("collapse_nested without detect accepted")
	}
}

// TestNestedBytesBoundCounted: spans with long names fill traces.nested.max_bytes
// before max_spans; the spans the detector forgets for it are counted.
func TestNestedBytesBoundCounted(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.Nested.Detect, c.Traces.Nested.MaxBytes = true, 8<<10 })
	long := strings.Repeat("n", 64<<10)
	for i := range 20 {
		td := doubleWrapped(byte(i + 1))
		for _, sp := range td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().All() {
			sp.SetName(long + sp.Name())
		}
		if err := h.sendTraces(td); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(h.delivered()); got != 60 {
		t.Fatalf("%d spans delivered, want all 60", got)
	}
	// 8 KiB holds 12 spans of 340 + about 300 bytes: 48 of the 60 go.
	ev := h.counter("otelcol_processor_dedup_evicted_entries", attribute.String("reason", "nested_bytes"))
	if ev < 40 {
		t.Fatalf("evicted_entries{reason=nested_bytes} = %d, want the spans past 8 KiB (about 48)", ev)
	}
	if cap := h.counter("otelcol_processor_dedup_evicted_entries", attribute.String("reason", "nested_capacity")); cap != 0 {
		t.Fatalf("evicted_entries{reason=nested_capacity} = %d, want 0: max_spans was not reached", cap)
	}
}

// TestNestedTakesTheKeysOfTheSpansLeft: the detector takes the window's
// keys of the spans a request keeps, so that the duplicates dropped before
// and between the two spans of a pair must not shift them: the pair is
// still found (and the dropped spans are not taken for its spans).
func TestNestedTakesTheKeysOfTheSpansLeft(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.Nested.Detect = true })
	other := func(ids ...byte) ptrace.Traces {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "api")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("otelhttp")
		ss.Scope().SetVersion("0.71.0")
		for _, id := range ids {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{9, 9})
			s.SetSpanID(pcommon.SpanID{9, id})
			s.SetName("GET /rollouts")
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(1_000_000)
			s.SetEndTimestamp(2_000_000)
		}
		return td
	}
	if err := h.sendTraces(other(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	// One request: two duplicates, the pair's spans with a duplicate
	// between them, and a new span.
	td := other(1, 2)
	pair := doubleWrapped(5).ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	pair.At(1).CopyTo(spans.AppendEmpty()) // the inner span
	other(3).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).CopyTo(spans.AppendEmpty())
	pair.At(2).CopyTo(spans.AppendEmpty()) // the outer span
	other(4).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).CopyTo(spans.AppendEmpty())
	if err := h.sendTraces(td); err != nil {
		t.Fatal(err)
	}
	if got := len(h.delivered()); got != 3+3 {
		t.Fatalf("%d spans delivered, want 6 (3, then the pair and one new span)", got)
	}
	got := h.counter("otelcol_processor_dedup_nested_spans", svc("api"),
		attribute.String("outer_scope", "otelhttp 0.71.0"), attribute.String("inner_scope", "otelhttp 0.71.0"), attribute.String("action", "counted"))
	if got != 1 {
		t.Fatalf("nested_spans{counted} = %d, want 1", got)
	}
}
