package dedupprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

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
	u := p.st.traces
	sc := u.begin()
	defer u.end(sc)
	send := u.judge(ctx, td, sc, p.st.tel, p.drop, p.keepFirst)
	if len(sc.parked.starts) == 0 {
		if !send {
			admission.End(ctx)
			return nil
		}
		return p.forward(ctx, td, sc)
	}
	// Some spans are copies of spans still in the next consumer: the rest
	// goes on now, the copies wait for their originals (copies.go).
	parked, starts := sc.parkedCopies()
	if send {
		if err := p.forward(ctx, td, sc); err != nil {
			return err
		}
	}
	return p.st.waits().awaitOriginals(ctx, &u.flights, starts, (&ptrace.ProtoMarshaler{}).TracesSize(parked), &u.waitOpts,
		func() ([]uint64, bool, error) {
			// Judged again as new: the originals settled since.
			again := u.begin()
			defer u.end(again)
			again.again = true
			td := parked
			send := u.judge(ctx, td, again, p.st.tel, p.drop, p.keepFirst)
			var starts []uint64
			parked, starts = again.parkedCopies()
			if !send {
				if len(starts) == 0 {
					admission.End(ctx)
				}
				return starts, false, nil
			}
			return starts, true, p.forward(ctx, td, again)
		})
}

// forward sends what is left of a judged request on and settles it.
func (p *tracesProcessor) forward(ctx context.Context, td ptrace.Traces, sc *spanScratch) error {
	if p.st.nested != nil {
		p.st.nested.process(ctx, td, sc.keys[:sc.kept], sc.hashes[:sc.kept], p.st.tel)
	}
	sc.hold()
	return settle(ctx, sc, p.st.tel, p.next.ConsumeTraces(ctx, td))
}

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
	u := p.st.logs
	sc := u.begin()
	defer u.end(sc)
	send := u.judge(ctx, ld, sc, p.st.tel, p.drop)
	if len(sc.parked.starts) == 0 {
		if !send {
			admission.End(ctx)
			return nil
		}
		return p.forward(ctx, ld, sc)
	}
	// Some records are copies of records still in the next consumer: the
	// rest goes on now, the copies wait for their originals (copies.go).
	parked, starts := sc.parkedCopies()
	if send {
		if err := p.forward(ctx, ld, sc); err != nil {
			return err
		}
	}
	return p.st.waits().awaitOriginals(ctx, &u.flights, starts, (&plog.ProtoMarshaler{}).LogsSize(parked), &u.waitOpts,
		func() ([]uint64, bool, error) {
			// Judged again as new: the originals settled since.
			again := u.begin()
			defer u.end(again)
			again.again = true
			ld := parked
			send := u.judge(ctx, ld, again, p.st.tel, p.drop)
			var starts []uint64
			parked, starts = again.parkedCopies()
			if !send {
				if len(starts) == 0 {
					admission.End(ctx)
				}
				return starts, false, nil
			}
			return starts, true, p.forward(ctx, ld, again)
		})
}

// forward sends what is left of a judged request on and settles it.
func (p *logsProcessor) forward(ctx context.Context, ld plog.Logs, sc *logScratch) error {
	sc.hold()
	return settle(ctx, sc, p.st.tel, p.next.ConsumeLogs(ctx, ld))
}

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
	u := p.st.metrics
	sc := u.begin()
	defer u.end(sc)
	send := u.judge(md, sc, p.drop, p.splitAttr)
	if len(sc.park.starts) == 0 {
		if !send {
			admission.End(ctx)
			return nil
		}
		return settle(ctx, sc, p.st.tel, p.next.ConsumeMetrics(ctx, md))
	}
	// Some points repeat points still in the next consumer: the rest goes
	// on now, the repeats wait for their originals (copies_metrics.go).
	parked, starts := sc.parkedCopies()
	if send {
		if err := settle(ctx, sc, p.st.tel, p.next.ConsumeMetrics(ctx, md)); err != nil {
			return err
		}
	}
	return p.st.waits().awaitOriginals(ctx, &u.copies.flights, starts, (&pmetric.ProtoMarshaler{}).MetricsSize(parked), &u.copies.waitOpts,
		func() ([]uint64, bool, error) {
			// Judged again as new: the originals settled since.
			again := u.begin()
			defer u.end(again)
			again.again = true
			md := parked
			send := u.judge(md, again, p.drop, p.splitAttr)
			var starts []uint64
			parked, starts = again.parkedCopies()
			if !send {
				if len(starts) == 0 {
					admission.End(ctx)
				}
				return starts, false, nil
			}
			return starts, true, settle(ctx, again, p.st.tel, p.next.ConsumeMetrics(ctx, md))
		})
}
