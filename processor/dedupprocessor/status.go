package dedupprocessor

import (
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/doubletake/doubletake/internal/buildinfo"
	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// serveStatus makes the status page of a new state, when status.http is
// set: the stream book the metric unit fills, and the page's server,
// which reads statusSnapshot.
func (s *state) serveStatus(set component.TelemetrySettings, version string) error {
	if !s.cfg.Status.Enabled() {
		return nil
	}
	b := pageBuild(version)
	s.header = statuspage.Header{Version: b.Version, Commit: b.Commit, Modified: b.Modified, Started: time.Now(), Endpoint: s.cfg.Status.HTTP.NetAddr.Endpoint}
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
	out.Header = s.header
	out.Header.UptimeSeconds = now.Sub(s.header.Started).Round(time.Second).Seconds()
	out.Services = append(s.traces.svcs.statusRows(action), s.logs.svcs.statusRows(action)...)
	out.Streams, out.StreamsRefused = s.streams.statusRows()
	out.NestedDetect = s.nested != nil
	out.Nested = s.nested.statusRows()
	nowNs := now.UnixNano()
	out.Windows = []statuspage.WindowStatus{
		s.traces.status(nowNs),
		s.logs.status(nowNs),
		s.metrics.status(nowNs),
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
	out.Storage = storageStatus()
	out.DataDirs = dataDirStatus(s.dataDirs)
	if s.metrics != nil && s.metrics.auto {
		js := s.metrics.judgeStats()
		out.WriterRules = &statuspage.WriterRulesStatus{
			DeltaCopies: js.Delta[streams.ClassCopy], DeltaPeers: js.Delta[streams.ClassPeer], DeltaUndecided: js.Delta[streams.ClassUndecided],
			QuietPeers: js.Quiet, SharedSplit: js.SharedSplit, SharedUnsplit: js.SharedUnsplit, SharedNow: js.Shared,
			DeltaContinued: js.Continued, DeltaAcrossGap: js.AcrossGap, DeltaEmpty: js.EmptyIntervals,
		}
	}
	for _, q := range out.Queues {
		if q.Upstream != nil && q.Upstream.Endpoint != "" {
			out.Header.Upstreams = append(out.Header.Upstreams, q.Upstream.Endpoint)
		}
	}
	return out
}

// pageBuild is the build the page names: the collector's version (what
// doubletake's run sets from internal/buildinfo, or the version of a
// collector built with this processor) and the commit buildinfo knows.
func pageBuild(version string) buildinfo.Info {
	b := buildinfo.Read()
	b.Version = version
	if b.Version == "" {
		b.Version = "unknown"
	}
	return b
}
