package dedupprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/internal/nested"
	"github.com/doubletake/doubletake/internal/sanitize"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
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
	labels        map[nestedLabelKey]*nestedRow
	max           int
	reported      int // detector evictions (max_spans) counted so far
	reportedBytes int // detector evictions (max_bytes) counted so far
}

// newNestedState makes the detector hashing span keys as the span window
// does (its seed), so that it takes the window's keys and hashes.
func newNestedState(cfg *Config, seed window.Seed) *nestedState {
	if !cfg.Traces.Nested.Detect {
		return nil
	}
	n := &nestedState{
		det:  nested.NewDetectorSeeded(cfg.Traces.Nested.Options.Set(), seed),
		opts: cfg.Traces.Nested.Options.Set(),
		evictedOpt: metric.WithAttributeSet(attribute.NewSet(
			attribute.String("signal", "traces"), attribute.String("reason", "nested_capacity"))),
		evictedBytesOpt: metric.WithAttributeSet(attribute.NewSet(
			attribute.String("signal", "traces"), attribute.String("reason", "nested_bytes"))),
		labels: make(map[nestedLabelKey]*nestedRow),
		max:    4 * cfg.Telemetry.MaxServices,
	}
	if cfg.Traces.CollapseNested && cfg.Mode == ModeDrop {
		n.collapse = nested.NewState(0, 0)
	}
	return n
}

// nestedRow is one label set's option and, for the status page, what it
// counted and the latest outer span's kind and name (as the detector
// clipped them).
type nestedRow struct {
	opt        metric.MeasurementOption
	spans      int64
	kind, name string
	last       time.Time
}

// count adds n to k's row and returns its measurement option, capping
// distinct label sets; k's strings come from the data and are sanitized.
func (n *nestedState) count(k nestedLabelKey, spans int, kind, name string) metric.MeasurementOption {
	k.service, k.outer, k.inner = sanitize.Label(k.service), sanitize.Label(k.outer), sanitize.Label(k.inner)
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.labels[k]
	if !ok && len(n.labels) >= n.max {
		k = nestedLabelKey{service: otherService, outer: otherService, inner: otherService, collapsed: k.collapsed}
		r, ok = n.labels[k]
	}
	if !ok {
		action := "counted"
		if k.collapsed {
			action = "collapsed"
		}
		r = &nestedRow{opt: metric.WithAttributeSet(attribute.NewSet(
			attribute.String("signal", "traces"), attribute.String("service.name", k.service),
			attribute.String("outer_scope", k.outer), attribute.String("inner_scope", k.inner),
			attribute.String("action", action)))}
		n.labels[k] = r
	}
	r.spans += int64(spans)
	r.kind, r.name, r.last = kind, name, now
	return r.opt
}

// process runs after id dedup, on what is about to be forwarded: it counts
// the nested duplicates td completes and, with collapse_nested, removes
// the inner spans of those within td. keys and hashes are the window's
// (spanScratch.kept): those of td's spans, in order.
func (n *nestedState) process(ctx context.Context, td ptrace.Traces, keys [][24]byte, hashes []uint64, tel *telemetry) {
	for _, p := range n.det.AddHashed(td, keys, hashes) {
		tel.nestedSpans.Add(ctx, 1, n.count(nestedLabelKey{service: p.Service, outer: p.OuterScope.String(), inner: p.InnerScope.String()}, 1, p.Kind, p.Name))
	}
	if n.collapse != nil {
		for _, g := range nested.Collapse(td, n.opts, n.collapse).Groups {
			tel.nestedSpans.Add(ctx, int64(g.Spans), n.count(nestedLabelKey{service: g.Service, outer: g.OuterScope.String(), inner: g.InnerScope.String(), collapsed: true}, g.Spans, g.Kind, g.Name))
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

// statusRows are the nested detector's counts by service and scope pair
// (bounded by its label cap) for the status page.
func (n *nestedState) statusRows() []statuspage.NestedStatus {
	if n == nil {
		return nil
	}
	type row struct {
		k nestedLabelKey
		r nestedRow
	}
	n.mu.Lock()
	rows := make([]row, 0, len(n.labels))
	for k, r := range n.labels {
		rows = append(rows, row{k, *r})
	}
	n.mu.Unlock()
	out := make([]statuspage.NestedStatus, 0, len(rows))
	for _, r := range rows {
		ns := statuspage.NestedStatus{
			Service: r.k.service, OuterScope: r.k.outer, InnerScope: r.k.inner,
			Spans: r.r.spans, Action: "counted", Kind: r.r.kind, Name: r.r.name, LastSeen: r.r.last.UTC(),
		}
		if r.k.collapsed {
			ns.Action = "collapsed"
		}
		out = append(out, ns)
	}
	return out
}
