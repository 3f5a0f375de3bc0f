package dedupprocessor

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/metadata"
)

// Type is the processor's component type in collector configs
// (metadata.yaml).
var Type = metadata.Type

func (f *factory) processorFactory() processor.Factory {
	return processor.NewFactory(
		Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(f.createTraces, metadata.TracesStability),
		processor.WithLogs(f.createLogs, metadata.LogsStability),
		processor.WithMetrics(f.createMetrics, metadata.MetricsStability),
	)
}

type factory struct {
	mu     sync.Mutex
	states map[component.ID]*state
	queues queueWatch // the sending queues exporters after dedup report (TakeBack)
}

// stateFor returns the state shared by set.ID's processors, making it on
// first use. The state is dropped when the last processor using it shuts
// down, so a reloaded config starts afresh with its own settings.
func (f *factory) stateFor(set processor.Settings, cfg *Config) (*state, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.states[set.ID]; ok {
		st.users++
		return st, nil
	}
	st, err := newState(set.ID, set.TelemetrySettings, cfg)
	if err != nil {
		return nil, err
	}
	if err := st.serveStatus(set.TelemetrySettings, set.BuildInfo.Version); err != nil {
		st.tel.shutdown()
		return nil, err
	}
	st.users = 1
	st.queues = &f.queues
	f.states[set.ID] = st
	return st, nil
}

// release lets go of st for one processor; the last one stops its
// background work and drops it.
func (f *factory) release(st *state) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.users--
	if st.users > 0 {
		return nil
	}
	if f.states[st.id] == st {
		delete(f.states, st.id)
	}
	st.stop()
	st.tel.shutdown()
	return nil
}

// lifecycle gives one processor its Start and Shutdown. The processors
// sharing a state start its background work once, whichever starts first;
// the last to shut down stops it. Shutdown releases the state once, with or
// without Start; a Start after it does nothing.
func (f *factory) lifecycle(st *state) (component.StartFunc, component.ShutdownFunc) {
	release := sync.OnceValue(func() error { return f.release(st) })
	return st.start, func(context.Context) error { return release() }
}

func capabilities(cfg *Config) consumer.Capabilities {
	return consumer.Capabilities{MutatesData: cfg.Mode == ModeDrop}
}

func (f *factory) createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c := cfg.(*Config)
	st, err := f.stateFor(set, c)
	if err != nil {
		return nil, err
	}
	// The state is shared by every pipeline; span warnings carry the
	// logger of the pipeline spans come through, not of whichever
	// pipeline made the state first.
	st.traces.svcs.setLogger(set.Logger)
	populateWindow(st.traces.set, c.MemorySoftLimitMiB) // populate.go
	start, shutdown := f.lifecycle(st)
	return &tracesProcessor{
		StartFunc:    start,
		ShutdownFunc: shutdown,
		st:           st,
		next:         next,
		drop:         c.Mode == ModeDrop,
		keepFirst:    c.Traces.OnConflict == ConflictKeepFirst,
		capabilities: capabilities(c),
	}, nil
}

func (f *factory) createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	c := cfg.(*Config)
	st, err := f.stateFor(set, c)
	if err != nil {
		return nil, err
	}
	st.logs.svcs.setLogger(set.Logger)
	populateWindow(st.logs.set, c.MemorySoftLimitMiB) // populate.go
	start, shutdown := f.lifecycle(st)
	return &logsProcessor{
		StartFunc:    start,
		ShutdownFunc: shutdown,
		st:           st,
		next:         next,
		drop:         c.Mode == ModeDrop,
		capabilities: capabilities(c),
	}, nil
}

func (f *factory) createMetrics(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	c := cfg.(*Config)
	st, err := f.stateFor(set, c)
	if err != nil {
		return nil, err
	}
	st.metrics.svcs.setLogger(set.Logger)
	start, shutdown := f.lifecycle(st)
	return &metricsProcessor{
		StartFunc:    start,
		ShutdownFunc: shutdown,
		st:           st,
		next:         next,
		drop:         c.Mode == ModeDrop,
		splitAttr:    c.Metrics.SplitAttribute,
		capabilities: capabilities(c),
	}, nil
}
