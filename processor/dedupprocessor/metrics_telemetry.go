package dedupprocessor

import (
	"context"
	"sync/atomic"
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
	// With metrics.overlap auto, for a second writer's point: its class
	// and the evidence (metrics_class.go).
	class    streams.Class
	judged   bool
	evidence string
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
// its serviceStats. Each is a ready-made option slice: passing it on with
// ... allocates nothing, where a single option would be boxed into a new
// slice for every Add.
type metricLabels struct {
	points    [numActions][streams.NumReasons][]metric.AddOption
	elections [streams.NumElections][]metric.AddOption
	unjudged  []metric.AddOption
	received  []metric.AddOption
}

func newMetricLabels(name string) *metricLabels {
	attrs := func(kv ...attribute.KeyValue) []metric.AddOption {
		kv = append(kv, attribute.String("signal", "metrics"), attribute.String("service.name", name))
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	l := &metricLabels{received: attrs(), unjudged: attrs(attribute.String("reason", "stream_limit"))}
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

// metricTotals are the metric signal's running totals, for the summary log.
type metricTotals struct {
	received  atomic.Int64
	reasons   [streams.NumReasons]atomic.Int64
	elections atomic.Int64
}

type metricTotalsSnapshot struct {
	received  int64
	reasons   [streams.NumReasons]int64
	elections int64
}

func (t *metricTotals) load() metricTotalsSnapshot {
	s := metricTotalsSnapshot{received: t.received.Load(), elections: t.elections.Load()}
	for i := range s.reasons {
		s.reasons[i] = t.reasons[i].Load()
	}
	return s
}

func (s metricTotalsSnapshot) sub(o metricTotalsSnapshot) metricTotalsSnapshot {
	d := metricTotalsSnapshot{received: s.received - o.received, elections: s.elections - o.elections}
	for i := range d.reasons {
		d.reasons[i] = s.reasons[i] - o.reasons[i]
	}
	return d
}

// record adds one request's counts to the instruments and the totals and,
// at most once per service per telemetry.warn_interval, warns naming the
// stream and both writers' start times.
func (w *metricUnit) record(ctx context.Context, t *telemetry, counts []metricCounts) {
	var received, elections int64
	var reasons [streams.NumReasons]int64
	for i := range counts {
		c := &counts[i]
		if c.received == 0 {
			continue
		}
		received += c.received
		l := c.svc.metrics
		t.received.Add(ctx, c.received, l.received...)
		for a := range numActions {
			for r := streams.Reason(1); r < streams.NumReasons; r++ {
				n := c.points[a][r]
				if n == 0 {
					continue
				}
				reasons[r] += n
				if r == streams.ReasonUnjudged {
					t.unjudged.Add(ctx, n, l.unjudged...)
				} else {
					t.metricPoints.Add(ctx, n, l.points[a][r]...)
				}
			}
		}
		for e := streams.Election(1); e < streams.NumElections; e++ {
			if n := c.elections[e]; n > 0 {
				elections += n
				t.metricElections.Add(ctx, n, l.elections[e]...)
			}
		}
	}
	if received == 0 {
		return
	}
	w.totals.received.Add(received)
	w.totals.elections.Add(elections)
	notable := elections
	for r, n := range reasons {
		if n > 0 {
			w.totals.reasons[r].Add(n)
			notable += n
		}
	}
	if notable > 0 { // the common case, all well, takes no lock
		w.warn(counts, reasons[streams.ReasonUnjudged])
	}
}

// warn logs at most once per service per telemetry.warn_interval. The
// per-service state is serviceStats' own: lastWarn, and dups counting the
// points that broke the rule or changed the writer since.
func (w *metricUnit) warn(counts []metricCounts, unjudged int64) {
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
		st := c.svc
		before := st.dups
		for a := range numActions {
			for r := streams.Reason(1); r < streams.NumReasons; r++ {
				if r != streams.ReasonUnjudged {
					st.dups += c.points[a][r]
				}
			}
		}
		var elections int64
		for _, n := range c.elections {
			st.dups += n
			elections += n
		}
		w.book.note(st.name, c.event, st.dups-before-elections, elections, now)
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
		fields = append(fields,
			zap.Int64("points", st.dups),
			zap.String("action", actionNames[e.action]))
		if e.judged {
			fields = append(fields, zap.String("class", e.class.String()), zap.String("evidence", e.evidence))
		}
		fields = append(fields, zap.String("suggests", suggest(e)))
		s.logger.Warn("metric stream has more than one writer", fields...)
		st.lastWarn = now
		st.dups = 0
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
	if e.judged && e.class != streams.ClassUndecided {
		return e.class.Cause() // metrics.overlap auto: from the values
	}
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
