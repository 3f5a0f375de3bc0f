package otlpjsonencodingextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/doubletake/doubletake/extension/encoding/otlpjsonencodingextension/internal/metadata"
)

// Type is the extension's component type in collector configs
// (metadata.yaml).
var Type = metadata.Type

// NewFactory returns the otlp_json extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(Type, func() component.Config { return &Config{} },
		func(context.Context, extension.Settings, component.Config) (extension.Extension, error) {
			return Encoding{}, nil
		}, metadata.ExtensionStability)
}
