package dedupprocessor

import (
	"context"
	"errors"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/doubletake/doubletake/internal/dedupcontract"
)

// TestTakeBackLetsAReSendPass: spans and log records a later component lost
// after dedup had accepted them are taken back, in the window and in the
// journal, so that their re-send passes now and after a restart, while the
// items that were not lost are still dropped as duplicates.
func TestTakeBackLetsAReSendPass(t *testing.T) {
	dir := t.TempDir()
	cfg := createDefaultConfig()
	sid := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &sid
	ctx := context.Background()
	lost := errors.New("upstream said: invalid argument")
	run := func(body func(tp processor.Traces, lp processor.Logs, tb *TakeBack)) (spans, records int) {
		host, ext := startFileStorage(t, dir)
		defer func() { _ = ext.Shutdown(ctx) }()
		f, tb := NewFactoryWithTakeBack()
		ts, ls := new(consumertest.TracesSink), new(consumertest.LogsSink)
		tp, err := f.CreateTraces(ctx, processortest.NewNopSettings(Type), cfg, ts)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := f.CreateLogs(ctx, processortest.NewNopSettings(Type), cfg, ls)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []component.Component{tp, lp} {
			if err := c.Start(ctx, host); err != nil {
				t.Fatal(err)
			}
		}
		body(tp, lp, tb)
		for _, c := range []component.Component{tp, lp} {
			if err := c.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return ts.SpanCount(), ls.LogRecordCount()
	}
	kept := traces(spanSpec{"a", 1, 1, "kept", 0})
	gone := traces(spanSpec{"a", 1, 2, "lost", 0}, spanSpec{"b", 2, 3, "lost too", 0})
	keptLog := logs(logSpec{"a", "kept", 1, ""})
	goneLog := logs(logSpec{"a", "lost", 2, ""})
	id := component.NewID(Type)
	s, r := run(func(tp processor.Traces, lp processor.Logs, tb *TakeBack) {
		if err := tp.ConsumeTraces(ctx, cloneTraces(kept)); err != nil {
			t.Fatal(err)
		}
		if err := tp.ConsumeTraces(ctx, cloneTraces(gone)); err != nil {
			t.Fatal(err)
		}
		if err := lp.ConsumeLogs(ctx, cloneLogs(keptLog)); err != nil {
			t.Fatal(err)
		}
		if err := lp.ConsumeLogs(ctx, cloneLogs(goneLog)); err != nil {
			t.Fatal(err)
		}
		if n, err := tb.Traces(ctx, id, cloneTraces(gone), lost); n != 2 || err != nil {
			t.Fatalf("took back %d spans (%v), want 2", n, err)
		}
		if n, err := tb.Logs(ctx, id, cloneLogs(goneLog), lost); n != 1 || err != nil {
			t.Fatalf("took back %d records (%v), want 1", n, err)
		}
		// The re-send passes now, once.
		for range 2 {
			_ = tp.ConsumeTraces(ctx, cloneTraces(gone))
			_ = tp.ConsumeTraces(ctx, cloneTraces(kept))
			_ = lp.ConsumeLogs(ctx, cloneLogs(goneLog))
			_ = lp.ConsumeLogs(ctx, cloneLogs(keptLog))
		}
		// And is lost again, taken back again.
		if n, err := tb.Traces(ctx, id, cloneTraces(gone), lost); n != 2 || err != nil {
			t.Fatalf("took back %d spans (%v) the second time, want 2", n, err)
		}
		if n, err := tb.Logs(ctx, id, cloneLogs(goneLog), lost); n != 1 || err != nil {
			t.Fatalf("took back %d records (%v) the second time, want 1", n, err)
		}
	})
	if s != 5 || r != 3 {
		t.Fatalf("first run delivered %d spans and %d records, want 1+2+2 and 1+1+1", s, r)
	}
	// After a restart the journal's forget segments apply: the lost items
	// pass, the kept ones are still duplicates.
	s, r = run(func(tp processor.Traces, lp processor.Logs, _ *TakeBack) {
		_ = tp.ConsumeTraces(ctx, cloneTraces(kept))
		_ = tp.ConsumeTraces(ctx, cloneTraces(gone))
		_ = lp.ConsumeLogs(ctx, cloneLogs(keptLog))
		_ = lp.ConsumeLogs(ctx, cloneLogs(goneLog))
	})
	if s != 2 || r != 1 {
		t.Fatalf("after the restart %d spans and %d records passed, want the 2 and 1 taken back", s, r)
	}
}

// TestTakeBackNeedsARunningProcessor: a TakeBack for a processor that does
// not run says so instead of pretending.
func TestTakeBackNeedsARunningProcessor(t *testing.T) {
	_, tb := NewFactoryWithTakeBack()
	_, err := tb.Traces(context.Background(), component.NewID(Type), traces(spanSpec{"a", 1, 1, "x", 0}), errors.New("x"))
	if err == nil || !containsStr(err.Error(), `dedup processor "dedup" is not running`) {
		t.Fatalf("err = %v, want one naming the processor", err)
	}
}

func cloneTraces(td ptrace.Traces) ptrace.Traces {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	return c
}

func cloneLogs(ld plog.Logs) plog.Logs {
	c := plog.NewLogs()
	ld.CopyTo(c)
	return c
}

// TestTakeBackThroughHost: the TakeBack a component finds through the
// host by the processor's component ID (dedupcontract.Find, as the dedup
// exporters find it at Start) reaches the processor of NewFactory's
// factory while it runs, and refuses before it starts and after it shuts
// down. (It replaces TestLinkedTakeBack, whose process-wide link is gone:
// two collectors with a processor under one ID each reach their own,
// TestTwoCollectorsTakeBackTheirOwn in exporter/dedupotlpexporter.)
func TestTakeBackThroughHost(t *testing.T) {
	ctx := context.Background()
	id := component.MustNewIDWithName("dedup", "linked")
	set := processortest.NewNopSettings(Type)
	set.ID = id
	f := NewFactory()
	host := factoryHost{Host: componenttest.NewNopHost(), processors: f}
	tb, err := dedupcontract.Find(host, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dedupcontract.Find(componenttest.NewNopHost(), id); err == nil {
		t.Fatal("found a processor through a host that offers no factories")
	}
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID([16]byte{1})
	span.SetSpanID([8]byte{1})
	if _, err := tb.Traces(ctx, id, td, errors.New("lost")); err == nil {
		t.Fatal("a take back succeeded with no processor running")
	}
	p, err := f.CreateTraces(ctx, set, createDefaultConfig(), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := p.ConsumeTraces(ctx, td); err != nil {
		t.Fatal(err)
	}
	if n, err := tb.Traces(ctx, id, td, errors.New("lost")); err != nil || n != 1 {
		t.Fatalf("took back %d (%v), want the one span", n, err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Traces(ctx, id, td, errors.New("lost")); err == nil {
		t.Fatal("a take back succeeded after the processors shut down")
	}
}

// factoryHost is a host that offers the processor factory processors, as
// the service's host offers every factory of its collector.
type factoryHost struct {
	component.Host
	processors processor.Factory
}

func (h factoryHost) GetFactory(kind component.Kind, typ component.Type) component.Factory {
	if kind == component.KindProcessor && typ == h.processors.Type() {
		return h.processors
	}
	return nil
}

// refusingNext stands for an exporter that hands items back before its
// ConsumeTraces or ConsumeLogs returns: a direct send the upstream refused
// in part for good, or a queue consumer that exported (and lost) a request
// before dedup settled it. It takes back the items named "lost" and keeps
// the rest.
type refusingNext struct {
	tb    *TakeBack
	id    component.ID
	spans consumertest.TracesSink
	logs  consumertest.LogsSink
}

func (n *refusingNext) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (n *refusingNext) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	lost := ptrace.NewTraces()
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if s.Name() == "lost" {
					s.CopyTo(lost.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
				}
			}
		}
	}
	if lost.SpanCount() > 0 {
		if _, err := n.tb.Traces(ctx, n.id, lost, errors.New("refused for good")); err != nil {
			return err
		}
	}
	return n.spans.ConsumeTraces(ctx, td)
}

func (n *refusingNext) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	lost := plog.NewLogs()
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, r := range sl.LogRecords().All() {
				if r.Body().AsString() == "lost" {
					nrl := lost.ResourceLogs().AppendEmpty()
					rl.Resource().CopyTo(nrl.Resource())
					nsl := nrl.ScopeLogs().AppendEmpty()
					sl.Scope().CopyTo(nsl.Scope())
					r.CopyTo(nsl.LogRecords().AppendEmpty())
				}
			}
		}
	}
	if lost.LogRecordCount() > 0 {
		if _, err := n.tb.Logs(ctx, n.id, lost, errors.New("refused for good")); err != nil {
			return err
		}
	}
	return n.logs.ConsumeLogs(ctx, ld)
}

// TestTakeBackBeforeSettleSurvivesARestart: items handed back while their
// request is still in the next component, before dedup journaled it, are
// taken back for good: the request's journal segment does not hold them,
// so that after a restart their re-send passes, while the items that were
// delivered are still dropped as duplicates. A forget segment written
// before the request's own segment would be undone by it at replay.
func TestTakeBackBeforeSettleSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := createDefaultConfig()
	sid := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &sid
	ctx := context.Background()
	id := component.NewID(Type)
	run := func(body func(tp processor.Traces, lp processor.Logs)) *refusingNext {
		host, ext := startFileStorage(t, dir)
		defer func() { _ = ext.Shutdown(ctx) }()
		f, tb := NewFactoryWithTakeBack()
		next := &refusingNext{tb: tb, id: id}
		tp, err := f.CreateTraces(ctx, processortest.NewNopSettings(Type), cfg, next)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := f.CreateLogs(ctx, processortest.NewNopSettings(Type), cfg, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []component.Component{tp, lp} {
			if err := c.Start(ctx, host); err != nil {
				t.Fatal(err)
			}
		}
		body(tp, lp)
		for _, c := range []component.Component{tp, lp} {
			if err := c.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return next
	}
	mixed := traces(spanSpec{"a", 1, 1, "kept", 0}, spanSpec{"a", 1, 2, "lost", 0}, spanSpec{"b", 2, 3, "kept", 0})
	mixedLogs := logs(logSpec{"a", "kept", 1, ""}, logSpec{"a", "lost", 2, ""})
	next := run(func(tp processor.Traces, lp processor.Logs) {
		if err := tp.ConsumeTraces(ctx, cloneTraces(mixed)); err != nil {
			t.Fatal(err)
		}
		if err := lp.ConsumeLogs(ctx, cloneLogs(mixedLogs)); err != nil {
			t.Fatal(err)
		}
	})
	if s, r := next.spans.SpanCount(), next.logs.LogRecordCount(); s != 3 || r != 2 {
		t.Fatalf("first run: the next component got %d spans and %d records, want 3 and 2", s, r)
	}
	// After a restart only the items taken back pass (and are taken back
	// again); the delivered ones are duplicates.
	next = run(func(tp processor.Traces, lp processor.Logs) {
		_ = tp.ConsumeTraces(ctx, cloneTraces(mixed))
		_ = lp.ConsumeLogs(ctx, cloneLogs(mixedLogs))
	})
	if s, r := next.spans.SpanCount(), next.logs.LogRecordCount(); s != 1 || r != 1 {
		t.Fatalf("after the restart %d spans and %d records passed, want only the 1 and 1 taken back", s, r)
	}
}
