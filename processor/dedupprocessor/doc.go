//go:generate ../../scripts/generate.sh

// Package dedupprocessor is an OpenTelemetry Collector processor (type
// "dedup") that makes telemetry arrive exactly once.
//
// Spans are recognised by their full (trace_id, span_id) bytes within a
// bounded window; log records by a seeded 128-bit digest of everything that
// identifies them. The first copy passes at once; later copies are dropped
// (mode: drop) or only counted (mode: detect). Metric streams get one
// writer each, as the OpenTelemetry data model requires: writers are told
// apart by their start time and the earliest is elected (internal/streams
// holds the rules). State is bounded, counted and per instance: put the
// processor behind a load balancer routing by trace id and stream id when
// one instance is not enough.
package dedupprocessor // import "github.com/doubletake/doubletake/processor/dedupprocessor"
