package dedupprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// windowSet is what every signal's window offers to telemetry and lifecycle.
type windowSet interface {
	Len() int
	Capacity() int
	Oldest() (int64, bool)
	Stats() window.Stats
	Expire(now int64)
	Shrink(n int) int
}

// signalWindow is one signal's window behind its lock, with what it has
// reported to telemetry so far.
type signalWindow struct {
	signal      string
	signalAttrs attribute.Set
	signalOpt   metric.MeasurementOption
	capacityOpt metric.MeasurementOption
	shrinkOpt   metric.MeasurementOption

	mu       sync.Mutex
	set      windowSet
	reported window.Stats // counted into telemetry already; guarded by mu
}

func newSignalWindow(signal string, set windowSet) *signalWindow {
	sig := attribute.String("signal", signal)
	return &signalWindow{
		signal:      signal,
		signalAttrs: attribute.NewSet(sig),
		signalOpt:   metric.WithAttributeSet(attribute.NewSet(sig)),
		capacityOpt: metric.WithAttributeSet(attribute.NewSet(sig, attribute.String("reason", "capacity"))),
		shrinkOpt:   metric.WithAttributeSet(attribute.NewSet(sig, attribute.String("reason", "shrink"))),
		set:         set,
	}
}

type windowSnapshot struct {
	entries, limit int
	effective      time.Duration
	stats          window.Stats
}

func (w *signalWindow) snapshot(now int64) windowSnapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := windowSnapshot{entries: w.set.Len(), limit: w.set.Capacity(), stats: w.set.Stats()}
	if oldest, ok := w.set.Oldest(); ok && now > oldest {
		s.effective = time.Duration(now - oldest)
	}
	return s
}

// evictionsLocked returns the evictions not yet reported and marks them
// reported. Call with mu held.
func (w *signalWindow) evictionsLocked() (capacity, shrunk int64) {
	s := w.set.Stats()
	capacity = int64(s.Evicted - w.reported.Evicted)
	shrunk = int64(s.Shrunk - w.reported.Shrunk)
	w.reported = s
	return capacity, shrunk
}

func (w *signalWindow) reportEvictions(ctx context.Context, t *telemetry, capacity, shrunk int64) {
	if capacity > 0 {
		t.evicted.Add(ctx, capacity, w.capacityOpt)
	}
	if shrunk > 0 {
		t.evicted.Add(ctx, shrunk, w.shrinkOpt)
	}
}

// state is shared by every processor created for one component ID, across
// signals and pipelines, so that a copy is caught whichever pipeline it
// arrives through.
type state struct {
	id     component.ID
	seed   window.Seed // keys the log digests and stream ids; kept in storage
	cfg    *Config
	logger *zap.Logger
	tel    *telemetry
	traces *spanWindow
	logs   *logWindow
	// metrics is the per-stream writer state (metrics.go).
	metrics *metricWindow

	spanSvcs *services
	logSvcs  *services
	nested   *nestedState // nil unless traces.nested.detect

	users int // processors holding this state; guarded by factory.mu

	persist *persistence  // nil without cfg.Storage; set by the first start
	status  *statusServer // nil unless status.http.endpoint (status.go)

	mu           sync.Mutex
	running      int
	stop         chan struct{}
	done         chan struct{}
	pressureStop chan struct{} // the memory pressure loop, with memory_soft_limit_mib
	pressureDone chan struct{}
}

// attributeDropper is what the collector's component loggers implement
// (service/internal/componentattribute): a core that can leave out the
// attributes it injects.
type attributeDropper interface {
	DropInjectedAttributes(droppedAttrs ...string) zapcore.Core
}

// sharedLogger is l without the signal and pipeline the collector injected:
// the state serves every pipeline of the component, so its own messages
// (summary, memory pressure, storage) belong to none of them. The
// collector's memory_limiter, shared the same way, does the same.
func sharedLogger(l *zap.Logger) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		if d, ok := c.(attributeDropper); ok {
			return d.DropInjectedAttributes("otelcol.signal", "otelcol.pipeline.id")
		}
		return c
	}))
}

func newState(id component.ID, set component.TelemetrySettings, cfg *Config) (*state, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, err
	}
	seed := window.NewSeed()
	traces, err := newSpanWindow(cfg, seed)
	if err != nil {
		return nil, err
	}
	logs, err := newLogWindow(cfg, seed)
	if err != nil {
		return nil, err
	}
	metrics, err := newMetricWindow(cfg, seed, newServices("metrics", cfg.Telemetry.MaxServices, cfg.Telemetry.WarnInterval, set.Logger))
	if err != nil {
		return nil, err
	}
	st := &state{
		nested:   newNestedState(cfg),
		id:       id,
		seed:     seed,
		cfg:      cfg,
		logger:   sharedLogger(set.Logger),
		tel:      tel,
		traces:   traces,
		logs:     logs,
		metrics:  metrics,
		spanSvcs: newServices("traces", cfg.Telemetry.MaxServices, cfg.Telemetry.WarnInterval, set.Logger),
		logSvcs:  newServices("logs", cfg.Telemetry.MaxServices, cfg.Telemetry.WarnInterval, set.Logger),
	}
	if err := tel.observe(set, []*signalWindow{&traces.signalWindow, &logs.signalWindow, &metrics.signalWindow}); err != nil {
		return nil, err
	}
	if st.status, err = newStatusServer(st, set); err != nil {
		return nil, err
	}
	if st.status != nil {
		metrics.book = st.status.book
	}
	return st, nil
}

// start is called by every processor sharing the state; the first restores
// the stored windows (with cfg.Storage) and starts the summary loop.
func (s *state) start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == 0 && s.cfg.Storage != nil {
		p, err := s.openPersistence(ctx, host)
		if err != nil {
			return err
		}
		s.persist = p
	}
	if s.running == 0 {
		if err := s.status.start(ctx, host, s.persist); err != nil {
			return err
		}
	}
	s.running++
	if s.running == 1 && s.cfg.MemorySoftLimitMiB > 0 {
		s.pressureStop, s.pressureDone = make(chan struct{}), make(chan struct{})
		go s.pressureLoop(uint64(s.cfg.MemorySoftLimitMiB)<<20, s.pressureStop, s.pressureDone)
	}
	if s.running > 1 || s.cfg.Telemetry.SummaryInterval <= 0 {
		return nil
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.summaryLoop(s.cfg.Telemetry.SummaryInterval, s.stop, s.done)
	return nil
}

// shutdown is called by every started processor sharing the state; the
// last one stops the summary loop.
func (s *state) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == 0 {
		return
	}
	s.running--
	if s.running > 0 {
		return
	}
	s.status.stop()
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop, s.done = nil, nil
	}
	if s.pressureStop != nil {
		close(s.pressureStop)
		<-s.pressureDone
		s.pressureStop, s.pressureDone = nil, nil
	}
	if s.persist != nil {
		s.persist.close(s.logger)
		s.persist = nil
	}
}

func (s *state) summaryLoop(every time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var prevSpans, prevLogs totals
	var prevMetrics metricTotalsSnapshot
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		spans, logs := s.traces.totals.load(), s.logs.totals.load()
		ts, ls := s.traces.snapshot(now), s.logs.snapshot(now)
		ds, dl := spans.sub(prevSpans), logs.sub(prevLogs)
		prevSpans, prevLogs = spans, logs
		metrics := s.metrics.totals.load()
		dm := metrics.sub(prevMetrics)
		prevMetrics = metrics
		ms := s.metrics.snapshot(now)
		if ds.received == 0 && dl.received == 0 && dm.received == 0 {
			continue // quiet: nothing to say
		}
		s.logger.Info("dedup summary",
			zap.Duration("interval", every),
			zap.Int64("spans_received", ds.received),
			zap.Int64("spans_duplicate", ds.duplicates),
			zap.Int64("spans_conflict", ds.conflicts),
			zap.Int64("spans_invalid_id", ds.invalid),
			zap.Int64("logs_received", dl.received),
			zap.Int64("logs_duplicate", dl.duplicates),
			zap.String("mode", string(s.cfg.Mode)),
			zap.Int("span_entries", ts.entries),
			zap.Duration("span_window_effective", ts.effective.Round(time.Second)),
			zap.Uint64("span_entries_evicted", ts.stats.Evicted),
			zap.Int("log_entries", ls.entries),
			zap.Uint64("log_entries_evicted", ls.stats.Evicted),
			zap.Int64("metric_points_received", dm.received),
			zap.Int64("metric_points_duplicate", dm.reasons[streams.ReasonDuplicate]),
			zap.Int64("metric_points_overlap", dm.reasons[streams.ReasonOverlap]),
			zap.Int64("metric_points_out_of_order", dm.reasons[streams.ReasonOutOfOrder]),
			zap.Int64("metric_points_decrease", dm.reasons[streams.ReasonDecrease]),
			zap.Int64("metric_points_unjudged", dm.reasons[streams.ReasonUnjudged]),
			zap.Int64("metric_elections", dm.elections),
			zap.Int("metric_streams", ms.entries),
		)
	}
}
