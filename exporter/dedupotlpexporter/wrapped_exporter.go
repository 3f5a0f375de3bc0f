package dedupotlpexporter

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/internal/admission"
	"github.com/doubletake/doubletake/internal/dedupcontract"
	"github.com/doubletake/doubletake/internal/groupcommit"
	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// upstream is what one signal's exporter shares between the side that
// takes requests (wrapped) and the send behind the sending queue.
type upstream struct {
	cfg *Config
	// tb reaches the dedup processor cfg.Dedup names: the factory's, or
	// found through the host at Start (dedupcontract.Find). It is set
	// before the queue and the receivers start, which is when it is read.
	tb     dedupcontract.TakeBack
	logger *zap.Logger
	health *upstreamhealth.Tracker
	// telemetry is the exporter's, for its upstream's state.
	telemetry component.TelemetrySettings
	// splits says whether the queue's batcher splits requests to
	// MaxRequestBytes: then only a single item must fit, else the request.
	splits bool
	// queue reads the sending queue, which dedup's status page shows while
	// the exporter runs; sizer is its unit, "" without a queue.
	queue *queueProbe
	sizer string
	// room is the queue's room as the receivers' servers read it.
	room room
	// storageFullAt is when the queue's storage last refused new data
	// for lack of room (room's clock; 0: never): readFree reports no
	// room for fullProbe after it.
	storageFullAt atomic.Int64
	id            component.ID
	// grouped says whether requests are written to the queue in groups
	// (group_commit on, with a sending queue).
	grouped bool
	// direct says whether requests go straight to the upstream while the
	// queue is empty (direct::enabled, with a sending queue).
	direct bool
	// directMin is the smallest request (encoded bytes) sent directly:
	// a smaller one goes to the queue, whose batcher sends it upstream
	// with others (direct.go).
	directMin int
	// storageID is the persistent queue's storage extension, nil without
	// one: its clients are wrapped to report missing entries (missing.go).
	storageID *component.ID
	// kept holds the requests the queue stored until its consumer takes
	// them (kept.go); nil without a persistent queue or kept_bytes.
	kept *keptEntries
}

// signal is what the wrapper knows of one signal's data.
type signal[T any] struct {
	name string
	ops  splittable[T]
	// check refuses a request holding an item no upstream request carries;
	// it returns the request's encoded size.
	check func(*upstream, T) (int, error)
	// takeBack hands items lost upstream back to the dedup processor id.
	takeBack func(tb dedupcontract.TakeBack, ctx context.Context, id component.ID, lost T, cause error) error
	// items counts what the group commit bounds: spans, log records,
	// metric points.
	items func(T) int
}

var (
	tracesSignal = &signal[ptrace.Traces]{
		name: "traces", ops: tracesOps, check: (*upstream).checkTraces, items: ptrace.Traces.SpanCount,
		takeBack: func(tb dedupcontract.TakeBack, ctx context.Context, id component.ID, lost ptrace.Traces, cause error) error {
			_, err := tb.Traces(ctx, id, lost, cause)
			return err
		},
	}
	logsSignal = &signal[plog.Logs]{
		name: "logs", ops: logsOps, check: (*upstream).checkLogs, items: plog.Logs.LogRecordCount,
		takeBack: func(tb dedupcontract.TakeBack, ctx context.Context, id component.ID, lost plog.Logs, cause error) error {
			_, err := tb.Logs(ctx, id, lost, cause)
			return err
		},
	}
	metricsSignal = &signal[pmetric.Metrics]{
		name: "metrics", ops: metricsOps, check: (*upstream).checkMetrics, items: pmetric.Metrics.DataPointCount,
		takeBack: dedupcontract.TakeBack.Metrics,
	}
)

// pushFunc is the send behind the sending queue and its retries: the inner
// exporter's send, split around permanent refusals, the lost items taken
// back.
func pushFunc[T any](up *upstream, sig *signal[T], send func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, data T) error {
		return sendSplitting(ctx, data, send, sig.ops, func(ctx context.Context, lost T, cause error) {
			takeBack(ctx, up, sig, lost, cause)
		})
	}
}

// takeBack hands lost to the dedup processor; when it cannot, a re-send
// of them would be dropped as a duplicate, which is logged.
func takeBack[T any](ctx context.Context, up *upstream, sig *signal[T], lost T, cause error) {
	if err := sig.takeBack(up.tb, ctx, up.cfg.Dedup, lost, cause); err != nil {
		up.logger.Error("Items lost upstream could not be taken back from dedup; a re-send of them will be dropped as a duplicate",
			zap.Stringer("dedup", up.cfg.Dedup), zap.String("signal", sig.name), zap.Int("items", sig.items(lost)),
			zap.NamedError("cause", cause), zap.Error(err))
	}
}

// wrapped is the side of one signal's exporter that takes requests: it
// refuses those holding an item too large for the upstream, sends the
// rest straight to the upstream while the queue is empty (direct.go), and
// otherwise hands them to the sending queue (consume), merged by the group
// commit when on.
type wrapped[T any] struct {
	up      *upstream
	sig     *signal[T]
	group   *groupcommit.Group[T]
	consume func(context.Context, T) error
	// push is the send behind the queue (pushFunc), which direct sends
	// use too; direct merges the requests that wait for one.
	push   func(context.Context, T) error
	direct *groupcommit.Group[sized[T]]
	// sendingSince is when the direct group's send under way began (Unix
	// nanoseconds), 0 while none is.
	sendingSince atomic.Int64
}

func newWrapped[T any](up *upstream, sig *signal[T], consume, push func(context.Context, T) error) *wrapped[T] {
	w := &wrapped[T]{up: up, sig: sig, group: newGroup(up, consume, sig.ops.moveTo, sig.items), consume: consume, push: push}
	if up.direct {
		w.direct = groupcommit.New(w.forwardGroup, func(r sized[T]) int { return r.size }, up.cfg.MaxRequestBytes-envelope, maxDirectCalls)
	}
	return w
}

func (w *wrapped[T]) send(ctx context.Context, data T) error {
	if w.up.sizer != "" {
		// The receiver's server learns that its requests come here, and
		// refuses them before decoding while the queue has no room.
		admission.Enter(ctx, w.up)
	}
	size, err := w.sig.check(w.up, data)
	if err != nil {
		return err
	}
	if w.direct != nil && size >= w.up.directMin && size <= w.up.cfg.MaxRequestBytes-envelope && w.direct.Waiting() < maxDirectCalls && !w.slow() && w.up.queueEmpty() {
		if mergeable(ctx) {
			return w.direct.Do(ctx, sized[T]{data, size})
		}
		return w.forward(ctx, data)
	}
	return w.enqueue(ctx, data)
}

// enqueue hands data to the sending queue, merged by the group commit
// when on.
func (w *wrapped[T]) enqueue(ctx context.Context, data T) error {
	if w.group != nil && mergeable(ctx) {
		return w.group.Do(ctx, data)
	}
	return w.consume(ctx, data)
}

type tracesExporter struct {
	exporter.Traces
	*wrapped[ptrace.Traces]
}

// Start starts the exporterhelper with its queue's storage wrapped.
func (e *tracesExporter) Start(ctx context.Context, host component.Host) error {
	return e.Traces.Start(ctx, e.up.storageHost(host))
}

func (e *tracesExporter) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return e.send(ctx, td)
}

type logsExporter struct {
	exporter.Logs
	*wrapped[plog.Logs]
}

// Start starts the exporterhelper with its queue's storage wrapped.
func (e *logsExporter) Start(ctx context.Context, host component.Host) error {
	return e.Logs.Start(ctx, e.up.storageHost(host))
}

func (e *logsExporter) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return e.send(ctx, ld)
}

type metricsExporter struct {
	exporter.Metrics
	*wrapped[pmetric.Metrics]
}

// Start starts the exporterhelper with its queue's storage wrapped.
func (e *metricsExporter) Start(ctx context.Context, host component.Host) error {
	return e.Metrics.Start(ctx, e.up.storageHost(host))
}

func (e *metricsExporter) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return e.send(ctx, md)
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

// lifecycle starts and shuts down the inner exporter, and while it runs
// has dedup's status page show the sending queue of signal and observes
// the upstream's state (upstream_state.go).
func (up *upstream) lifecycle(c component.Component, signal string) []exporterhelper.Option {
	var unwatch, unobserve func()
	return []exporterhelper.Option{
		exporterhelper.WithStart(func(ctx context.Context, host component.Host) error {
			if up.tb == nil {
				tb, err := dedupcontract.Find(baseHost(host), up.cfg.Dedup)
				if err != nil {
					// As before a processor runs: take backs fail, and say why.
					tb = dedupcontract.Unreachable{Err: err}
				}
				up.tb = tb
			}
			if err := c.Start(ctx, baseHost(host)); err != nil {
				return err
			}
			var err error
			if unobserve, err = observeUpstream(up.telemetry, up.id, signal, up.health, up.kept); err != nil {
				return errors.Join(err, c.Shutdown(ctx))
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
			if unobserve != nil {
				unobserve()
			}
			return c.Shutdown(ctx)
		}),
	}
}

// innerErrorsAtDebug logs the inner exporter's errors at debug level. The
// inner exporter runs without queue and retries, so each error it logs is
// about a send whose error it also returns to the wrapper, which retries
// it, splits it, takes back what was lost and reports that; at error level
// they would repeat that report once per attempt (with the advice to turn
// on retries, which run in the wrapper). Its other entries pass as they are.
type innerErrorsAtDebug struct{ zapcore.Core }

func (c innerErrorsAtDebug) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level == zapcore.ErrorLevel {
		e.Level = zapcore.DebugLevel
	}
	return c.Core.Check(e, ce)
}

func (c innerErrorsAtDebug) With(fields []zapcore.Field) zapcore.Core {
	return innerErrorsAtDebug{c.Core.With(fields)}
}
