package dedupprocessor

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/admission"
)

// The processors the factory makes, one per pipeline and signal: each
// judges a request in its signal's unit of the shared state, forwards what
// is left, and settles the unit with the next consumer's answer. A request
// left with nothing to forward is marked as ended (internal/admission), so
// that the receiver's server does not take it for one routed elsewhere.

type tracesProcessor struct {
	component.StartFunc
	component.ShutdownFunc
	st           *state
	next         consumer.Traces
	drop         bool // mode drop
	keepFirst    bool // on_conflict keep_first
	capabilities consumer.Capabilities
}

func (p *tracesProcessor) Capabilities() consumer.Capabilities { return p.capabilities }

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return consume(ctx, p, td)
}

func (p *tracesProcessor) begin() *spanScratch { return p.st.traces.begin() }
func (p *tracesProcessor) end(sc *spanScratch) { p.st.traces.end(sc) }
func (p *tracesProcessor) size(td ptrace.Traces) int {
	return (&ptrace.ProtoMarshaler{}).TracesSize(td)
}
func (p *tracesProcessor) copyWaits() (copyWaits, *flights, *waitOpts) {
	return p.st.waits(), &p.st.traces.flights, &p.st.traces.waitOpts
}

func (p *tracesProcessor) judge(ctx context.Context, td ptrace.Traces, sc *spanScratch) bool {
	return p.st.traces.judge(ctx, td, sc, p.st.tel, p.drop, p.keepFirst)
}

// forward sends what is left of a judged request on and settles it.
func (p *tracesProcessor) forward(ctx context.Context, td ptrace.Traces, sc *spanScratch) error {
	if p.st.nested != nil {
		p.st.nested.process(ctx, td, sc.keys[:sc.kept], sc.hashes[:sc.kept], p.st.tel)
	}
	sc.hold()
	return settle(ctx, sc, p.st.tel, p.next.ConsumeTraces(ctx, td))
}

// The processor is a signal (consume, processors.go): said here also for
// the linter, which does not follow calls through a type parameter's methods.
var _ signal[ptrace.Traces, *spanScratch] = (*tracesProcessor)(nil)

type logsProcessor struct {
	component.StartFunc
	component.ShutdownFunc
	st           *state
	next         consumer.Logs
	drop         bool
	capabilities consumer.Capabilities
}

func (p *logsProcessor) Capabilities() consumer.Capabilities { return p.capabilities }

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return consume(ctx, p, ld)
}

func (p *logsProcessor) begin() *logScratch    { return p.st.logs.begin() }
func (p *logsProcessor) end(sc *logScratch)    { p.st.logs.end(sc) }
func (p *logsProcessor) size(ld plog.Logs) int { return (&plog.ProtoMarshaler{}).LogsSize(ld) }
func (p *logsProcessor) copyWaits() (copyWaits, *flights, *waitOpts) {
	return p.st.waits(), &p.st.logs.flights, &p.st.logs.waitOpts
}

func (p *logsProcessor) judge(ctx context.Context, ld plog.Logs, sc *logScratch) bool {
	return p.st.logs.judge(ctx, ld, sc, p.st.tel, p.drop)
}

// forward sends what is left of a judged request on and settles it.
func (p *logsProcessor) forward(ctx context.Context, ld plog.Logs, sc *logScratch) error {
	sc.hold()
	return settle(ctx, sc, p.st.tel, p.next.ConsumeLogs(ctx, ld))
}

// The processor is a signal (consume, processors.go): said here also for
// the linter, which does not follow calls through a type parameter's methods.
var _ signal[plog.Logs, *logScratch] = (*logsProcessor)(nil)

type metricsProcessor struct {
	component.StartFunc
	component.ShutdownFunc
	st           *state
	next         consumer.Metrics
	drop         bool   // mode drop
	splitAttr    string // metrics.split_attribute
	capabilities consumer.Capabilities
}

func (p *metricsProcessor) Capabilities() consumer.Capabilities { return p.capabilities }

// ConsumeMetrics judges every point, forwards the rest without holding the
// lock, and takes the request's judgements back if the next consumer
// refuses it.
func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return consume(ctx, p, md)
}

func (p *metricsProcessor) begin() *metricScratch { return p.st.metrics.begin() }
func (p *metricsProcessor) end(sc *metricScratch) { p.st.metrics.end(sc) }
func (p *metricsProcessor) size(md pmetric.Metrics) int {
	return (&pmetric.ProtoMarshaler{}).MetricsSize(md)
}
func (p *metricsProcessor) copyWaits() (copyWaits, *flights, *waitOpts) {
	return p.st.waits(), &p.st.metrics.copies.flights, &p.st.metrics.copies.waitOpts
}

func (p *metricsProcessor) judge(ctx context.Context, md pmetric.Metrics, sc *metricScratch) bool {
	left := p.st.metrics.judge(md, sc, p.drop, p.splitAttr, connOf(ctx, p.st.metrics.connSeed))
	if sc.forgotten > 0 {
		p.st.tel.evicted.Add(ctx, sc.forgotten, exportTimesOpt)
	}
	return left
}

// exportTimesOpt labels the exports forgotten at metrics.max_export_times
// (streams.Policy.MaxExportTimes) in otelcol_processor_dedup_evicted_entries.
var exportTimesOpt = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"), attribute.String("reason", "export_times")))

// forward sends what is left of a judged request on and settles it.
func (p *metricsProcessor) forward(ctx context.Context, md pmetric.Metrics, sc *metricScratch) error {
	return settle(ctx, sc, p.st.tel, p.next.ConsumeMetrics(ctx, md))
}

// Shutdown sends the restarts still held (with mode drop), then releases
// the state: a held restart is not lost when the gateway stops before its
// elected writer was overdue.
func (p *metricsProcessor) Shutdown(ctx context.Context) error {
	var err error
	if p.drop {
		u := p.st.metrics
		md := pmetric.NewMetrics()
		u.mu.Lock()
		u.tracker.TakeRestarts(u.now(), true, func(h pmetric.Metrics, _ int, _ bool) {
			h.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		})
		// The points held for writers still undecided live in memory only:
		// counted expired and said, never dropped in silence.
		dropped := u.tracker.DropHeld()
		u.mu.Unlock()
		if dropped > 0 {
			p.st.logger.Warn("second writers of metric streams undecided at shutdown",
				zap.Int("held_points_dropped", dropped),
				zap.String("suggests", "they were not told copies or peers before the gateway stopped, and their newest points, held in memory, are dropped: if they were processes that share one identity and ended with the writer elected, what they counted since their last passing point is lost; give each process a service.instance.id"))
		}
		if md.ResourceMetrics().Len() > 0 {
			if e := p.next.ConsumeMetrics(ctx, md); e != nil {
				err = fmt.Errorf("sending the held restarts at shutdown: %w", e)
			}
		}
	}
	return errors.Join(err, p.ShutdownFunc(ctx))
}

// The processor is a signal (consume, processors.go): said here also for
// the linter, which does not follow calls through a type parameter's methods.
var _ signal[pmetric.Metrics, *metricScratch] = (*metricsProcessor)(nil)

// signal is a processor as consume sees it: T is its signal's request
// (ptrace.Traces, plog.Logs, pmetric.Metrics), S its unit's scratch.
type signal[T any, S scratch[T]] interface {
	begin() S // takes a request's scratch from the unit
	end(S)    // gives it back
	judge(context.Context, T, S) bool
	forward(context.Context, T, S) error
	size(T) int                                  // a request's encoded size
	copyWaits() (copyWaits, *flights, *waitOpts) // what the parked copies wait with
}

// scratch is a request's scratch as consume sees it.
type scratch[T any] interface {
	parking() bool               // whether judging parked copies
	parkedCopies() (T, []uint64) // hands them over (copies.go)
	judgeAgain()                 // marks a scratch judging parked copies again
}

// consume judges a request in p's unit, forwards what is left, and settles
// the unit with the next consumer's answer. The same for every signal.
func consume[T any, S scratch[T], P signal[T, S]](ctx context.Context, p P, req T) error {
	sc := p.begin()
	defer p.end(sc)
	send := p.judge(ctx, req, sc)
	if !sc.parking() {
		if !send {
			admission.End(ctx)
			return nil
		}
		return p.forward(ctx, req, sc)
	}
	// Some items are copies of items still in the next consumer: the rest
	// goes on now, the copies wait for their originals (copies.go).
	parked, starts := sc.parkedCopies()
	if send {
		if err := p.forward(ctx, req, sc); err != nil {
			return err
		}
	}
	w, fl, opts := p.copyWaits()
	return w.awaitOriginals(ctx, fl, starts, p.size(parked), opts,
		func() ([]uint64, bool, error) {
			// Judged again as new: the originals settled since.
			again := p.begin()
			defer p.end(again)
			again.judgeAgain()
			req := parked
			send := p.judge(ctx, req, again)
			var starts []uint64
			parked, starts = again.parkedCopies()
			if !send {
				if len(starts) == 0 {
					admission.End(ctx)
				}
				return starts, false, nil
			}
			return starts, true, p.forward(ctx, req, again)
		})
}
