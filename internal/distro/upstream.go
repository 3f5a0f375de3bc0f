package distro

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/groupcommit"
	"github.com/doubletake/doubletake/internal/upstreamhealth"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// The dedup OTLP exporters are the collector's otlp_grpc and otlp_http
// exporters, configured with the same keys, made to keep dedup's promise
// that what it recorded as delivered is delivered:
//
//   - their sending_queue (persistent with storage) and retry_on_failure
//     wrap the inner exporter's send, so that a request the backend refuses
//     for good is seen here: a merged batch is split in halves and re-sent
//     until only the items that caused the refusal are left (a permanent
//     error affects only them), and those are handed back to the dedup
//     processor named by `dedup` (TakeBack), which forgets them so that a
//     re-send passes, counts them and logs the cause;
//   - a request holding an item that cannot fit into one upstream request
//     of max_request_bytes is refused whole before it is queued (gRPC
//     InvalidArgument, HTTP 400), so dedup takes its records back at once
//     and its sender learns why, instead of the queue accepting and then
//     dropping it;
//   - with a batch, it must be sized in bytes, at most max_request_bytes,
//     so that a merged batch never exceeds the upstream's receive limit.
var (
	dedupOTLPGRPCType = component.MustNewType("dedup_otlp_grpc")
	dedupOTLPHTTPType = component.MustNewType("dedup_otlp_http")
)

// DefaultMaxRequestBytes is the collector's default gRPC receive limit
// (4 MiB) less 64 KiB of headroom for framing and compression's worst case.
const DefaultMaxRequestBytes = 4<<20 - 64<<10

// upstreamConfig is the inner exporter's config plus what the wrapper adds.
type upstreamConfig struct {
	// Exporter is the otlp_grpc or otlp_http config, as written.
	Exporter component.Config
	// Dedup is the processor whose records lost items are taken back from.
	Dedup component.ID `mapstructure:"dedup"`
	// MaxRequestBytes is the largest request the upstream takes.
	MaxRequestBytes int `mapstructure:"max_request_bytes"`
	// GroupCommit merges client requests that arrive while the sending
	// queue is writing another into one queue entry.
	GroupCommit GroupCommitConfig `mapstructure:"group_commit"`
}

// GroupCommitConfig bounds the requests written to the sending queue as
// one entry: while the queue writes one request, the requests that arrive
// wait, and the first of them then writes them all at once, up to MaxItems
// spans, log records or metric points together (a single larger request
// goes alone). With MaxDelay, a request that finds the queue still holding
// earlier entries waits for it to empty, at most MaxDelay and only until
// the requests that arrive meanwhile fill MaxItems, gathering them: bbolt rewrites the entries sharing a page
// at every change, so fewer entries held means fewer bytes written. Every
// request is still answered only once its entry is in the queue. Requests
// carrying client metadata or authentication data are never merged, as
// the exporter may take headers from them. MaxItems 0 turns it off; it
// needs sending_queue; MaxDelay reads the queue's size from its metrics
// (off when the service's metrics are).
type GroupCommitConfig struct {
	MaxItems int           `mapstructure:"max_items"`
	MaxDelay time.Duration `mapstructure:"max_delay"`
}

// DefaultGroupCommitMaxItems matches the batch processor's default batch.
const DefaultGroupCommitMaxItems = 8192

var (
	_ confmap.Unmarshaler = (*upstreamConfig)(nil)
	_ component.Config    = (*upstreamConfig)(nil)
)

// Unmarshal takes the wrapper's own keys and gives the rest to the inner
// exporter's config, so that every otlp_grpc/otlp_http key works as there.
func (c *upstreamConfig) Unmarshal(conf *confmap.Conf) error {
	own, rest := map[string]any{}, map[string]any{}
	for k, v := range conf.ToStringMap() {
		switch k {
		case "dedup", "max_request_bytes", "group_commit":
			own[k] = v
		default:
			rest[k] = v
		}
	}
	keys := struct {
		Dedup           component.ID      `mapstructure:"dedup"`
		MaxRequestBytes int               `mapstructure:"max_request_bytes"`
		GroupCommit     GroupCommitConfig `mapstructure:"group_commit"`
	}{c.Dedup, c.MaxRequestBytes, c.GroupCommit}
	if err := confmap.NewFromStringMap(own).Unmarshal(&keys); err != nil {
		return err
	}
	c.Dedup, c.MaxRequestBytes, c.GroupCommit = keys.Dedup, keys.MaxRequestBytes, keys.GroupCommit
	return confmap.NewFromStringMap(rest).Unmarshal(c.Exporter)
}

// Validate checks the wrapper's fields; the inner config is validated by
// the collector as a field of this one.
func (c *upstreamConfig) Validate() error {
	if c.MaxRequestBytes < 1024 {
		return fmt.Errorf("max_request_bytes must be at least 1024, got %d", c.MaxRequestBytes)
	}
	if c.GroupCommit.MaxItems < 0 {
		return fmt.Errorf("group_commit::max_items must be 0 (off) or positive, got %d", c.GroupCommit.MaxItems)
	}
	if c.GroupCommit.MaxDelay < 0 || c.GroupCommit.MaxDelay > time.Minute {
		return fmt.Errorf("group_commit::max_delay must be between 0 and 1m, got %s", c.GroupCommit.MaxDelay)
	}
	q, _ := queueAndRetry(c.Exporter)
	if !q.HasValue() || !q.Get().Batch.HasValue() {
		return nil
	}
	b := q.Get().Batch.Get()
	if b.Sizer.String() != "bytes" {
		return fmt.Errorf("sending_queue::batch::sizer must be bytes (got %q), so that a merged batch stays under max_request_bytes", b.Sizer.String())
	}
	if b.MaxSize <= 0 || b.MaxSize > int64(c.MaxRequestBytes) {
		return fmt.Errorf("sending_queue::batch::max_size must be between 1 and max_request_bytes (%d), got %d", c.MaxRequestBytes, b.MaxSize)
	}
	return nil
}

// queueAndRetry returns the queue and retry settings of an inner config.
func queueAndRetry(cfg component.Config) (configoptional.Optional[exporterhelper.QueueBatchConfig], configretry.BackOffConfig) {
	switch c := cfg.(type) {
	case *otlpexporter.Config:
		return c.QueueConfig, c.RetryConfig
	case *otlphttpexporter.Config:
		return c.QueueConfig, c.RetryConfig
	}
	return configoptional.None[exporterhelper.QueueBatchConfig](), configretry.BackOffConfig{}
}

// innerConfig is a copy of cfg with its queue and retries off: they run in
// the wrapper, around the inner exporter's synchronous send.
func innerConfig(cfg component.Config) component.Config {
	switch c := cfg.(type) {
	case *otlpexporter.Config:
		cp := *c
		cp.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		cp.RetryConfig.Enabled = false
		return &cp
	case *otlphttpexporter.Config:
		cp := *c
		cp.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		cp.RetryConfig.Enabled = false
		return &cp
	}
	return cfg
}

// newDedupOTLPFactory wraps inner (otlp_grpc or otlp_http) as typ.
func newDedupOTLPFactory(typ component.Type, inner exporter.Factory, tb *dedupprocessor.TakeBack) exporter.Factory {
	u := &upstreamFactory{inner: inner, tb: tb}
	return exporter.NewFactory(typ,
		func() component.Config {
			return &upstreamConfig{
				Exporter:        inner.CreateDefaultConfig(),
				Dedup:           component.NewID(dedupprocessor.Type),
				MaxRequestBytes: DefaultMaxRequestBytes,
				GroupCommit:     GroupCommitConfig{MaxItems: DefaultGroupCommitMaxItems},
			}
		},
		exporter.WithTraces(u.createTraces, component.StabilityLevelAlpha),
		exporter.WithMetrics(u.createMetrics, component.StabilityLevelAlpha),
		exporter.WithLogs(u.createLogs, component.StabilityLevelAlpha),
	)
}

type upstreamFactory struct {
	inner exporter.Factory
	tb    *dedupprocessor.TakeBack

	// health follows each component's upstream, one tracker for its
	// three signals' exporters: one warning when it becomes unreachable.
	healthMu sync.Mutex
	health   map[component.ID]*upstreamhealth.Tracker
}

// tracker returns the health tracker of the upstream of component id.
func (u *upstreamFactory) tracker(id component.ID, cfg component.Config, logger *zap.Logger) *upstreamhealth.Tracker {
	u.healthMu.Lock()
	defer u.healthMu.Unlock()
	if t, ok := u.health[id]; ok {
		return t
	}
	endpoint := id.String()
	switch c := cfg.(type) {
	case *otlpexporter.Config:
		endpoint = c.ClientConfig.Endpoint
	case *otlphttpexporter.Config:
		endpoint = c.ClientConfig.Endpoint
	}
	if u.health == nil {
		u.health = map[component.ID]*upstreamhealth.Tracker{}
	}
	t := upstreamhealth.New(endpoint, logger)
	u.health[id] = t
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

// upstream is one signal's wrapper around the inner exporter.
type upstream struct {
	cfg    *upstreamConfig
	tb     *dedupprocessor.TakeBack
	logger *zap.Logger
	health *upstreamhealth.Tracker
	// splits says whether the queue's batcher splits requests to
	// MaxRequestBytes: then only a single item must fit, else the request.
	splits bool
	// queue reads the sending queue, which dedup's status page shows while
	// the exporter runs; sizer is its unit, "" without a queue.
	queue *queueProbe
	sizer string
	id    component.ID
	// grouped says whether requests are written to the queue in groups
	// (group_commit on, with a sending queue).
	grouped bool
}

// prepare returns the wrapper, the settings of the exporterhelper around
// the inner exporter (its queue read by up.queue) and of the inner
// exporter, and the exporterhelper's options.
func (u *upstreamFactory) prepare(set exporter.Settings, cfg component.Config) (*upstream, exporter.Settings, exporter.Settings, []exporterhelper.Option) {
	c := cfg.(*upstreamConfig)
	q, r := queueAndRetry(c.Exporter)
	innerSet := set
	// The inner exporter reports its own telemetry under its own type, so
	// that the wrapper's and its counts are not mixed.
	innerSet.ID = component.NewIDWithName(u.inner.Type(), set.ID.Name())
	// Its retries and queue are off: its "Rejecting data. Try enabling
	// retry_on_failure" would mislead, and the wrapper logs the outcome.
	innerSet.Logger = set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return withoutRejecting{c} }))
	up := &upstream{cfg: c, tb: u.tb, logger: set.Logger, splits: q.HasValue() && q.Get().Batch.HasValue(), queue: newQueueProbe(), id: set.ID,
		grouped: q.HasValue() && c.GroupCommit.MaxItems > 0, health: u.tracker(set.ID, c.Exporter, set.Logger)}
	if q.HasValue() {
		up.sizer = q.Get().Sizer.String()
	}
	outerSet := set
	outerSet.MeterProvider = up.queue.meterProvider(set.MeterProvider)
	// While the upstream is unreachable its tracker has said so once:
	// the retry sender's line per attempt is noise then.
	outerSet.Logger = set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietWhileDown{c, up.health} }))
	opts := []exporterhelper.Option{
		exporterhelper.WithQueue(q),
		exporterhelper.WithRetry(r),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}), // the inner exporter times each send
		// Grouping moves the data of merged requests into the first one.
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: up.grouped}),
	}
	return up, outerSet, innerSet, opts
}

// withoutRejecting drops the inner exporterhelper's per-attempt
// "Exporting failed. Rejecting data." entry; everything else passes.
type withoutRejecting struct{ zapcore.Core }

func (c withoutRejecting) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, "Exporting failed. Rejecting data.") {
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c withoutRejecting) With(fields []zapcore.Field) zapcore.Core {
	return withoutRejecting{c.Core.With(fields)}
}

// quietWhileDown drops the retry sender's "Exporting failed. Will retry"
// entries while the upstream is unreachable; everything else passes.
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

// lifecycle starts and shuts down the inner exporter, and while it runs
// has dedup's status page show the sending queue of signal.
func (up *upstream) lifecycle(c component.Component, signal string) []exporterhelper.Option {
	var unwatch func()
	return []exporterhelper.Option{
		exporterhelper.WithStart(func(ctx context.Context, host component.Host) error {
			if err := c.Start(ctx, host); err != nil {
				return err
			}
			if up.sizer != "" && up.queue.readable() {
				unwatch = up.tb.WatchUpstream(up.cfg.Dedup, up.id, signal, up.sizer, up.queue.read, up.health.Snapshot)
			}
			return nil
		}),
		exporterhelper.WithShutdown(func(ctx context.Context) error {
			if unwatch != nil {
				unwatch()
			}
			return c.Shutdown(ctx)
		}),
	}
}

func (u *upstreamFactory) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	up, outerSet, innerSet, opts := u.prepare(set, cfg)
	inner, err := u.inner.CreateTraces(ctx, innerSet, innerConfig(up.cfg.Exporter))
	if err != nil {
		return nil, err
	}
	push := func(ctx context.Context, td ptrace.Traces) error {
		return sendSplitting(ctx, td, recorded(up.health, inner.ConsumeTraces), tracesOps, func(ctx context.Context, lost ptrace.Traces, cause error) {
			_, err := u.tb.Traces(ctx, up.cfg.Dedup, lost, cause)
			up.logTakeBack(err, lost.SpanCount())
		})
	}
	exp, err := exporterhelper.NewTraces(ctx, outerSet, cfg, push, append(opts, up.lifecycle(inner, "traces")...)...)
	if err != nil {
		return nil, err
	}
	return &tracesGuard{Traces: exp, up: up, group: newGroup(up, exp.ConsumeTraces, tracesOps.moveTo, ptrace.Traces.SpanCount)}, nil
}

func (u *upstreamFactory) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	up, outerSet, innerSet, opts := u.prepare(set, cfg)
	inner, err := u.inner.CreateLogs(ctx, innerSet, innerConfig(up.cfg.Exporter))
	if err != nil {
		return nil, err
	}
	push := func(ctx context.Context, ld plog.Logs) error {
		return sendSplitting(ctx, ld, recorded(up.health, inner.ConsumeLogs), logsOps, func(ctx context.Context, lost plog.Logs, cause error) {
			_, err := u.tb.Logs(ctx, up.cfg.Dedup, lost, cause)
			up.logTakeBack(err, lost.LogRecordCount())
		})
	}
	exp, err := exporterhelper.NewLogs(ctx, outerSet, cfg, push, append(opts, up.lifecycle(inner, "logs")...)...)
	if err != nil {
		return nil, err
	}
	return &logsGuard{Logs: exp, up: up, group: newGroup(up, exp.ConsumeLogs, logsOps.moveTo, plog.Logs.LogRecordCount)}, nil
}

func (u *upstreamFactory) createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	up, outerSet, innerSet, opts := u.prepare(set, cfg)
	inner, err := u.inner.CreateMetrics(ctx, innerSet, innerConfig(up.cfg.Exporter))
	if err != nil {
		return nil, err
	}
	push := func(ctx context.Context, md pmetric.Metrics) error {
		return sendSplitting(ctx, md, recorded(up.health, inner.ConsumeMetrics), metricsOps, func(ctx context.Context, lost pmetric.Metrics, cause error) {
			up.logTakeBack(u.tb.Metrics(ctx, up.cfg.Dedup, lost, cause), lost.DataPointCount())
		})
	}
	exp, err := exporterhelper.NewMetrics(ctx, outerSet, cfg, push, append(opts, up.lifecycle(inner, "metrics")...)...)
	if err != nil {
		return nil, err
	}
	return &metricsGuard{Metrics: exp, up: up, group: newGroup(up, exp.ConsumeMetrics, metricsOps.moveTo, pmetric.Metrics.DataPointCount)}, nil
}

func (up *upstream) logTakeBack(err error, items int) {
	if err != nil {
		up.logger.Error("Items lost upstream could not be taken back from dedup; a re-send of them will be dropped as a duplicate",
			zap.Stringer("dedup", up.cfg.Dedup), zap.Int("items", items), zap.Error(err))
	}
}

// splittable are the operations sendSplitting needs on one signal's data.
type splittable[T any] struct {
	count func(T) int
	// split moves about half of the items of src (count > 1) into a new T,
	// leaving the rest in src.
	split func(src T) T
	// moveTo appends all of src to dst.
	moveTo func(src, dst T)
	// empty makes an empty T.
	empty func() T
}

// requestIndependent are permanent refusals that say nothing about the
// data (credentials, a wrong path): splitting would only multiply them.
func requestIndependent(err error) bool {
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented, codes.NotFound:
			return true
		}
	}
	return false
}

// sendSplitting sends data; when the upstream refuses it for good, it
// sends halves until only the refused items are left, and hands those to
// lost. Items whose send failed with a retryable error are left in data
// (whatever was delivered or lost is moved out of it) and that error is
// returned, so that the retry sends only them: nothing is sent twice by
// the split. It returns nil when everything was delivered, the permanent
// error when something was lost, or a retryable error.
func sendSplitting[T any](ctx context.Context, data T, send func(context.Context, T) error, ops splittable[T], lost func(context.Context, T, error)) error {
	err := send(ctx, data)
	if err == nil || !consumererror.IsPermanent(err) {
		return err
	}
	if ops.count(data) <= 1 || requestIndependent(err) {
		lost(ctx, data, err)
		return err
	}
	half := ops.split(data)
	rest := ops.empty()
	ops.moveTo(data, rest) // data is now empty; what must be retried returns to it
	var retry, permanent error
	for _, part := range []T{half, rest} {
		switch perr := sendSplitting(ctx, part, send, ops, lost); {
		case perr == nil:
		case consumererror.IsPermanent(perr):
			permanent = perr
		default:
			retry = perr
			ops.moveTo(part, data)
		}
	}
	if retry != nil {
		return retry
	}
	return permanent
}

var tracesOps = splittable[ptrace.Traces]{
	count: func(td ptrace.Traces) int { return td.SpanCount() },
	split: func(src ptrace.Traces) ptrace.Traces {
		dst := ptrace.NewTraces()
		want := src.SpanCount() / 2
		rss := src.ResourceSpans()
		moved := 0
		rss.RemoveIf(func(rs ptrace.ResourceSpans) bool {
			if moved >= want {
				return false
			}
			n := 0
			for i := 0; i < rs.ScopeSpans().Len(); i++ {
				n += rs.ScopeSpans().At(i).Spans().Len()
			}
			if moved+n <= want {
				rs.MoveTo(dst.ResourceSpans().AppendEmpty())
				moved += n
				return true
			}
			// Split inside this resource.
			drs := dst.ResourceSpans().AppendEmpty()
			rs.Resource().CopyTo(drs.Resource())
			drs.SetSchemaUrl(rs.SchemaUrl())
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				if moved >= want {
					return false
				}
				dss := drs.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(dss.Scope())
				dss.SetSchemaUrl(ss.SchemaUrl())
				ss.Spans().RemoveIf(func(s ptrace.Span) bool {
					if moved >= want {
						return false
					}
					s.MoveTo(dss.Spans().AppendEmpty())
					moved++
					return true
				})
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
		return dst
	},
	moveTo: func(src, dst ptrace.Traces) { src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans()) },
	empty:  ptrace.NewTraces,
}

var logsOps = splittable[plog.Logs]{
	count: func(ld plog.Logs) int { return ld.LogRecordCount() },
	split: func(src plog.Logs) plog.Logs {
		dst := plog.NewLogs()
		want := src.LogRecordCount() / 2
		moved := 0
		src.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
			if moved >= want {
				return false
			}
			drl := dst.ResourceLogs().AppendEmpty()
			rl.Resource().CopyTo(drl.Resource())
			drl.SetSchemaUrl(rl.SchemaUrl())
			rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
				if moved >= want {
					return false
				}
				dsl := drl.ScopeLogs().AppendEmpty()
				sl.Scope().CopyTo(dsl.Scope())
				dsl.SetSchemaUrl(sl.SchemaUrl())
				sl.LogRecords().RemoveIf(func(r plog.LogRecord) bool {
					if moved >= want {
						return false
					}
					r.MoveTo(dsl.LogRecords().AppendEmpty())
					moved++
					return true
				})
				return sl.LogRecords().Len() == 0
			})
			return rl.ScopeLogs().Len() == 0
		})
		return dst
	},
	moveTo: func(src, dst plog.Logs) { src.ResourceLogs().MoveAndAppendTo(dst.ResourceLogs()) },
	empty:  plog.NewLogs,
}

// Metrics are split by whole metrics (a metric's points stay together).
var metricsOps = splittable[pmetric.Metrics]{
	count: func(md pmetric.Metrics) int { return md.MetricCount() },
	split: func(src pmetric.Metrics) pmetric.Metrics {
		dst := pmetric.NewMetrics()
		want := src.MetricCount() / 2
		moved := 0
		src.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
			if moved >= want {
				return false
			}
			drm := dst.ResourceMetrics().AppendEmpty()
			rm.Resource().CopyTo(drm.Resource())
			drm.SetSchemaUrl(rm.SchemaUrl())
			rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
				if moved >= want {
					return false
				}
				dsm := drm.ScopeMetrics().AppendEmpty()
				sm.Scope().CopyTo(dsm.Scope())
				dsm.SetSchemaUrl(sm.SchemaUrl())
				sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
					if moved >= want {
						return false
					}
					m.MoveTo(dsm.Metrics().AppendEmpty())
					moved++
					return true
				})
				return sm.Metrics().Len() == 0
			})
			return rm.ScopeMetrics().Len() == 0
		})
		return dst
	},
	moveTo: func(src, dst pmetric.Metrics) { src.ResourceMetrics().MoveAndAppendTo(dst.ResourceMetrics()) },
	empty:  pmetric.NewMetrics,
}

// errTooLarge is the refusal of a request holding an item that no
// upstream request can carry: permanent, InvalidArgument (HTTP 400).
func errTooLarge(what string, size, limit int) error {
	return consumererror.NewPermanent(status.Error(codes.InvalidArgument, fmt.Sprintf(
		"%s is %d bytes encoded, more than the upstream takes in one request (max_request_bytes %d); the request was not accepted",
		what, size, limit)))
}

// envelope is the bytes a resource or scope adds around what it holds,
// counted generously (tag, length, its own fields).
const envelope = 16

// serviceOf names an item's service for an error message: quoted, escaped
// and bounded, since it comes from the data.
func serviceOf(res pcommon.Resource) string {
	v, ok := res.Attributes().Get("service.name")
	if !ok {
		return `service ""`
	}
	s := v.AsString()
	if len(s) > 64 {
		s = s[:64]
		s = strings.ToValidUTF8(s, "") + "..."
	}
	return fmt.Sprintf("service %q", s)
}

type tracesGuard struct {
	exporter.Traces
	up    *upstream
	group *groupcommit.Group[ptrace.Traces]
}

func (g *tracesGuard) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if err := g.up.checkTraces(td); err != nil {
		return err
	}
	if g.group != nil && mergeable(ctx) {
		return g.group.Do(ctx, td)
	}
	return g.Traces.ConsumeTraces(ctx, td)
}

var (
	tracesSizer  ptrace.ProtoMarshaler
	logsSizer    plog.ProtoMarshaler
	metricsSizer pmetric.ProtoMarshaler
)

func (up *upstream) checkTraces(td ptrace.Traces) error {
	limit := up.cfg.MaxRequestBytes
	total := tracesSizer.TracesSize(td)
	if total <= limit-envelope {
		return nil
	}
	if !up.splits {
		return errTooLarge(fmt.Sprintf("a request of %d spans", td.SpanCount()), total, limit)
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		if tracesSizer.ResourceSpansSize(rs) <= limit-envelope {
			continue
		}
		res := resourceSize(rs.Resource(), rs.SchemaUrl())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope := scopeSize(ss.Scope(), ss.SchemaUrl())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				s := spans.At(k)
				if n := res + scope + tracesSizer.SpanSize(s) + 3*envelope; n > limit {
					return errTooLarge(fmt.Sprintf("span %s/%s of %s", s.TraceID(), s.SpanID(), serviceOf(rs.Resource())), n, limit)
				}
			}
		}
	}
	return nil
}

// resourceSize and scopeSize are the encoded sizes of a resource's or a
// scope's own fields, without what they hold.
func resourceSize(r pcommon.Resource, schema string) int {
	rs := ptrace.NewResourceSpans()
	r.CopyTo(rs.Resource())
	rs.SetSchemaUrl(schema)
	return tracesSizer.ResourceSpansSize(rs)
}

func scopeSize(s pcommon.InstrumentationScope, schema string) int {
	ss := ptrace.NewScopeSpans()
	s.CopyTo(ss.Scope())
	ss.SetSchemaUrl(schema)
	return tracesSizer.ScopeSpansSize(ss)
}

type logsGuard struct {
	exporter.Logs
	up    *upstream
	group *groupcommit.Group[plog.Logs]
}

func (g *logsGuard) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if err := g.up.checkLogs(ld); err != nil {
		return err
	}
	if g.group != nil && mergeable(ctx) {
		return g.group.Do(ctx, ld)
	}
	return g.Logs.ConsumeLogs(ctx, ld)
}

func (up *upstream) checkLogs(ld plog.Logs) error {
	limit := up.cfg.MaxRequestBytes
	total := logsSizer.LogsSize(ld)
	if total <= limit-envelope {
		return nil
	}
	if !up.splits {
		return errTooLarge(fmt.Sprintf("a request of %d log records", ld.LogRecordCount()), total, limit)
	}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		if logsSizer.ResourceLogsSize(rl) <= limit-envelope {
			continue
		}
		res := resourceSize(rl.Resource(), rl.SchemaUrl())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			scope := scopeSize(sl.Scope(), sl.SchemaUrl())
			recs := sl.LogRecords()
			for k := 0; k < recs.Len(); k++ {
				if n := res + scope + logsSizer.LogRecordSize(recs.At(k)) + 3*envelope; n > limit {
					return errTooLarge(fmt.Sprintf("log record %d of scope %d of %s", k, j, serviceOf(rl.Resource())), n, limit)
				}
			}
		}
	}
	return nil
}

type metricsGuard struct {
	exporter.Metrics
	up    *upstream
	group *groupcommit.Group[pmetric.Metrics]
}

func (g *metricsGuard) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if err := g.up.checkMetrics(md); err != nil {
		return err
	}
	if g.group != nil && mergeable(ctx) {
		return g.group.Do(ctx, md)
	}
	return g.Metrics.ConsumeMetrics(ctx, md)
}

// newGroup returns the group commit of one signal's requests into the
// sending queue (consume), or nil when up does not group.
func newGroup[T any](up *upstream, consume func(context.Context, T) error, moveTo func(src, dst T), items func(T) int) *groupcommit.Group[T] {
	if !up.grouped {
		return nil
	}
	g := groupcommit.New(func(ctx context.Context, first T, rest []T) error {
		for _, r := range rest {
			moveTo(r, first)
		}
		return consume(ctx, first)
	}, items, up.cfg.GroupCommit.MaxItems, up.cfg.GroupCommit.MaxItems)
	if d := up.cfg.GroupCommit.MaxDelay; d > 0 {
		g.Hold(func() bool {
			if !up.queue.readable() {
				return false
			}
			size, _ := up.queue.read()
			return size > 0
		}, d, time.Millisecond)
	}
	return g
}

// mergeable says whether a request may be merged into another's queue
// entry, which keeps the first request's context: only when it carries no
// client metadata and no authentication data, which an exporter may turn
// into headers (headers_setter) or partitions.
func mergeable(ctx context.Context) bool {
	info := client.FromContext(ctx)
	if info.Auth != nil {
		return false
	}
	for range info.Metadata.Keys() {
		return false
	}
	return true
}

// checkMetrics refuses, when the batcher splits, a request holding a data
// point that cannot fit alone (the batcher splits metrics by points).
func (up *upstream) checkMetrics(md pmetric.Metrics) error {
	limit := up.cfg.MaxRequestBytes
	total := metricsSizer.MetricsSize(md)
	if total <= limit-envelope {
		return nil
	}
	if !up.splits {
		return errTooLarge(fmt.Sprintf("a request of %d metric points", md.DataPointCount()), total, limit)
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := resourceSize(rm.Resource(), rm.SchemaUrl())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			scope := scopeSize(sm.Scope(), sm.SchemaUrl())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if res+scope+metricsSizer.MetricSize(m)+3*envelope <= limit {
					continue
				}
				head := metricHeaderSize(m)
				if n := res + scope + head + largestPoint(m) + 4*envelope; n > limit {
					return errTooLarge(fmt.Sprintf("a point of metric %q of %s", boundName(m.Name()), serviceOf(rm.Resource())), n, limit)
				}
			}
		}
	}
	return nil
}

// metricHeaderSize is the encoded size of a metric without its points.
func metricHeaderSize(m pmetric.Metric) int {
	h := pmetric.NewMetric()
	h.SetName(m.Name())
	h.SetDescription(m.Description())
	h.SetUnit(m.Unit())
	m.Metadata().CopyTo(h.Metadata())
	return metricsSizer.MetricSize(h)
}

// largestPoint is the encoded size of m's largest data point.
func largestPoint(m pmetric.Metric) int {
	largest := 0
	at := func(n int) {
		if n > largest {
			largest = n
		}
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for _, p := range m.Gauge().DataPoints().All() {
			at(metricsSizer.NumberDataPointSize(p))
		}
	case pmetric.MetricTypeSum:
		for _, p := range m.Sum().DataPoints().All() {
			at(metricsSizer.NumberDataPointSize(p))
		}
	case pmetric.MetricTypeHistogram:
		for _, p := range m.Histogram().DataPoints().All() {
			at(metricsSizer.HistogramDataPointSize(p))
		}
	case pmetric.MetricTypeExponentialHistogram:
		for _, p := range m.ExponentialHistogram().DataPoints().All() {
			at(metricsSizer.ExponentialHistogramDataPointSize(p))
		}
	case pmetric.MetricTypeSummary:
		for _, p := range m.Summary().DataPoints().All() {
			at(metricsSizer.SummaryDataPointSize(p))
		}
	}
	return largest
}

func boundName(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "..."
	}
	return s
}
