package dedupprocessor

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/sanitize"
	"github.com/doubletake/doubletake/internal/scan"
	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// otherService is the service.name label for services past the cap.
const otherService = "_other"

// ledger is one service's count of one signal since the state was made:
// the one record of what the service sent and what dedup found in it.
// Each request is entered once (services.record, metricUnit.record); the
// OTel counters observe it at collection time (observeLedgers), the
// summary line (summary.go) sums it, the warnings take the difference to
// the ledger at their last one, and the status page shows it. Guarded by
// services.mu.
type ledger struct {
	received   int64 // items judged: spans, log records, metric points
	duplicates int64 // spans and log records: exact copies
	conflicts  int64 // spans: same ids, other content
	invalid    int64 // spans: all-zero ids
	// points are the metric points that broke the single-writer rule, by
	// what happened to them and why; ReasonUnjudged counts the points
	// passed unjudged past metrics.max_streams.
	points    [numActions][streams.NumReasons]int64
	elections [streams.NumElections]int64
	// Requests that brought copies: repeated whole, or copies mixed with
	// new items (spans and log records).
	whole, partial int64
	first, last    time.Time
	// releaseCopies are the copies whose scope names a release known to
	// export twice, release the latest such release (releases.go).
	releaseCopies int64
	release       *scan.Finding
}

// reason is the points of reason r, whatever happened to them.
func (l *ledger) reason(r streams.Reason) int64 {
	var n int64
	for a := range numActions {
		n += l.points[a][r]
	}
	return n
}

// notable is the points that broke the rule (unjudged ones aside) and
// the elections: what a metric warning counts.
func (l *ledger) notable() int64 {
	var n int64
	for r := streams.Reason(1); r < streams.NumReasons; r++ {
		if r != streams.ReasonUnjudged {
			n += l.reason(r)
		}
	}
	return n + l.allElections()
}

func (l *ledger) allElections() int64 {
	var n int64
	for _, e := range l.elections {
		n += e
	}
	return n
}

// plus adds o to l: a request to a service's ledger, or services' ledgers
// to a signal's sum.
func (l *ledger) plus(o *ledger, now time.Time) {
	if o.received <= 0 && o.elections == [streams.NumElections]int64{} { // a held restart's election carries no item
		return
	}
	if l.first.IsZero() {
		l.first = now
	}
	l.last = now
	l.received += o.received
	l.duplicates += o.duplicates
	l.conflicts += o.conflicts
	l.invalid += o.invalid
	l.whole += o.whole
	l.partial += o.partial
	l.releaseCopies += o.releaseCopies
	if o.release != nil {
		l.release = o.release
	}
	for a := range l.points {
		for r := range l.points[a] {
			l.points[a][r] += o.points[a][r]
		}
	}
	for e := range l.elections {
		l.elections[e] += o.elections[e]
	}
}

// minus is l less o, counts only: what came since o was taken.
func (l ledger) minus(o ledger) ledger {
	d := ledger{
		received: l.received - o.received, duplicates: l.duplicates - o.duplicates,
		conflicts: l.conflicts - o.conflicts, invalid: l.invalid - o.invalid,
		whole: l.whole - o.whole, partial: l.partial - o.partial,
		releaseCopies: l.releaseCopies - o.releaseCopies,
	}
	if d.releaseCopies > 0 {
		d.release = l.release
	}
	for a := range d.points {
		for r := range d.points[a] {
			d.points[a][r] = l.points[a][r] - o.points[a][r]
		}
	}
	for e := range d.elections {
		d.elections[e] = l.elections[e] - o.elections[e]
	}
	return d
}

// What happened to a point that broke the single-writer rule.
const (
	actionDropped = iota
	actionPassed
	actionSplit
	numActions
)

var actionNames = [numActions]string{"dropped", "passed", "split"}

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

// serviceStats is one service's label sets, its ledger and its warning
// state.
type serviceStats struct {
	name string

	received        metric.MeasurementOption
	dupDropped      metric.MeasurementOption
	dupPassed       metric.MeasurementOption
	conflictDropped metric.MeasurementOption
	conflictPassed  metric.MeasurementOption
	invalid         metric.MeasurementOption

	// metrics holds the metric signal's label sets (metrics_telemetry.go);
	// nil for the other signals.
	metrics *metricLabels

	ledger   ledger    // guarded by services.mu
	warned   ledger    // the ledger at the last warning; guarded by services.mu
	lastWarn time.Time // guarded by services.mu
}

// services caps the service.name label and keeps each service's label sets
// so that recording allocates nothing, and each service's ledger.
type services struct {
	signal string
	max    int
	logger *zap.Logger
	every  time.Duration
	// releases names the known release behind copies by their scope
	// (releases.go); nil names none.
	releases *scan.ScopeMatcher

	mu    sync.Mutex
	known map[string]*serviceStats
	other *serviceStats
}

func newServices(signal string, max int, every time.Duration, logger *zap.Logger) *services {
	s := &services{signal: signal, max: max, every: every, logger: logger, known: make(map[string]*serviceStats)}
	s.other = s.make(otherService)
	return s
}

// setLogger makes the warnings of this signal go to logger: the logger of
// the pipeline that carries the signal (the state is shared by all).
func (s *services) setLogger(logger *zap.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logger = logger
}

func (s *services) make(name string) *serviceStats {
	attrs := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		kv = append(kv, attribute.String("signal", s.signal), attribute.String("service.name", name))
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	dropped, passed := attribute.String("action", "dropped"), attribute.String("action", "passed")
	st := &serviceStats{
		name:            name,
		received:        attrs(),
		dupDropped:      attrs(dropped),
		dupPassed:       attrs(passed),
		conflictDropped: attrs(dropped),
		conflictPassed:  attrs(passed),
		invalid:         attrs(),
	}
	if s.signal == "metrics" {
		st.metrics = newMetricLabels(name)
	}
	return st
}

// get returns the stats of the service a resource names. The name becomes
// a label and a log field: it is sanitized first (valid UTF-8, escaped,
// bounded), and it is also the map key, so that no long string from a
// request is kept.
func (s *services) get(res pcommon.Resource) *serviceStats {
	name := "unknown_service"
	if v, ok := res.Attributes().Get("service.name"); ok {
		name = sanitize.Label(v.AsString())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.known[name]; ok {
		return st
	}
	if len(s.known) >= s.max {
		return s.other
	}
	st := s.make(name)
	s.known[name] = st
	return st
}

// all calls f for every service, _other last. Call with mu held.
func (s *services) all(f func(st *serviceStats)) {
	for _, st := range s.known {
		f(st)
	}
	f(s.other)
}

// sum is the signal's ledger: every service's added up.
func (s *services) sum() ledger {
	var sum ledger
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all(func(st *serviceStats) { sum.plus(&st.ledger, st.ledger.last) })
	return sum
}

// statusRows are the services' rows for the status page, from their
// ledgers; action is what happened to the copies.
func (s *services) statusRows(action string) []statuspage.ServiceStatus {
	type row struct {
		name string
		l    ledger
	}
	s.mu.Lock()
	rows := make([]row, 0, len(s.known)+1)
	s.all(func(st *serviceStats) { rows = append(rows, row{st.name, st.ledger}) })
	s.mu.Unlock()
	out := make([]statuspage.ServiceStatus, 0, len(rows))
	for _, r := range rows {
		if r.l.received == 0 {
			continue
		}
		ss := statuspage.ServiceStatus{
			Service: r.name, Signal: s.signal, Received: r.l.received, Copies: r.l.duplicates,
			Share: float64(r.l.duplicates) / float64(r.l.received), Action: action,
			FirstSeen: r.l.first.UTC(), LastSeen: r.l.last.UTC(),
		}
		if r.l.duplicates > 0 {
			ss.Diagnosis = releaseDiagnosis(&r.l)
		}
		if r.l.releaseCopies > 0 && r.l.release != nil {
			ss.Release, ss.ReleaseCopies, ss.Fix = r.l.release.Release(), r.l.releaseCopies, r.l.release.Fix
		}
		out = append(out, ss)
	}
	return out
}

// observeLedgers makes the per-service counters (received, duplicate,
// conflict and invalid-id items; metric points, elections, unjudged
// points) read the services' ledgers whenever telemetry is collected.
// dupDropped and conflictDropped say what the config does with copies and
// conflicts: the action label.
func (t *telemetry) observeLedgers(traces, logs, metrics *services, dupDropped, conflictDropped bool) error {
	each := func(ss []*services, f func(st *serviceStats, l *ledger)) {
		for _, s := range ss {
			s.mu.Lock()
			s.all(func(st *serviceStats) { f(st, &st.ledger) })
			s.mu.Unlock()
		}
	}
	pick := func(drop bool, dropped, passed metric.MeasurementOption) metric.MeasurementOption {
		if drop {
			return dropped
		}
		return passed
	}
	items := []*services{traces, logs}
	b := t.builder
	return errors.Join(
		b.RegisterProcessorDedupReceivedItemsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each([]*services{traces, logs, metrics}, func(st *serviceStats, l *ledger) {
				if l.received > 0 {
					o.Observe(l.received, st.received)
				}
			})
			return nil
		}),
		b.RegisterProcessorDedupDuplicateItemsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each(items, func(st *serviceStats, l *ledger) {
				if l.duplicates > 0 {
					o.Observe(l.duplicates, pick(dupDropped, st.dupDropped, st.dupPassed))
				}
			})
			return nil
		}),
		b.RegisterProcessorDedupConflictItemsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each(items, func(st *serviceStats, l *ledger) {
				if l.conflicts > 0 {
					o.Observe(l.conflicts, pick(conflictDropped, st.conflictDropped, st.conflictPassed))
				}
			})
			return nil
		}),
		b.RegisterProcessorDedupInvalidIDItemsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each(items, func(st *serviceStats, l *ledger) {
				if l.invalid > 0 {
					o.Observe(l.invalid, st.invalid)
				}
			})
			return nil
		}),
		b.RegisterProcessorDedupMetricPointsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each([]*services{metrics}, func(st *serviceStats, l *ledger) {
				for a := range numActions {
					for r := streams.Reason(1); r < streams.NumReasons; r++ {
						if n := l.points[a][r]; n > 0 && r != streams.ReasonUnjudged {
							o.Observe(n, st.metrics.points[a][r])
						}
					}
				}
			})
			return nil
		}),
		b.RegisterProcessorDedupUnjudgedPointsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each([]*services{metrics}, func(st *serviceStats, l *ledger) {
				if n := l.reason(streams.ReasonUnjudged); n > 0 {
					o.Observe(n, st.metrics.unjudged)
				}
			})
			return nil
		}),
		b.RegisterProcessorDedupMetricElectionsCallback(func(_ context.Context, o metric.Int64Observer) error {
			each([]*services{metrics}, func(st *serviceStats, l *ledger) {
				for e := streams.Election(1); e < streams.NumElections; e++ {
					if n := l.elections[e]; n > 0 {
						o.Observe(n, st.metrics.elections[e])
					}
				}
			})
			return nil
		}),
	)
}

// counts is what one request brought for one service.
type counts struct {
	svc        *serviceStats
	received   int64
	duplicates int64
	conflicts  int64
	invalid    int64
	// releaseCopies of the duplicates came under a scope naming release,
	// a release known to export twice (releases.go).
	releaseCopies int64
	release       *scan.Finding
}

// record enters one request's counts in the services' ledgers and, at
// most once per service per interval, warns about what the pattern
// suggests.
func (s *services) record(c []counts, drop bool, wholeRequest bool, noun string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range c {
		cs := &c[i]
		st := cs.svc
		req := ledger{received: cs.received, duplicates: cs.duplicates, conflicts: cs.conflicts, invalid: cs.invalid,
			releaseCopies: cs.releaseCopies, release: cs.release}
		if cs.duplicates > 0 {
			if wholeRequest {
				req.whole = 1
			} else {
				req.partial = 1
			}
		}
		st.ledger.plus(&req, now)
		if cs.duplicates == 0 || now.Sub(st.lastWarn) < s.every {
			continue
		}
		since := st.ledger.minus(st.warned)
		fields := []zap.Field{
			zap.String("service.name", st.name),
			zap.Int64("duplicates", since.duplicates),
			zap.Int64("received", since.received),
			zap.String("suggests", releaseDiagnosis(&since)),
			zap.Bool("dropped", drop),
		}
		if since.releaseCopies > 0 && since.release != nil {
			fields = append(fields, zap.String("release", since.release.Release()), zap.Int64("release_copies", since.releaseCopies))
		}
		s.logger.Warn("duplicate "+noun+" received", fields...)
		st.lastWarn = now
		st.warned = st.ledger
	}
}

// releaseDiagnosis is what a ledger's copies suggest: the known release
// its copies came from, with verify's advice, when there is one;
// otherwise the guess from their shape.
func releaseDiagnosis(l *ledger) string {
	if l.releaseCopies > 0 && l.release != nil {
		return l.release.ScopeBrief()
	}
	return diagnose(l.whole, l.partial)
}

// diagnose names the likely cause from the shape of the duplicates: whole
// requests repeated point at re-sent batches; copies mixed with new items
// point at a second exporter in the process, which batches on its own.
func diagnose(whole, partial int64) string {
	switch {
	case whole > 0 && partial == 0:
		return "whole requests arrive again: an exporter re-sending batches that had already arrived (retries), or two identical export pipelines in one process"
	case partial > 0 && whole == 0:
		return "copies arrive mixed with new items: a second span processor or exporter in the same process (e.g. an SDK or framework that adds its own OTLP exporter)"
	default:
		return "both whole repeated requests and mixed copies: a second exporter in the process and/or re-sent batches"
	}
}
