//go:generate ../../scripts/generate.sh

// Package serieslimitprometheusexporter is the prometheus exporter with
// a bound on the series it serves (max_series); its type is prometheus.
//
// The prometheus exporter keeps every series it was sent for
// metric_expiration (5m) and has no limit of its own: a million distinct
// series make each scrape fail and cost about a gigabyte. The dedup
// processor's metrics.max_streams does not bound it: points of streams past
// that bound pass on unjudged (dedup never refuses data for its own
// memory's sake), and a stream dedup forgot after max_stale may still be
// held by the exporter, which sweeps once per metric_expiration.
//
// NewFactory is the prometheus exporter with one more setting,
// max_series: the points of a series first seen while max_series are
// tracked are refused (removed from what the exporter is given), counted in
// otelcol_exporter_prometheus_refused_points. A series is one OTLP
// stream (resource, scope, metric and point attributes; a histogram is one
// series however many buckets it has). A series is forgotten only when the
// exporter has surely let it go: twice metric_expiration after its last
// point, plus a second (the exporter sweeps once per metric_expiration).
package serieslimitprometheusexporter
