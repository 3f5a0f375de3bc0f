package dedupotlpexporter

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/exporter/dedupotlpexporter/internal/metadata"
	"github.com/doubletake/doubletake/internal/dedupcontract"
	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// Type is dedup_otlp_grpc, the wrapper of otlp_grpc (metadata.yaml).
// exporter/dedupotlphttpexporter wraps otlp_http as dedup_otlp_http with
// Wrap, at the same stability.
var Type = metadata.Type

// NewFactory returns the dedup_otlp_grpc factory. Its exporters hand the
// items lost upstream back to the dedup processor their config names
// (dedup), which they find at Start through the host by component ID
// (dedupcontract.Find): the processor of the same collector. The http
// twin is dedupotlphttpexporter.NewFactory.
func NewFactory() exporter.Factory { return Wrap(Type, otlpexporter.NewFactory(), nil) }

// NewGRPCFactory returns the dedup_otlp_grpc factory, whose exporters hand
// the items lost upstream back to the dedup processors tb reaches instead
// of those they find through the host: for a test that makes the
// processor's factory and TakeBack itself
// (dedupprocessor.NewFactoryWithTakeBack). A nil tb is NewFactory.
func NewGRPCFactory(tb dedupcontract.TakeBack) exporter.Factory {
	return Wrap(Type, otlpexporter.NewFactory(), tb)
}

// Wrap returns the factory of typ, which wraps inner (otlp_grpc or
// otlp_http): its exporters hand the items lost upstream back to the
// dedup processors tb reaches, or with a nil tb to the one they find
// through the host at Start.
func Wrap(typ component.Type, inner exporter.Factory, tb dedupcontract.TakeBack) exporter.Factory {
	f := &factory{inner: inner, tb: tb}
	return exporter.NewFactory(typ,
		func() component.Config {
			return &Config{
				Exporter:        inner.CreateDefaultConfig(),
				Dedup:           component.NewID(dedupType),
				MaxRequestBytes: DefaultMaxRequestBytes,
				GroupCommit:     GroupCommitConfig{MaxItems: DefaultGroupCommitMaxItems},
				Direct:          DirectConfig{SlowAfter: DefaultDirectSlowAfter},
				KeptBytes:       DefaultKeptBytes,
			}
		},
		exporter.WithTraces(f.createTraces, metadata.TracesStability),
		exporter.WithMetrics(f.createMetrics, metadata.MetricsStability),
		exporter.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

// dedupType is the dedup processor's component type, the default of
// Config.Dedup (processor/dedupprocessor's metadata.yaml).
var dedupType = component.MustNewType("dedup")

type factory struct {
	inner exporter.Factory
	// tb is the TakeBack the factory was made with; nil: each exporter
	// finds its processor's through the host at Start.
	tb dedupcontract.TakeBack

	// health follows each component's upstream, one tracker for its
	// three signals' exporters: one warning when it becomes unreachable.
	healthMu sync.Mutex
	health   map[component.ID]*upstreamhealth.Tracker
}

// tracker returns the health tracker of the upstream of component id.
func (f *factory) tracker(id component.ID, cfg component.Config, logger *zap.Logger) *upstreamhealth.Tracker {
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	if t, ok := f.health[id]; ok {
		return t
	}
	endpoint := id.String()
	switch c := cfg.(type) {
	case *otlpexporter.Config:
		endpoint = c.ClientConfig.Endpoint
	case *otlphttpexporter.Config:
		endpoint = c.ClientConfig.Endpoint
	}
	if f.health == nil {
		f.health = map[component.ID]*upstreamhealth.Tracker{}
	}
	t := upstreamhealth.New(endpoint, logger)
	f.health[id] = t
	return t
}

// recorded is send with each result given to the upstream's tracker.
func recorded[T any](h *upstreamhealth.Tracker, send func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, data T) error {
		err := send(ctx, data)
		h.Record(err)
		return err
	}
}

// quietWhileDown drops the retry sender's "Exporting failed. Will retry"
// entries while the upstream is unreachable (its tracker has said so
// once); everything else passes.
type quietWhileDown struct {
	zapcore.Core
	health *upstreamhealth.Tracker
}

func (c quietWhileDown) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, "Exporting failed. Will retry") && c.health.Snapshot().State == upstreamhealth.Unreachable {
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c quietWhileDown) With(fields []zapcore.Field) zapcore.Core {
	return quietWhileDown{c.Core.With(fields), c.health}
}

// prepare returns the wrapper's shared part, the settings of the
// exporterhelper around the inner exporter (its queue read by up.queue)
// and of the inner exporter, and the exporterhelper's options.
func (f *factory) prepare(set exporter.Settings, cfg component.Config, queueSettings func() xexporterhelper.QueueBatchSettings) (*upstream, exporter.Settings, exporter.Settings, []exporterhelper.Option) {
	c := cfg.(*Config)
	q, r := queueAndRetry(c.Exporter)
	innerSet := set
	// The inner exporter reports its own telemetry under its own type, so
	// that the wrapper's and its counts are not mixed.
	innerSet.ID = component.NewIDWithName(f.inner.Type(), set.ID.Name())
	innerSet.Logger = set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return innerErrorsAtDebug{c} }))
	up := &upstream{
		cfg: c, tb: f.tb, logger: set.Logger, id: set.ID, queue: newQueueProbe(),
		splits:  q.HasValue() && q.Get().Batch.HasValue(),
		grouped: q.HasValue() && c.GroupCommit.MaxItems > 0,
		direct:  q.HasValue() && c.Direct.Enabled,
		health:  f.tracker(set.ID, c.Exporter, set.Logger),
		// The upstream's state is observed with the exporter's telemetry.
		telemetry: set.TelemetrySettings,
	}
	if q.HasValue() {
		up.sizer = q.Get().Sizer.String()
		up.directMin = directMin(q.Get())
		up.storageID = q.Get().StorageID
	}
	outerSet := set
	outerSet.MeterProvider = up.queue.meterProvider(set.MeterProvider)
	outerSet.Logger = withUndecodable(set.Logger) // undecodable.go
	outerSet.Logger = outerSet.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietWhileDown{c, up.health} }))
	qs := queueSettings()
	// Only an exporter that declares it changes what it is handed (its
	// batcher, group commit or direct sends do) owns it: the collector
	// then gives it a copy of data other consumers also read, and the
	// request kept for the queue's consumer is its own (kept.go).
	owns := up.grouped || up.direct || up.splits
	if q.HasValue() && up.storageID != nil && c.KeptBytes > 0 && owns {
		up.kept = newKeptEntries(c.KeptBytes, qs.ReferenceCounter)
		qs.Encoding = keptEncoding{inner: qs.Encoding, kept: up.kept}
	}
	opts := []exporterhelper.Option{
		xexporterhelper.WithQueueBatch(q, qs),
		exporterhelper.WithRetry(r),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}), // the inner exporter times each send
		// Grouping moves the data of merged requests into the first one.
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: up.grouped || up.direct}),
	}
	return up, outerSet, innerSet, opts
}

func (f *factory) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	up, outerSet, innerSet, opts := f.prepare(set, cfg, xexporterhelper.NewTracesQueueBatchSettings)
	inner, err := f.inner.CreateTraces(ctx, innerSet, innerConfig(up.cfg.Exporter))
	if err != nil {
		return nil, err
	}
	push := pushFunc(up, tracesSignal, recorded(up.health, inner.ConsumeTraces))
	exp, err := exporterhelper.NewTraces(ctx, outerSet, cfg, push, append(opts, up.lifecycle(inner, tracesSignal.name)...)...)
	if err != nil {
		return nil, err
	}
	return &tracesExporter{Traces: exp, wrapped: newWrapped(up, tracesSignal, exp.ConsumeTraces, push)}, nil
}

func (f *factory) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	up, outerSet, innerSet, opts := f.prepare(set, cfg, xexporterhelper.NewLogsQueueBatchSettings)
	inner, err := f.inner.CreateLogs(ctx, innerSet, innerConfig(up.cfg.Exporter))
	if err != nil {
		return nil, err
	}
	push := pushFunc(up, logsSignal, recorded(up.health, inner.ConsumeLogs))
	exp, err := exporterhelper.NewLogs(ctx, outerSet, cfg, push, append(opts, up.lifecycle(inner, logsSignal.name)...)...)
	if err != nil {
		return nil, err
	}
	return &logsExporter{Logs: exp, wrapped: newWrapped(up, logsSignal, exp.ConsumeLogs, push)}, nil
}

func (f *factory) createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	up, outerSet, innerSet, opts := f.prepare(set, cfg, xexporterhelper.NewMetricsQueueBatchSettings)
	inner, err := f.inner.CreateMetrics(ctx, innerSet, innerConfig(up.cfg.Exporter))
	if err != nil {
		return nil, err
	}
	push := pushFunc(up, metricsSignal, recorded(up.health, inner.ConsumeMetrics))
	exp, err := exporterhelper.NewMetrics(ctx, outerSet, cfg, push, append(opts, up.lifecycle(inner, metricsSignal.name)...)...)
	if err != nil {
		return nil, err
	}
	return &metricsExporter{Metrics: exp, wrapped: newWrapped(up, metricsSignal, exp.ConsumeMetrics, push)}, nil
}
