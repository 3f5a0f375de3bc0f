package dedupotlphttpexporter

import (
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"

	"github.com/doubletake/doubletake/exporter/dedupotlpexporter"
	"github.com/doubletake/doubletake/exporter/dedupotlphttpexporter/internal/metadata"
)

// Type is dedup_otlp_http (metadata.yaml), the type's one home.
var Type = metadata.Type

// NewFactory returns the dedup_otlp_http factory: otlp_http wrapped as
// dedupotlpexporter wraps otlp_grpc. Its exporters hand the items lost
// upstream back to the dedup processor their config names, found at
// Start through the host by component ID.
func NewFactory() exporter.Factory {
	return dedupotlpexporter.Wrap(Type, otlphttpexporter.NewFactory(), nil)
}
