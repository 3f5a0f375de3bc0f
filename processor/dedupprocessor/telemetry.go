package dedupprocessor

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/sanitize"
)

const scopeName = "github.com/doubletake/doubletake/processor/dedupprocessor"

// otherService is the service.name label for services past the cap.
const otherService = "_other"

// telemetry holds the processor's instruments.
type telemetry struct {
	received   metric.Int64Counter
	duplicates metric.Int64Counter
	conflicts  metric.Int64Counter
	invalid    metric.Int64Counter
	evicted    metric.Int64Counter
	rolledBack metric.Int64Counter
	lost       metric.Int64Counter
	reg        metric.Registration

	// Metrics only (metrics.go).
	metricPoints    metric.Int64Counter
	metricElections metric.Int64Counter
	unjudged        metric.Int64Counter

	// Nested duplicates (nested.go).
	nestedSpans metric.Int64Counter

	// The stored journals (persist.go), observed while storage is open.
	meter           metric.Meter
	journalSegments metric.Int64ObservableGauge
	journalLimit    metric.Int64ObservableGauge
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	m := set.MeterProvider.Meter(scopeName)
	t := &telemetry{meter: m}
	var errs error
	counter := func(dst *metric.Int64Counter, name, unit, description string) {
		c, err := m.Int64Counter(name, metric.WithDescription(description), metric.WithUnit(unit))
		*dst, errs = c, errors.Join(errs, err)
	}
	counter(&t.received, "otelcol_processor_dedup_received_items", "{item}",
		"Items (spans, log records, metric points) the processor judged.")
	counter(&t.duplicates, "otelcol_processor_dedup_duplicate_items", "{item}",
		"Exact copies of items already seen within the window; action says whether they were dropped or passed.")
	counter(&t.conflicts, "otelcol_processor_dedup_conflict_items", "{item}",
		"Spans whose ids were seen before with different content; action follows traces.on_conflict.")
	counter(&t.invalid, "otelcol_processor_dedup_invalid_id_items", "{item}",
		"Spans with an all-zero trace or span id, passed through untouched.")
	counter(&t.evicted, "otelcol_processor_dedup_evicted_entries", "{entry}",
		"Window entries removed before their window ended: the window was full (reason=capacity) or memory ran short (reason=shrink); spans the nested detector forgot for traces.nested.max_spans (reason=nested_capacity) or max_bytes (reason=nested_bytes).")
	counter(&t.rolledBack, "otelcol_processor_dedup_rolled_back_entries", "{entry}",
		"Window entries taken back because the next component refused their data, so that a retry is not taken for a duplicate.")
	counter(&t.lost, "otelcol_processor_dedup_lost_items", "{item}",
		"Items a component after dedup accepted and then lost for good (a permanent error from its backend); their window entries were taken back, so that a re-send passes.")
	counter(&t.metricPoints, "otelcol_processor_dedup_metric_points", "{point}",
		"Metric points that broke the single-writer rule, by reason (duplicate, overlap, out_of_order, decrease, suspected_writer); action says whether they were dropped, passed, or split into their writer's own series.")
	counter(&t.metricElections, "otelcol_processor_dedup_metric_elections", "{election}",
		"Changes of a metric stream's elected writer, by reason: earlier_start (a live writer with an earlier start took over), restart (a writer that started at or after the elected writer's newest point), failover (the elected writer sent nothing for metrics.failover_after).")
	counter(&t.unjudged, "otelcol_processor_dedup_unjudged_points", "{point}",
		"Metric points of new streams passed unjudged because metrics.max_streams streams were tracked already.")
	counter(&t.nestedSpans, "otelcol_processor_dedup_nested_spans", "{span}",
		"Nested duplicates (double instrumentation: one operation recorded as two spans) by service and scope pair; action is counted, or collapsed with traces.collapse_nested.")
	var err error
	t.journalSegments, err = m.Int64ObservableGauge("otelcol_processor_dedup_journal_segments",
		metric.WithDescription("Segments the stored window (storage) holds now: one per delivered request within the window."), metric.WithUnit("{segment}"))
	errs = errors.Join(errs, err)
	t.journalLimit, err = m.Int64ObservableGauge("otelcol_processor_dedup_journal_segments_limit",
		metric.WithDescription("The most segments a stored window holds; past it the oldest go, and a restart restores less than the window held."), metric.WithUnit("{segment}"))
	errs = errors.Join(errs, err)
	return t, errs
}

// observeJournals reports the stored journals' segments against their
// bound until the registration is unregistered (when storage closes).
func (t *telemetry) observeJournals(spans, logs interface{ Len() int }) (metric.Registration, error) {
	tracesOpt := metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "traces")))
	logsOpt := metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "logs")))
	return t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(t.journalSegments, int64(spans.Len()), tracesOpt)
		o.ObserveInt64(t.journalSegments, int64(logs.Len()), logsOpt)
		o.ObserveInt64(t.journalLimit, maxSegments, tracesOpt)
		o.ObserveInt64(t.journalLimit, maxSegments, logsOpt)
		return nil
	}, t.journalSegments, t.journalLimit)
}

// observe registers the gauges, read from the windows at collection time.
func (t *telemetry) observe(set component.TelemetrySettings, windows []*signalWindow) error {
	m := set.MeterProvider.Meter(scopeName)
	entries, err1 := m.Int64ObservableGauge("otelcol_processor_dedup_entries",
		metric.WithDescription("Entries held in the window now."), metric.WithUnit("{entry}"))
	limit, err2 := m.Int64ObservableGauge("otelcol_processor_dedup_entries_limit",
		metric.WithDescription("The most entries the window holds."), metric.WithUnit("{entry}"))
	eff, err3 := m.Float64ObservableGauge("otelcol_processor_dedup_effective_window",
		metric.WithDescription("How far back the window reaches now; shorter than configured when the window is full."), metric.WithUnit("s"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		now := time.Now().UnixNano()
		for _, w := range windows {
			s := w.snapshot(now)
			attrs := metric.WithAttributeSet(w.signalAttrs)
			o.ObserveInt64(entries, int64(s.entries), attrs)
			o.ObserveInt64(limit, int64(s.limit), attrs)
			o.ObserveFloat64(eff, s.effective.Seconds(), attrs)
		}
		return nil
	}, entries, limit, eff)
	t.reg = reg
	return err
}

func (t *telemetry) shutdown() error {
	if t.reg != nil {
		return t.reg.Unregister()
	}
	return nil
}

// serviceStats is one service's label sets and its warning state.
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

	totals serviceTotals // for the status page (status.go); guarded by services.mu

	// Since the last warning (guarded by services.mu).
	lastWarn        time.Time
	dups, items     int64
	wholeRequests   int64 // requests that were duplicates from end to end
	partialRequests int64 // requests with some duplicates among new items
}

// services caps the service.name label and keeps each service's label sets
// so that recording allocates nothing.
type services struct {
	signal string
	max    int
	logger *zap.Logger
	every  time.Duration

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

// counts is what one request brought for one service.
type counts struct {
	svc        *serviceStats
	received   int64
	duplicates int64
	conflicts  int64
	invalid    int64
}

// record adds one request's counts to the instruments and, at most once per
// service per interval, warns about what the pattern suggests.
func (s *services) record(ctx context.Context, t *telemetry, c []counts, drop, dropConflicts bool, wholeRequest bool, noun string) {
	for i := range c {
		cs := &c[i]
		if cs.received > 0 {
			t.received.Add(ctx, cs.received, cs.svc.received)
		}
		if cs.duplicates > 0 {
			if drop {
				t.duplicates.Add(ctx, cs.duplicates, cs.svc.dupDropped)
			} else {
				t.duplicates.Add(ctx, cs.duplicates, cs.svc.dupPassed)
			}
		}
		if cs.conflicts > 0 {
			if dropConflicts {
				t.conflicts.Add(ctx, cs.conflicts, cs.svc.conflictDropped)
			} else {
				t.conflicts.Add(ctx, cs.conflicts, cs.svc.conflictPassed)
			}
		}
		if cs.invalid > 0 {
			t.invalid.Add(ctx, cs.invalid, cs.svc.invalid)
		}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range c {
		cs := &c[i]
		st := cs.svc
		st.items += cs.received
		st.totals.add(cs.received, cs.duplicates, wholeRequest, now)
		if cs.duplicates == 0 {
			continue
		}
		st.dups += cs.duplicates
		if wholeRequest {
			st.wholeRequests++
		} else {
			st.partialRequests++
		}
		if now.Sub(st.lastWarn) < s.every {
			continue
		}
		s.logger.Warn("duplicate "+noun+" received",
			zap.String("service.name", st.name),
			zap.Int64("duplicates", st.dups),
			zap.Int64("received", st.items),
			zap.String("suggests", diagnose(st.wholeRequests, st.partialRequests)),
			zap.Bool("dropped", drop))
		st.lastWarn = now
		st.dups, st.items, st.wholeRequests, st.partialRequests = 0, 0, 0, 0
	}
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
