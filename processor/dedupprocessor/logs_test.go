package dedupprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/doubletake/doubletake/internal/pdataenc"
)

func (h *harness) sendLogs(ld plog.Logs) error {
	return h.logs.ConsumeLogs(context.Background(), ld)
}

func (h *harness) deliveredLogs() []string {
	var out []string
	for _, ld := range h.lsink.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				recs := sls.At(j).LogRecords()
				for k := 0; k < recs.Len(); k++ {
					out = append(out, recs.At(k).Body().AsString())
				}
			}
		}
	}
	h.lsink.Reset()
	return out
}

func TestLogs(t *testing.T) {
	sigLogs := attribute.String("signal", "logs")
	h := newHarness(t, nil)
	steps := []struct {
		advance time.Duration
		in      plog.Logs
		want    int
	}{
		// Two exact copies in one request: one passes.
		{0, logs(logSpec{"a", "boot", 1, ""}, logSpec{"a", "boot", 1, ""}), 1},
		// Same body, other timestamp / attribute / service: all new.
		{time.Second, logs(logSpec{"a", "boot", 2, ""}, logSpec{"a", "boot", 1, "x"}, logSpec{"b", "boot", 1, ""}), 3},
		// Every one of those again: all dropped.
		{time.Second, logs(logSpec{"a", "boot", 1, ""}, logSpec{"a", "boot", 2, ""}, logSpec{"a", "boot", 1, "x"}, logSpec{"b", "boot", 1, ""}), 0},
		// After the window, a copy is new again.
		{6 * time.Minute, logs(logSpec{"a", "boot", 1, ""}), 1},
	}
	for i, s := range steps {
		h.clock.t += int64(s.advance)
		if err := h.sendLogs(s.in); err != nil {
			t.Fatal(err)
		}
		if got := h.deliveredLogs(); len(got) != s.want {
			t.Fatalf("step %d: delivered %d records, want %d", i, len(got), s.want)
		}
	}
	if got := h.counter("otelcol_processor_dedup_duplicate_items", sigLogs, dropped); got != 5 {
		t.Errorf("duplicates = %d, want 5", got)
	}
	if got := h.counter("otelcol_processor_dedup_received_items", sigLogs); got != 10 {
		t.Errorf("received = %d, want 10", got)
	}
}

// TestLogDigestSeparatesFields: records that differ in any one identifying
// field get different digests; the encoding is unambiguous where naive
// concatenation is not.
func TestLogDigestSeparatesFields(t *testing.T) {
	w, err := newLogUnit(createDefaultConfig(), [4]uint64{1, 2, 3, 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := func() plog.LogRecord {
		r := plog.NewLogRecord()
		r.Body().SetStr("ab")
		r.Attributes().PutStr("k", "c")
		r.SetTimestamp(10)
		return r
	}
	var e pdataenc.Encoder
	ref := w.digest(&e, [16]byte{}, base())
	for name, change := range map[string]func(plog.LogRecord){
		"body":            func(r plog.LogRecord) { r.Body().SetStr("a") },
		"body moved":      func(r plog.LogRecord) { r.Body().SetStr("a"); r.Attributes().PutStr("k", "bc") },
		"body type":       func(r plog.LogRecord) { r.Body().SetEmptyBytes().FromRaw([]byte("ab")) },
		"timestamp":       func(r plog.LogRecord) { r.SetTimestamp(11) },
		"observed":        func(r plog.LogRecord) { r.SetObservedTimestamp(10) },
		"severity":        func(r plog.LogRecord) { r.SetSeverityNumber(plog.SeverityNumberWarn) },
		"severity text":   func(r plog.LogRecord) { r.SetSeverityText("WARN") },
		"attribute added": func(r plog.LogRecord) { r.Attributes().PutInt("n", 1) },
		"trace id":        func(r plog.LogRecord) { r.SetTraceID([16]byte{1}) },
		"span id":         func(r plog.LogRecord) { r.SetSpanID([8]byte{1}) },
		"event name":      func(r plog.LogRecord) { r.SetEventName("e") },
		"flags":           func(r plog.LogRecord) { r.SetFlags(1) },
	} {
		r := base()
		change(r)
		if w.digest(&e, [16]byte{}, r) == ref {
			t.Errorf("%s: same digest as the original record", name)
		}
	}
	if w.digest(&e, [16]byte{}, base()) != ref {
		t.Error("the same record digests differently twice")
	}
	if w.digest(&e, [16]byte{1}, base()) == ref {
		t.Error("another resource/scope prefix gives the same digest")
	}
}

// TestLogsReorderedAttributesAreNew: a log record's digest keeps its maps'
// stored order, as copies of one SDK's record do (a re-send, a second
// exporter), so the digests journals hold since before the canonical
// encoder stay valid and an unsorted record costs no sort. A record whose
// attributes arrive in another order counts as another record, never as a
// false duplicate; an exact copy is still dropped.
func TestLogsReorderedAttributesAreNew(t *testing.T) {
	h := newHarness(t, nil)
	record := func(keys ...string) plog.Logs {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", "a")
		r := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		r.Body().SetStr("boot")
		for _, k := range keys {
			r.Attributes().PutStr(k, "v"+k)
		}
		return ld
	}
	for i, s := range []struct {
		keys []string
		want int
	}{
		{[]string{"b", "a"}, 1},
		{[]string{"b", "a"}, 0}, // the same record again
		{[]string{"a", "b"}, 1}, // the same attributes, stored in another order
	} {
		if err := h.sendLogs(record(s.keys...)); err != nil {
			t.Fatal(err)
		}
		if got := h.deliveredLogs(); len(got) != s.want {
			t.Fatalf("step %d (%v): delivered %d records, want %d", i, s.keys, len(got), s.want)
		}
	}
}
