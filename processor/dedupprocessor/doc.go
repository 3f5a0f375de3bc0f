// Package dedupprocessor is an OpenTelemetry Collector processor (type
// "dedup") that makes telemetry arrive exactly once.
//
// Spans are recognised by their full (trace_id, span_id) bytes within a
// bounded window; log records by a seeded 128-bit digest of everything that
// identifies them. The first copy passes at once; later copies are dropped
// (mode: drop) or only counted (mode: detect). State is bounded, counted and
// per instance: put the processor behind a trace-id-routed load balancer when
// one instance is not enough.
package dedupprocessor // import "github.com/doubletake/doubletake/processor/dedupprocessor"
