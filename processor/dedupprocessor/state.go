package dedupprocessor

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/internal/scan"
	"github.com/doubletake/doubletake/internal/storagestate"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
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
	streams *streamBook  // the metric streams with more than one writer; nil without the status page

	users int // processors holding this state; guarded by factory.mu

	budget *waitBudget // the requests waiting for their copies' originals (copies.go)

	status *statuspage.Server // nil unless status.http.endpoint; reads statusSnapshot (status.go)
	header statuspage.Header  // the page's fixed header: version, start, endpoint
	queues *queueWatch        // the factory's: the sending queues exporters after dedup report
	// dataDirs are the storage extensions that report their data dir's
	// room (log_storage), found through the host at start.
	dataDirs []storagestate.Reporter

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
		s := newServices(signal, cfg.Telemetry.MaxServices, cfg.Telemetry.WarnInterval, set.Logger)
		s.releases = scan.BuiltinScopeMatcher() // releases.go
		return s
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
		budget:  &waitBudget{maxRequests: cfg.Copies.MaxWaiting, maxBytes: cfg.Copies.MaxWaitingBytes},
	}
	var windows []*signalWindow
	for _, u := range st.units() {
		windows = append(windows, u.window())
	}
	if err := observeWindows(tel, windows); err != nil {
		return nil, err
	}
	if err := tel.observeLedgers(traces.svcs, logs.svcs, metrics.svcs,
		cfg.Mode == ModeDrop, cfg.Mode == ModeDrop && cfg.Traces.OnConflict == ConflictKeepFirst); err != nil {
		return nil, err
	}
	if err := observeWriters(tel.builder, metrics.auto, metrics.judgeStats); err != nil { // metrics_class.go
		return nil, err
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
		p, err := openPersistence(ctx, host, *s.cfg.Storage, s.id, s.units(), &s.seed, s.tel, s.logger)
		if err != nil {
			return err
		}
		s.persist = p
	}
	s.dataDirs = dataDirReporters(host)
	if err := s.status.Start(ctx, host); err != nil {
		s.closePersistence()
		return err
	}
	// The loops outlive Start's context: they stop with the last
	// processor's Shutdown.
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.persist != nil {
		p := s.persist
		s.wg.Go(func() { p.checkpointLoop(bg, s.cfg.CheckpointInterval) })
	}
	if s.cfg.MemorySoftLimitMiB > 0 {
		p := pressure{signals: s.units(), tel: s.tel, logger: s.logger, limitMiB: s.cfg.MemorySoftLimitMiB, warnEvery: s.cfg.Telemetry.WarnInterval}
		s.wg.Go(func() { p.loop(bg) })
	}
	if s.cfg.Telemetry.SummaryInterval > 0 {
		sum := s.summary()
		s.wg.Go(func() { sum.loop(bg, s.cfg.Telemetry.SummaryInterval) })
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
	s.status.Stop()
	s.cancel()
	s.wg.Wait()
	s.cancel = nil
	s.closePersistence()
}

// waits is what makes a request wait for the originals of its copies.
func (s *state) waits() copyWaits { return copyWaits{budget: s.budget, tel: s.tel} }

// summary is what the summary line reads: the signals' services and
// windows.
func (s *state) summary() summary {
	return summary{
		traces: s.traces.svcs, logs: s.logs.svcs, metrics: s.metrics.svcs,
		windows: [3]*signalWindow{s.traces.window(), s.logs.window(), s.metrics.window()},
		mode:    s.cfg.Mode, logger: s.logger,
	}
}

// closePersistence stores what is left and closes the storage. Call with
// mu held.
func (s *state) closePersistence() {
	if s.persist != nil {
		s.persist.close()
		s.persist = nil
	}
}
