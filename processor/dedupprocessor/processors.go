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
	if !u.judge(ctx, td, sc, p.st.tel, p.drop, p.keepFirst) {
		admission.End(ctx)
		return nil
	}
	if p.st.nested != nil {
		p.st.nested.process(ctx, td, sc.keys[:sc.kept], sc.hashes[:sc.kept], p.st.tel)
	}
	u.hold(sc)
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
	if !u.judge(ctx, ld, sc, p.st.tel, p.drop) {
		admission.End(ctx)
		return nil
	}
	u.hold(sc)
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
	if !u.judge(md, sc, p.drop, p.splitAttr) {
		admission.End(ctx)
		return nil
	}
	return settle(ctx, sc, p.st.tel, p.next.ConsumeMetrics(ctx, md))
}
