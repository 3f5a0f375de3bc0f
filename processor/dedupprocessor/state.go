package dedupprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
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

// shrink removes a quarter of the window's entries, reports the evictions
// and returns how many it removed.
func (w *signalWindow) shrink(ctx context.Context, t *telemetry) int {
	w.mu.Lock()
	removed := w.set.Shrink(w.set.Len() / 4)
	capEv, shrunk := w.evictionsLocked()
	w.mu.Unlock()
	w.reportEvictions(ctx, t, capEv, shrunk)
	return removed
}

// window is the signal's window itself; every unit embeds one.
func (w *signalWindow) window() *signalWindow { return w }

func (w *signalWindow) reportEvictions(ctx context.Context, t *telemetry, capacity, shrunk int64) {
	if capacity > 0 {
		t.evicted.Add(ctx, capacity, w.capacityOpt)
	}
	if shrunk > 0 {
		t.evicted.Add(ctx, shrunk, w.shrinkOpt)
	}
}

// unit is one signal's part of the state: its window (or tracker) behind
// its lock, its services, its totals and, with storage, its journal. Each
// unit also judges its signal's requests and settles them (traces.go,
// logs.go, metrics.go); state holds the units, and persistence and memory
// pressure loop over them.
type unit interface {
	// window is the unit's entries behind its lock, as telemetry, the
	// status page and memory pressure see them.
	window() *signalWindow
	// reseed keys the unit's digests with the stored seed, before restore.
	reseed(seed window.Seed)
	// restore replays what storage holds for the unit (its journal, its
	// snapshot) into its window; the fields say what it restored.
	restore(ctx context.Context, client storage.Client, logger *zap.Logger) ([]zap.Field, error)
	// checkpoint trims the unit's journal to its window, or stores its
	// snapshot, logging what fails.
	checkpoint(ctx context.Context, now int64, logger *zap.Logger)
	// close ends the unit's use of storage, with a last checkpoint; the
	// fields say what it wrote.
	close(ctx context.Context, logger *zap.Logger) []zap.Field
}

// pending is what one request changed in its unit, settled once the next
// consumer has answered.
type pending interface {
	// commit journals what the delivered request stored, before the
	// sender is answered. A failure here costs a possible duplicate after a
	// crash, not data.
	commit(ctx context.Context)
	// rollback takes back what the refused request stored, so that the
	// sender's retry passes instead of being dropped as a duplicate.
	rollback(ctx context.Context, tel *telemetry)
}

// settle is the tail every consume path shares: err is the next
// consumer's answer to the request that changed p.
func settle(ctx context.Context, p pending, tel *telemetry, err error) error {
	if err != nil {
		p.rollback(ctx, tel)
		return err
	}
	p.commit(ctx)
	return nil
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
		nested:  newNestedState(cfg),
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
