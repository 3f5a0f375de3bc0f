package logstorageextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/doubletake/doubletake/extension/logstorageextension/internal/metadata"
)

// Type is the extension's component type in collector configs
// (metadata.yaml).
var Type = metadata.Type

// NewFactory returns log_storage's factory.
func NewFactory(opts ...Option) extension.Factory {
	return extension.NewFactory(
		Type,
		func() component.Config { return createDefaultConfig() },
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			return newExtension(set, cfg.(*Config), opts...)
		},
		metadata.ExtensionStability,
	)
}
