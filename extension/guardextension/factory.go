package guardextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
)

// Type is the extension's component type in collector configs.
var Type = component.MustNewType("guard")

// NewFactory returns the guard extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(
		Type,
		func() component.Config { return createDefaultConfig() },
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			return newGuard(set, cfg.(*Config))
		},
		component.StabilityLevelAlpha,
	)
}
