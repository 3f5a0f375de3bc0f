//go:generate ../../scripts/generate.sh

// Package dedupotlphttpexporter is the dedup_otlp_http exporter for a
// collector built from a builder manifest: the otlp_http exporter wrapped
// as exporter/dedupotlpexporter wraps otlp_grpc (that package holds the
// implementation, its config and its README), reaching the dedup
// processor of its collector through the host.
package dedupotlphttpexporter
