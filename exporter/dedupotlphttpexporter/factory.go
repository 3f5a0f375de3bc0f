package dedupotlphttpexporter

import (
	"go.opentelemetry.io/collector/exporter"

	"github.com/doubletake/doubletake/exporter/dedupotlpexporter"
	"github.com/doubletake/doubletake/exporter/dedupotlphttpexporter/internal/metadata"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// Type is dedup_otlp_http (metadata.yaml).
var Type = metadata.Type

// NewFactory returns the dedup_otlp_http factory whose exporters hand the
// items lost upstream back to the processors of dedupprocessor.NewFactory.
func NewFactory() exporter.Factory {
	return dedupotlpexporter.NewHTTPFactory(dedupprocessor.LinkedTakeBack())
}
