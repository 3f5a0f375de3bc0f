// Package audit measures the damage double-exported telemetry has already
// done in the backends that store it.
//
// It has three sources, each behind a small interface so that tests can
// stand in for the backend:
//
//   - Prometheus-API-compatible servers ([PromAPI], which client_golang's
//     api/v1 satisfies): every counter-like series in a range is read as
//     stored (raw samples, through a range selector), its resets counted
//     exactly as PromQL's resets() counts them ([streams.Resets], the one
//     implementation the gateway and verify share), its samples split into
//     monotonic chains ([Deinterleave]) and classified: interleaved writers,
//     genuine restarts, or a drop that never recovers. PromQL's increase()
//     over all samples is set against the increase of the dominant chain.
//   - Trace backends ([TraceSource]): Jaeger's api/v3 with raw_traces=true,
//     which skips the query service's adjusters (among them
//     DeduplicateSpans), and Tempo's HTTP API. Duplicate span ids per
//     trace are counted by service and span name with internal/analyze,
//     which also finds nested duplicates (one operation stored as two
//     spans, one inside the other: double instrumentation).
//   - OTLP-JSON-lines files as the collector's file exporter and the
//     gateway's default sink write them, plain, gzip or zstd.
//
// Reports render as a text table, JSON, or a self-contained HTML page with
// an inline SVG chart per affected series.
package audit // import "github.com/doubletake/doubletake/internal/audit"
