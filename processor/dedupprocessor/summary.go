package dedupprocessor

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/streams"
)

// summary logs, every telemetry.summary_interval, what the signals'
// services' ledgers say came in since the last line, nothing included.
type summary struct {
	traces, logs, metrics *services
	windows               [3]*signalWindow // traces, logs, metrics
	mode                  Mode
	logger                *zap.Logger
}

// signalSums are the three signals' ledgers, each summed over its
// services: what the summary line takes differences of.
type signalSums struct{ spans, logs, metrics ledger }

func (s summary) sums() signalSums {
	return signalSums{s.traces.sum(), s.logs.sum(), s.metrics.sum()}
}

// Summary lines: one every interval, so that the log shows the gateway
// alive when nothing arrives too; an interval without items says so in its
// message, with the same fields (all the received counts 0).
const (
	summaryMessage     = "dedup summary"
	summaryIdleMessage = "dedup summary: nothing received"
)

// loop logs, every interval, what came in and what dedup found, from the
// services' ledgers, or that nothing came in.
func (s summary) loop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var prev signalSums
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur := s.sums()
		d := signalSums{cur.spans.minus(prev.spans), cur.logs.minus(prev.logs), cur.metrics.minus(prev.metrics)}
		prev = cur
		msg := summaryMessage
		if d.spans.received == 0 && d.logs.received == 0 && d.metrics.received == 0 {
			msg = summaryIdleMessage
		}
		s.logger.Info(msg, s.fields(every, d, time.Now().UnixNano())...)
	}
}

// summaryFields are the summary line's fields for the differences d. The
// metric points are one field per streams.Reason, named after it.
func (s summary) fields(every time.Duration, d signalSums, now int64) []zap.Field {
	ts, ls, ms := s.windows[0].snapshot(now), s.windows[1].snapshot(now), s.windows[2].snapshot(now)
	fields := []zap.Field{
		zap.Duration("interval", every),
		zap.Int64("spans_received", d.spans.received),
		zap.Int64("spans_duplicate", d.spans.duplicates),
		zap.Int64("spans_conflict", d.spans.conflicts),
		zap.Int64("spans_invalid_id", d.spans.invalid),
		zap.Int64("logs_received", d.logs.received),
		zap.Int64("logs_duplicate", d.logs.duplicates),
		zap.String("mode", string(s.mode)),
		zap.Int("span_entries", ts.entries),
		zap.Duration("span_window_effective", ts.effective.Round(time.Second)),
		zap.Uint64("span_entries_evicted", ts.stats.Evicted),
		zap.Int("log_entries", ls.entries),
		zap.Duration("log_window_effective", ls.effective.Round(time.Second)),
		zap.Uint64("log_entries_evicted", ls.stats.Evicted),
		zap.Int64("metric_points_received", d.metrics.received),
	}
	for r := streams.Reason(1); r < streams.NumReasons; r++ {
		fields = append(fields, zap.Int64(summaryReasonPrefix+r.String(), d.metrics.reason(r)))
	}
	fields = append(fields,
		zap.Int64("metric_elections", d.metrics.allElections()),
		zap.Int("metric_streams", ms.entries),
	)
	return append(fields, releaseFields(d)...)
}

// releaseFields name, in an interval with copies whose scope is a release
// known to export twice (releases.go), how many of the spans' and log
// records' copies came from one (spans_release_copies,
// logs_release_copies), the release, and verify's advice for it: none
// otherwise. With copies from more than one such release in an interval,
// one is named; the status page names each service's.
func releaseFields(d signalSums) []zap.Field {
	rel := d.spans.release
	if d.spans.releaseCopies == 0 || rel == nil {
		rel = d.logs.release
	}
	if d.spans.releaseCopies+d.logs.releaseCopies == 0 || rel == nil {
		return nil
	}
	return []zap.Field{
		zap.Int64("spans_release_copies", d.spans.releaseCopies),
		zap.Int64("logs_release_copies", d.logs.releaseCopies),
		zap.String("release", rel.Release()),
		zap.String("release_suggests", rel.ScopeBrief()),
	}
}

// summaryReasonPrefix names the summary's field of each streams.Reason.
const summaryReasonPrefix = "metric_points_"
