package dedupotlpexporter

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/exporter/dedupotlpexporter/internal/metadata"
	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// upstreamStates are the values of otelcol_exporter_dedup_upstream_state's
// state attribute, each observed as 1 (the upstream's state) or 0.
var upstreamStates = []upstreamhealth.State{
	upstreamhealth.Unknown, upstreamhealth.Reachable, upstreamhealth.Refusing, upstreamhealth.Unreachable,
}

// observeUpstream registers otelcol_exporter_dedup_upstream_state of
// exporter id's signal, read from health at collection time, and
// otelcol_exporter_dedup_queue_kept_entries from kept (when not nil);
// stop unregisters them.
func observeUpstream(set component.TelemetrySettings, id component.ID, signal string, health *upstreamhealth.Tracker, kept *keptEntries) (stop func(), err error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	attrs := make([]metric.ObserveOption, len(upstreamStates))
	for i, s := range upstreamStates {
		attrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", id.String()),
			attribute.String("data_type", signal), attribute.String("state", string(s))))
	}
	err = tb.RegisterExporterDedupUpstreamStateCallback(func(_ context.Context, o metric.Int64Observer) error {
		now := health.Snapshot().State
		for i, s := range upstreamStates {
			var v int64
			if s == now {
				v = 1
			}
			o.Observe(v, attrs[i])
		}
		return nil
	})
	if err == nil && kept != nil {
		taken := metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", id.String()),
			attribute.String("data_type", signal), attribute.String("outcome", "taken")))
		out := metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", id.String()),
			attribute.String("data_type", signal), attribute.String("outcome", "pushed_out")))
		err = tb.RegisterExporterDedupQueueKeptEntriesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(kept.takenCount.Load(), taken)
			o.Observe(kept.evicted.Load(), out)
			return nil
		})
	}
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	return tb.Shutdown, nil
}
