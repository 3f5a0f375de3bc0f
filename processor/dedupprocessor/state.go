package dedupprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// state is shared by every processor created for one component ID, across
// signals and pipelines, so that a copy is caught whichever pipeline it
// arrives through.
type state struct {
	id     component.ID
	seed   window.Seed // keys the log digests and stream ids; kept in storage
	cfg    *Config
	logger *zap.Logger
	tel    *telemetry

	traces  *spanUnit
	logs    *logUnit
	metrics *metricUnit
	nested  *nestedState // nil unless traces.nested.detect

	users int // processors holding this state; guarded by factory.mu

	status *statusServer // nil unless status.http.endpoint (status.go)

	// mu guards the background work: the storage while it is open, and
	// the context whose cancel stops the loops that wg waits for.
	mu      sync.Mutex
	persist *persistence // nil without cfg.Storage or while not running
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  bool // stopped for good: the last processor has shut down
}

// units are the state's signals, in the order storage and logs list them.
func (s *state) units() [3]unit { return [3]unit{s.traces, s.logs, s.metrics} }

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
	svcs := func(signal string) *services {
		return newServices(signal, cfg.Telemetry.MaxServices, cfg.Telemetry.WarnInterval, set.Logger)
	}
	traces, err := newSpanUnit(cfg, seed, svcs("traces"))
	if err != nil {
		return nil, err
	}
	logs, err := newLogUnit(cfg, seed, svcs("logs"))
	if err != nil {
		return nil, err
	}
	metrics, err := newMetricUnit(cfg, seed, svcs("metrics"))
	if err != nil {
		return nil, err
	}
	st := &state{
		nested:  newNestedState(cfg, seed),
		id:      id,
		seed:    seed,
		cfg:     cfg,
		logger:  sharedLogger(set.Logger),
		tel:     tel,
		traces:  traces,
		logs:    logs,
		metrics: metrics,
	}
	var windows []*signalWindow
	for _, u := range st.units() {
		windows = append(windows, u.window())
	}
	if err := tel.observe(set, windows); err != nil {
		return nil, err
	}
	if err := metrics.observeWriters(tel.builder); err != nil { // metrics_class.go
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

// start starts the background work, once for all the processors sharing
// the state: it restores the stored windows (with cfg.Storage), serves the
// status page and starts the checkpoint, memory pressure and summary
// loops. Later calls, and calls after stop, do nothing.
func (s *state) start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil || s.closed {
		return nil
	}
	if s.cfg.Storage != nil {
		p, err := s.openPersistence(ctx, host)
		if err != nil {
			return err
		}
		s.persist = p
	}
	if err := s.status.start(ctx, host, s.persist); err != nil {
		s.closePersistence()
		return err
	}
	// The loops outlive Start's context: they stop with the last
	// processor's Shutdown.
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.persist != nil {
		s.wg.Go(func() { s.checkpointLoop(bg, s.cfg.CheckpointInterval) })
	}
	if s.cfg.MemorySoftLimitMiB > 0 {
		s.wg.Go(func() { s.pressureLoop(bg, uint64(s.cfg.MemorySoftLimitMiB)<<20) })
	}
	if s.cfg.Telemetry.SummaryInterval > 0 {
		s.wg.Go(func() { s.summaryLoop(bg, s.cfg.Telemetry.SummaryInterval) })
	}
	return nil
}

// stop ends the background work for good: it is called when the last
// processor sharing the state shuts down, started or not.
func (s *state) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cancel == nil {
		return
	}
	s.status.stop()
	s.cancel()
	s.wg.Wait()
	s.cancel = nil
	s.closePersistence()
}

// closePersistence stores what is left and closes the storage. Call with
// mu held.
func (s *state) closePersistence() {
	if s.persist != nil {
		s.persist.close(s.units(), s.logger)
		s.persist = nil
	}
}

func (s *state) summaryLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var prevSpans, prevLogs totals
	var prevMetrics metricTotalsSnapshot
	for {
		select {
		case <-ctx.Done():
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
