package dedupprocessor

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/sanitize"
	"github.com/doubletake/doubletake/internal/streams"
)

// What happened to a point that broke the single-writer rule.
const (
	actionDropped = iota
	actionPassed
	actionSplit
	numActions
)

var actionNames = [numActions]string{"dropped", "passed", "split"}

// metricEvent is the first notable point of a request for one resource:
// what a warning names.
type metricEvent struct {
	set      bool
	metric   string
	attrs    string // the point's attributes, as the status page shows them (streamAttrs)
	reason   streams.Reason
	election streams.Election
	elected  uint64 // start time of the writer elected before the point
	writer   uint64 // start time of the point's writer
	action   int    // what happened to the point
}

// metricCounts is what one request brought for one resource's service.
type metricCounts struct {
	svc       *serviceStats // from the "metrics" services: svc.metrics is set
	received  int64
	points    [numActions][streams.NumReasons]int64
	elections [streams.NumElections]int64
	event     metricEvent
}

// warnable says whether a point's decision belongs in a warning: a second
// writer (overlap, decrease, suspected gauge writer) or a change of writer
// other than a restart. Repeats and late points are counted only.
func warnable(d streams.Decision) bool {
	switch d.Reason {
	case streams.ReasonOverlap, streams.ReasonDecrease, streams.ReasonSuspect:
		return true
	}
	return d.Election == streams.ElectionEarlierStart || d.Election == streams.ElectionFailover
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

// metricLabels is one service's label sets for the metric signal, kept on
// its serviceStats: what its ledger's counters are observed with.
type metricLabels struct {
	points    [numActions][streams.NumReasons]metric.MeasurementOption
	elections [streams.NumElections]metric.MeasurementOption
	unjudged  metric.MeasurementOption
}

func newMetricLabels(name string) *metricLabels {
	attrs := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		kv = append(kv, attribute.String("signal", "metrics"), attribute.String("service.name", name))
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	l := &metricLabels{unjudged: attrs(attribute.String("reason", "stream_limit"))}
	for a := range numActions {
		for r := streams.Reason(1); r < streams.NumReasons; r++ {
			l.points[a][r] = attrs(attribute.String("reason", r.String()), attribute.String("action", actionNames[a]))
		}
	}
	for e := streams.Election(1); e < streams.NumElections; e++ {
		l.elections[e] = attrs(attribute.String("reason", e.String()))
	}
	return l
}

// record enters one request's counts in the services' ledgers and, at
// most once per service per telemetry.warn_interval, warns naming the
// stream and both writers' start times.
func (w *metricUnit) record(counts []metricCounts) {
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
			zap.Int("max_streams", w.tracker.Limit()), zap.Int64("unjudged_points", unjudged))
		w.lastFull = now
	}
	for i := range counts {
		c := &counts[i]
		if c.received == 0 {
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
			zap.String("action", actionNames[e.action]),
			zap.String("suggests", suggest(e)))
		s.logger.Warn("metric stream has more than one writer", fields...)
		st.lastWarn = now
		st.warned = st.ledger
	}
}

func eventName(e metricEvent) string {
	if e.election != streams.ElectionNone {
		return "election:" + e.election.String()
	}
	return e.reason.String()
}

// suggest names the likely cause from the kind of event.
func suggest(e metricEvent) string {
	switch {
	case e.reason == streams.ReasonDecrease:
		return "writers share a start time but report different values: two readers or exporters over one SDK aggregation, or processes that started together without a unique service.instance.id"
	case e.reason == streams.ReasonSuspect:
		return "a gauge reported more often than its interval: two processes or two metric readers writing one stream"
	case e.writer > e.elected:
		return "a second writer started later: a metric reader or exporter added after start (e.g. a framework attaching its own), or a second process without a unique service.instance.id"
	default:
		return "a writer with an earlier start: another process or pipeline writes the same stream; give each process a unique service.instance.id"
	}
}
