package dedupprocessor

import (
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// serveStatus makes the status page of a new state, when status.http is
// set: the stream book the metric unit fills, and the page's server,
// which reads statusSnapshot.
func (s *state) serveStatus(set component.TelemetrySettings) error {
	if !s.cfg.Status.Enabled() {
		return nil
	}
	s.streams = newStreamBook(s.cfg.Status.MaxStreams, s.tel.statusRefused)
	s.metrics.rec.book = s.streams
	var err error
	s.status, err = statuspage.New(s.cfg.Status, set, s.statusSnapshot)
	return err
}

// statusSnapshot is the one function the status page (internal/statuspage)
// reads the state through. Each part copies its own rows under its own
// lock (the services their ledgers, the metric unit its stream book, the
// nested detector its counts, each window its sizes); the page orders,
// bounds and cleans them.
func (s *state) statusSnapshot(now time.Time) statuspage.Status {
	action := "passed"
	if s.cfg.Mode == ModeDrop {
		action = "dropped"
	}
	var out statuspage.Status
	out.Services = append(s.traces.svcs.statusRows(action), s.logs.svcs.statusRows(action)...)
	out.Streams, out.StreamsRefused = s.streams.statusRows()
	out.NestedDetect = s.nested != nil
	out.Nested = s.nested.statusRows()
	nowNs := now.UnixNano()
	out.Windows = []statuspage.WindowStatus{
		s.traces.status(nowNs, s.cfg.Traces.Window),
		s.logs.status(nowNs, s.cfg.Logs.Window),
		s.metrics.status(nowNs, s.cfg.Metrics.MaxStale),
	}
	out.Memory = memoryStatus(s.cfg.MemorySoftLimitMiB)
	if js, ok := journalStatus("traces", s.traces.journal.Load()); ok {
		out.Journals = append(out.Journals, js)
	}
	if js, ok := journalStatus("logs", s.logs.journal.Load()); ok {
		out.Journals = append(out.Journals, js)
	}
	if s.queues != nil {
		out.Queues = s.queues.read(s.id)
	}
	return out
}
