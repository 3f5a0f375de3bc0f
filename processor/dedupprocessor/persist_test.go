package dedupprocessor

import (
	"context"
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// startFileStorage starts a real file_storage extension on dir and returns
// a host (storagetest's) that holds it, as the collector gives a processor
// whose config names it.
func startFileStorage(t *testing.T, dir string) (*storagetest.StorageHost, extension.Extension) {
	t.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	return storagetest.NewStorageHost().WithExtension(component.NewID(f.Type()), ext), ext
}

// TestWindowsSurviveARestart: span ids and log digests stored by one
// process are known to the next, so a batch re-sent after a restart is
// still dropped; new data still passes.
func TestWindowsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := createDefaultConfig()
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	// run starts a fresh processor pair on the same storage directory, as a
	// restarted process would, sends, and shuts everything down.
	run := func(send func(processor.Traces, processor.Logs)) (spans, records int) {
		host, ext := startFileStorage(t, dir)
		defer func() { _ = ext.Shutdown(context.Background()) }()
		f := NewFactory()
		ts, ls := new(consumertest.TracesSink), new(consumertest.LogsSink)
		tp, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, ts)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(Type), cfg, ls)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []component.Component{tp, lp} {
			if err := c.Start(context.Background(), host); err != nil {
				t.Fatal(err)
			}
		}
		send(tp, lp)
		for _, c := range []component.Component{tp, lp} {
			if err := c.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		return ts.SpanCount(), ls.LogRecordCount()
	}
	ctx := context.Background()
	s, r := run(func(tp processor.Traces, lp processor.Logs) {
		_ = tp.ConsumeTraces(ctx, traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0}))
		_ = lp.ConsumeLogs(ctx, logs(logSpec{"a", "boot", 1, ""}))
	})
	if s != 2 || r != 1 {
		t.Fatalf("first run delivered %d spans and %d records, want 2 and 1", s, r)
	}
	s, r = run(func(tp processor.Traces, lp processor.Logs) {
		_ = tp.ConsumeTraces(ctx, traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0}, spanSpec{"a", 1, 3, "new", 0}))
		_ = lp.ConsumeLogs(ctx, logs(logSpec{"a", "boot", 1, ""}, logSpec{"a", "other", 1, ""}))
	})
	if s != 1 || r != 1 {
		t.Fatalf("after the restart %d spans and %d records passed, want only the new 1 and 1", s, r)
	}
}

func TestStorageMustExist(t *testing.T) {
	cfg := createDefaultConfig()
	id := component.MustNewID("file_storage")
	cfg.Storage = &id
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !containsStr(err.Error(), `no extension "file_storage"`) {
		t.Fatalf("Start without the extension: %v, want a message naming it", err)
	}
	_ = p.Shutdown(context.Background())
}

// TestStorageMustBeStorage: storage naming an extension that is not a
// storage extension fails Start with a message naming it.
func TestStorageMustBeStorage(t *testing.T) {
	cfg := createDefaultConfig()
	id := storagetest.NewNonStorageID("other")
	cfg.Storage = &id
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	host := storagetest.NewStorageHost().WithNonStorageExtension("other")
	err = p.Start(context.Background(), host)
	if err == nil || !containsStr(err.Error(), `extension "`+id.String()+`" is not a storage extension`) {
		t.Fatalf("Start with a non-storage extension: %v, want a message naming it", err)
	}
	_ = p.Shutdown(context.Background())
}

// sumPoint is one request with one cumulative point of "requests".
func sumPoint(start, at uint64, v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "a")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("requests")
	m.SetEmptySum().SetIsMonotonic(true)
	m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := m.Sum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.Timestamp(start))
	dp.SetTimestamp(pcommon.Timestamp(at))
	dp.SetIntValue(v)
	return md
}

// TestElectionsSurviveARestart: after a restart the later writer of a stream
// is still the loser, even when its point arrives first.
func TestElectionsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := createDefaultConfig()
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	s := uint64(time.Second)
	run := func(reqs ...pmetric.Metrics) int {
		host, ext := startFileStorage(t, dir)
		defer func() { _ = ext.Shutdown(context.Background()) }()
		sink := new(consumertest.MetricsSink)
		p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(Type), cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			_ = p.ConsumeMetrics(context.Background(), r)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return sink.DataPointCount()
	}
	// Writer A (start 1s) is elected; writer B (start 3s) overlaps.
	if n := run(sumPoint(1*s, 2*s, 10), sumPoint(1*s, 12*s, 20), sumPoint(3*s, 13*s, 1)); n != 2 {
		t.Fatalf("first run passed %d points, want A's 2", n)
	}
	// After the restart B's point comes first: it must still lose.
	if n := run(sumPoint(3*s, 23*s, 2), sumPoint(1*s, 24*s, 30)); n != 1 {
		t.Fatalf("after the restart %d points passed, want only A's 1", n)
	}
}

// dirSize is the bytes of the regular files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestJournalDiskFollowsTheWindow drives ten windows' worth of spans and
// log records through a journaled processor (a window far longer than the
// test, so only capacity evicts) and reads the storage's size on disk: it
// stays within about the documented bytes per tracked entry, not the
// traffic. Before the journal was bounded by capacity it grew with every
// request (issue 12 point 6).
func TestJournalDiskFollowsTheWindow(t *testing.T) {
	const maxSpans, maxRecords, perReq, windows = 20_000, 20_000, 500, 10
	dir := t.TempDir()
	cfg := createDefaultConfig()
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	cfg.Traces.MaxSpans, cfg.Logs.MaxRecords = maxSpans, maxRecords
	cfg.Traces.Window, cfg.Logs.Window = time.Hour, time.Hour
	host, ext := startFileStorage(t, dir)
	defer func() { _ = ext.Shutdown(context.Background()) }()
	f := NewFactory()
	logs, logged := observer.New(zap.InfoLevel)
	set := processortest.NewNopSettings(Type)
	set.Logger = zap.New(logs)
	tp, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	lp, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []component.Component{tp, lp} {
		if err := c.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var seq uint64
	for range windows * maxSpans / perReq {
		td := ptrace.NewTraces()
		ld := plog.NewLogs()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		recs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		for range perReq {
			seq++
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			binary.LittleEndian.PutUint64(tid[:], seq)
			binary.LittleEndian.PutUint64(sid[:], seq)
			s := spans.AppendEmpty()
			s.SetTraceID(tid)
			s.SetSpanID(sid)
			recs.AppendEmpty().Body().SetInt(int64(seq))
		}
		if err := tp.ConsumeTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
		if err := lp.ConsumeLogs(ctx, ld); err != nil {
			t.Fatal(err)
		}
	}
	st := tp.(*tracesProcessor).st
	if got := st.traces.journal.Load().Entries(); got > maxSpans+perReq {
		t.Errorf("the span journal holds %d entries, want at most the window's %d plus one request's %d", got, maxSpans, perReq)
	}
	if got := st.logs.journal.Load().Entries(); got > maxRecords+perReq {
		t.Errorf("the log journal holds %d entries, want at most the window's %d plus one request's %d", got, maxRecords, perReq)
	}
	for _, c := range []component.Component{tp, lp} {
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The segments the journal deleted early, because newer ones hold the
	// window, are reported when storage closes.
	stored := logged.FilterMessage("dedup windows stored").All()
	if len(stored) != 1 {
		t.Fatalf("%d \"dedup windows stored\" lines, want 1", len(stored))
	}
	fields := stored[0].ContextMap()
	for _, k := range []string{"span_segments_dropped", "log_segments_dropped"} {
		// About windows-1 windows' worth of segments went early.
		if got, _ := fields[k].(uint64); got < (windows-2)*maxSpans/perReq {
			t.Errorf("%s = %v, want at least %d", k, fields[k], (windows-2)*maxSpans/perReq)
		}
	}
	// The records themselves: 32 bytes a span, 16 a log digest. The
	// storage (bbolt) adds its pages, free lists and key per segment; the
	// bound allows twice the records plus a fixed 1 MiB. The traffic
	// (200,000 of each) would take 9.6 MB in records alone.
	size := dirSize(t, dir)
	records := int64((maxSpans+perReq)*spanRecord + (maxRecords+perReq)*logRecord)
	limit := 2*records + 1<<20
	t.Logf("storage on disk after %d spans and %d records: %d bytes (records held: %d bytes; limit %d)", seq, seq, size, records, limit)
	if size > limit {
		t.Fatalf("storage on disk is %d bytes, want at most %d (twice the window's records plus 1 MiB)", size, limit)
	}
}

// TestJournalGauges: with storage, the journals' segments and their bound
// are in telemetry (one segment per delivered request), and leave it when
// storage closes.
func TestJournalGauges(t *testing.T) {
	host, ext := startFileStorage(t, t.TempDir())
	defer func() { _ = ext.Shutdown(context.Background()) }()
	cfg := createDefaultConfig()
	id := component.NewID(filestorage.NewFactory().Type())
	cfg.Storage = &id
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	tp, err := NewFactory().CreateTraces(context.Background(), set, cfg, new(consumertest.TracesSink))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tp.ConsumeTraces(context.Background(), traces(spanSpec{service: "a", trace: 1, span: byte(i + 1), name: "s"})); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{t: t, tel: tel}
	if got := h.gauge("otelcol_processor_dedup_journal_segments", attribute.String("signal", "traces")); got != 3 {
		t.Errorf("traces journal segments = %v, want 3", got)
	}
	if got := h.gauge("otelcol_processor_dedup_journal_segments", attribute.String("signal", "logs")); got != 0 {
		t.Errorf("logs journal segments = %v, want 0", got)
	}
	if got := h.gauge("otelcol_processor_dedup_journal_segments_limit", attribute.String("signal", "traces")); got != maxSegments {
		t.Errorf("journal segments limit = %v, want %d", got, maxSegments)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, err := tel.GetMetric("otelcol_processor_dedup_journal_segments"); err == nil {
		t.Errorf("journal gauge still observed after shutdown: %+v", m)
	}
}
