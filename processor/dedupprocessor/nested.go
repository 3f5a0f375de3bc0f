package dedupprocessor

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/internal/nested"
	"github.com/doubletake/doubletake/internal/sanitize"
)

// nestedLabelKey is what the nested_spans metric is labelled with.
type nestedLabelKey struct {
	service, outer, inner string
	collapsed             bool
}

// nestedState finds double instrumentation in the span path: it counts
// every nested duplicate and, with collapse_nested, removes inner spans.
type nestedState struct {
	det      *nested.Detector
	opts     nested.Options
	collapse *nested.State // nil unless traces.collapse_nested

	evictedOpt      metric.MeasurementOption
	evictedBytesOpt metric.MeasurementOption

	mu            sync.Mutex
	labels        map[nestedLabelKey]metric.MeasurementOption
	max           int
	reported      int // detector evictions (max_spans) counted so far
	reportedBytes int // detector evictions (max_bytes) counted so far
}

func newNestedState(cfg *Config) *nestedState {
	if !cfg.Traces.Nested.Detect {
		return nil
	}
	n := &nestedState{
		det:  nested.NewDetector(cfg.Traces.Nested.Options),
		opts: cfg.Traces.Nested.Options,
		evictedOpt: metric.WithAttributeSet(attribute.NewSet(
			attribute.String("signal", "traces"), attribute.String("reason", "nested_capacity"))),
		evictedBytesOpt: metric.WithAttributeSet(attribute.NewSet(
			attribute.String("signal", "traces"), attribute.String("reason", "nested_bytes"))),
		labels: make(map[nestedLabelKey]metric.MeasurementOption),
		max:    4 * cfg.Telemetry.MaxServices,
	}
	if cfg.Traces.CollapseNested && cfg.Mode == ModeDrop {
		n.collapse = nested.NewState(0, 0)
	}
	return n
}

// label returns the measurement option for k, capping distinct label sets;
// k's strings come from the data and are sanitized.
func (n *nestedState) label(k nestedLabelKey) metric.MeasurementOption {
	k.service, k.outer, k.inner = sanitize.Label(k.service), sanitize.Label(k.outer), sanitize.Label(k.inner)
	n.mu.Lock()
	defer n.mu.Unlock()
	if o, ok := n.labels[k]; ok {
		return o
	}
	if len(n.labels) >= n.max {
		k = nestedLabelKey{service: otherService, outer: otherService, inner: otherService, collapsed: k.collapsed}
		if o, ok := n.labels[k]; ok {
			return o
		}
	}
	action := "counted"
	if k.collapsed {
		action = "collapsed"
	}
	o := metric.WithAttributeSet(attribute.NewSet(
		attribute.String("signal", "traces"), attribute.String("service.name", k.service),
		attribute.String("outer_scope", k.outer), attribute.String("inner_scope", k.inner),
		attribute.String("action", action)))
	n.labels[k] = o
	return o
}

// process runs after id dedup, on what is about to be forwarded: it counts
// the nested duplicates td completes and, with collapse_nested, removes
// the inner spans of those within td.
func (n *nestedState) process(ctx context.Context, td ptrace.Traces, tel *telemetry) {
	for _, p := range n.det.Add(td) {
		tel.nestedSpans.Add(ctx, 1, n.label(nestedLabelKey{service: p.Service, outer: p.OuterScope.String(), inner: p.InnerScope.String()}))
	}
	if n.collapse != nil {
		for _, g := range nested.Collapse(td, n.opts, n.collapse).Groups {
			tel.nestedSpans.Add(ctx, int64(g.Spans), n.label(nestedLabelKey{service: g.Service, outer: g.OuterScope.String(), inner: g.InnerScope.String(), collapsed: true}))
		}
	}
	n.mu.Lock()
	st := n.det.Stats()
	delta, deltaBytes := st.Evicted-n.reported, st.EvictedBytes-n.reportedBytes
	n.reported, n.reportedBytes = st.Evicted, st.EvictedBytes
	n.mu.Unlock()
	if delta > 0 {
		tel.evicted.Add(ctx, int64(delta), n.evictedOpt)
	}
	if deltaBytes > 0 {
		tel.evicted.Add(ctx, int64(deltaBytes), n.evictedBytesOpt)
	}
}
