package dedupprocessor

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// fakeSet is a window with fixed contents, to read its status row.
type fakeSet struct {
	n, limit    int
	oldest      int64
	lastEvicted int64 // 0: nothing evicted
	stats       window.Stats
}

func (f *fakeSet) Len() int                   { return f.n }
func (f *fakeSet) Capacity() int              { return f.limit }
func (f *fakeSet) Oldest() (int64, bool)      { return f.oldest, f.n > 0 }
func (f *fakeSet) LastEvicted() (int64, bool) { return f.lastEvicted, f.lastEvicted != 0 }
func (f *fakeSet) Stats() window.Stats        { return f.stats }
func (f *fakeSet) Expire(int64)               {}
func (f *fakeSet) Shrink(int) int             { return 0 }

// TestWindowStatusYoungIsNotShort: a window that has evicted nothing
// reaches back as far as configured; its age is not its effective window.
// One that evicted an entry of 40 s ago reaches back 40 s; one whose last
// eviction is older than the window reaches back as far as configured
// again.
func TestWindowStatusYoungIsNotShort(t *testing.T) {
	now := int64(time.Hour)
	configured := 5 * time.Minute
	young := newSignalWindow("traces", &fakeSet{n: 1, limit: 2_000_000, oldest: now - int64(12*time.Second)}, configured)
	ws := young.status(now)
	if ws.Effective != configured.Seconds() || ws.Short || !ws.NotFull {
		t.Fatalf("young window: %+v, want effective %v, not short, not full", ws, configured.Seconds())
	}
	if ws.OldestAge != 12 {
		t.Fatalf("oldest entry age %v, want 12", ws.OldestAge)
	}

	full := newSignalWindow("traces", &fakeSet{n: 10, limit: 10, oldest: now - int64(41*time.Second),
		lastEvicted: now - int64(40*time.Second), stats: window.Stats{Evicted: 3}}, configured)
	ws = full.status(now)
	if ws.Effective != 40 || !ws.Short || ws.NotFull || ws.OldestAge != 41 {
		t.Fatalf("evicting window: %+v, want effective 40, short, oldest entry 41 s", ws)
	}

	recovered := newSignalWindow("traces", &fakeSet{n: 10, limit: 10, oldest: now - int64(time.Second),
		lastEvicted: now - int64(6*time.Minute), stats: window.Stats{Evicted: 3}}, configured)
	ws = recovered.status(now)
	if ws.Effective != configured.Seconds() || ws.Short || ws.NotFull {
		t.Fatalf("window that evicted 6 m ago: %+v, want effective %v, not short", ws, configured.Seconds())
	}
}

// TestEffectiveWindowOneReading: the effective_window gauge, the summary
// line's span_window_effective and log_window_effective and the status
// page's windows say the same thing: the configured window for a window
// that holds one span of 300 arrived 12 s ago, and how far back a window
// that had to evict reaches.
func TestEffectiveWindowOneReading(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.MaxSpans = 300 })
	st := h.traces.(*tracesProcessor).st
	spans := func(n int, tag byte) ptrace.Traces {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for j := range n {
			s := ss.AppendEmpty()
			s.SetTraceID(pcommon.TraceID{tag, byte(j >> 8), byte(j)})
			s.SetSpanID(pcommon.SpanID{1})
		}
		return td
	}
	check := func(what string, traces time.Duration) {
		t.Helper()
		for _, c := range []struct {
			signal string
			want   time.Duration
		}{{"traces", traces}, {"logs", st.cfg.Logs.Window}, {"metrics", st.cfg.Metrics.MaxStale}} {
			if got := h.gauge("otelcol_processor_dedup_effective_window", attribute.String("signal", c.signal)); got != c.want.Seconds() {
				t.Errorf("%s: effective_window{signal=%s} = %v s, want %v", what, c.signal, got, c.want.Seconds())
			}
		}
		named := map[string]time.Duration{}
		for _, f := range st.summary().fields(time.Minute, signalSums{}, h.clock.t) {
			named[f.Key] = time.Duration(f.Integer)
		}
		if named["span_window_effective"] != traces || named["log_window_effective"] != st.cfg.Logs.Window {
			t.Errorf("%s: summary span_window_effective %v, log_window_effective %v; want %v, %v",
				what, named["span_window_effective"], named["log_window_effective"], traces, st.cfg.Logs.Window)
		}
		page := st.statusSnapshot(time.Unix(0, h.clock.t))
		if w := page.Windows[0]; w.Signal != "traces" || w.Effective != traces.Seconds() || w.Short != (traces < st.cfg.Traces.Window) {
			t.Errorf("%s: page's traces window %+v, want effective %v", what, w, traces)
		}
		if w := page.Windows[1]; w.Signal != "logs" || w.Effective != st.cfg.Logs.Window.Seconds() || w.Short {
			t.Errorf("%s: page's logs window %+v, want effective %v", what, w, st.cfg.Logs.Window)
		}
	}

	if err := h.sendTraces(spans(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := h.logs.ConsumeLogs(t.Context(), logs(logSpec{service: "a", body: "one"})); err != nil {
		t.Fatal(err)
	}
	h.clock.t += int64(12 * time.Second)
	check("one span of 300 held, 12 s old", 5*time.Minute)

	// 299 spans fill the window, 10 s later 10 more evict the oldest 10,
	// the last of which arrived with the 299: 2 s later the window
	// reaches back 12 s.
	if err := h.sendTraces(spans(299, 2)); err != nil {
		t.Fatal(err)
	}
	h.clock.t += int64(10 * time.Second)
	if err := h.sendTraces(spans(10, 3)); err != nil {
		t.Fatal(err)
	}
	h.clock.t += int64(2 * time.Second)
	check("a window that evicted spans of 12 s ago", 12*time.Second)

	// Once those spans would have left the window anyway, it reaches back
	// as far as configured again.
	h.clock.t += int64(5 * time.Minute)
	check("the evictions older than the window", 5*time.Minute)
}
