package dedupprocessor

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/sanitize"
	"github.com/doubletake/doubletake/internal/streams"
)

// metricCounts is what one request brought for one resource's service.
type metricCounts struct {
	svc       *serviceStats // from the "metrics" services: svc.metrics is set
	received  int64
	points    [numActions][streams.NumReasons]int64
	elections [streams.NumElections]int64
	event     metricEvent
}

// note counts a decision with a reason or an election of a point with
// attributes attrs.
func (c *metricCounts) note(d streams.Decision, metricName string, attrs pcommon.Map, mutate bool) {
	a := actionPassed
	if mutate {
		switch d.Verdict {
		case streams.Drop:
			a = actionDropped
		case streams.Label:
			a = actionSplit
		}
	}
	if d.Reason != streams.ReasonNone {
		c.points[a][d.Reason]++
	}
	if d.Election != streams.ElectionNone {
		c.elections[d.Election]++
	}
	if !c.event.set && warnable(d) {
		c.event = metricEvent{set: true, metric: sanitize.Label(metricName), attrs: streamAttrs(attrs), reason: d.Reason, election: d.Election, elected: d.Elected, writer: d.Writer, action: a}
	}
}

// metricRecorder enters the metric signal's requests in its services'
// ledgers and the stream book, and warns.
type metricRecorder struct {
	svcs       *services   // signal "metrics": serviceStats.metrics is set
	book       *streamBook // the streams with more than one writer (metrics_streams.go); nil without the status page
	maxStreams int         // metrics.max_streams, for the warning that it is reached

	lastFull time.Time // the last warning that max_streams was reached; guarded by svcs.mu
	// The held points expired by the last warning about them, and when it
	// was; guarded by svcs.mu.
	expiredWarned uint64
	lastExpired   time.Time
}

// record enters one request's counts in the services' ledgers and, at
// most once per service per telemetry.warn_interval, warns naming the
// stream and both writers' start times. expired is the tracker's count of
// held points expired so far: it warns, at most once per interval, when
// it grew.
func (w *metricRecorder) record(counts []metricCounts, expired uint64) {
	var unjudged int64
	for i := range counts {
		for a := range numActions {
			unjudged += counts[i].points[a][streams.ReasonUnjudged]
		}
	}
	s := w.svcs
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if unjudged > 0 && now.Sub(w.lastFull) >= s.every {
		s.logger.Warn("metric stream limit reached, new streams pass unjudged",
			zap.Int("max_streams", w.maxStreams), zap.Int64("unjudged_points", unjudged))
		w.lastFull = now
	}
	if expired > w.expiredWarned && now.Sub(w.lastExpired) >= s.every {
		s.logger.Warn("second writers of metric streams stopped undecided",
			zap.Uint64("held_points_expired", expired-w.expiredWarned),
			zap.String("suggests", "they were not told copies or peers before they stopped, and their newest points, held, are dropped: if they were processes that share one identity, what they counted since their last passing point is lost; give each process a service.instance.id"))
		w.expiredWarned, w.lastExpired = expired, now
	}
	for i := range counts {
		c := &counts[i]
		if c.received == 0 && c.elections == [streams.NumElections]int64{} { // a held restart's election carries none (metrics_restart.go)
			continue
		}
		st := c.svc
		req := ledger{received: c.received, points: c.points, elections: c.elections}
		st.ledger.plus(&req, now)
		notable := req.notable()
		if notable == 0 {
			continue
		}
		elections := req.allElections()
		w.book.note(st.name, c.event, notable-elections, elections, now)
		if !c.event.set || now.Sub(st.lastWarn) < s.every {
			continue
		}
		e := c.event
		fields := []zap.Field{
			zap.String("service.name", st.name),
			zap.String("metric", sanitize.Label(e.metric)),
			zap.String("reason", eventName(e)),
		}
		if e.elected != 0 || e.writer != 0 { // gauges have no start times
			fields = append(fields,
				zap.Time("elected_start", time.Unix(0, int64(e.elected)).UTC()),
				zap.Time("other_start", time.Unix(0, int64(e.writer)).UTC()))
		}
		since := st.ledger.minus(st.warned)
		fields = append(fields,
			zap.Int64("points", since.notable()),
			zap.String("action", actionNames[e.action]))
		if e.judged {
			fields = append(fields, zap.String("class", e.class.String()), zap.String("evidence", e.evidence))
		}
		fields = append(fields, zap.String("suggests", suggest(e)))
		s.logger.Warn("metric stream has more than one writer", fields...)
		st.lastWarn = now
		st.warned = st.ledger
	}
}
