package dedupprocessor

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
)

// FuzzTraces feeds arbitrary OTLP protobuf through the processor twice.
// Whatever decodes must pass without a panic, the first pass must keep
// every span with a zero id and one copy of every other id, and the second
// pass must drop every span that has a valid id.
func FuzzTraces(f *testing.F) {
	seed, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(traces(
		spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 1, "x", 0}, spanSpec{"b", 0, 2, "zero", 0}, spanSpec{"b", 1, 1, "x", 9}))
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			return
		}
		sink := new(consumertest.TracesSink)
		p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), sink)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Shutdown(context.Background()) }()
		invalid, distinct := 0, map[[24]byte]bool{}
		forEachSpan(td, func(s ptrace.Span) {
			tid, sid := s.TraceID(), s.SpanID()
			if tid.IsEmpty() || sid.IsEmpty() {
				invalid++
				return
			}
			var k [24]byte
			copy(k[:], tid[:])
			copy(k[16:], sid[:])
			distinct[k] = true
		})
		again := ptrace.NewTraces()
		td.CopyTo(again)
		if err := p.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		if got, want := sink.SpanCount(), invalid+len(distinct); got != want {
			t.Fatalf("first pass delivered %d spans, want %d (%d zero-id + %d distinct)", got, want, invalid, len(distinct))
		}
		sink.Reset()
		if err := p.ConsumeTraces(context.Background(), again); err != nil {
			t.Fatal(err)
		}
		if got := sink.SpanCount(); got != invalid {
			t.Fatalf("second pass delivered %d spans, want only the %d zero-id ones", got, invalid)
		}
	})
}

// FuzzLogs: arbitrary OTLP logs twice; the second pass delivers nothing.
func FuzzLogs(f *testing.F) {
	seed, _ := (&plog.ProtoMarshaler{}).MarshalLogs(logs(logSpec{"a", "x", 1, ""}, logSpec{"a", "x", 1, ""}, logSpec{"a", "y", 1, "k"}))
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
		if err != nil {
			return
		}
		sink := new(consumertest.LogsSink)
		p, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), sink)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Shutdown(context.Background()) }()
		again := plog.NewLogs()
		ld.CopyTo(again)
		in := ld.LogRecordCount()
		if err := p.ConsumeLogs(context.Background(), ld); err != nil {
			t.Fatal(err)
		}
		if sink.LogRecordCount() > in || (in > 0 && sink.LogRecordCount() == 0) {
			t.Fatalf("first pass delivered %d of %d records", sink.LogRecordCount(), in)
		}
		sink.Reset()
		if err := p.ConsumeLogs(context.Background(), again); err != nil {
			t.Fatal(err)
		}
		if sink.LogRecordCount() != 0 {
			t.Fatalf("second pass delivered %d records, want 0", sink.LogRecordCount())
		}
	})
}

func forEachSpan(td ptrace.Traces, fn func(ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				fn(spans.At(k))
			}
		}
	}
}
