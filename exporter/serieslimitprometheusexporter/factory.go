package serieslimitprometheusexporter

import (
	"context"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/doubletake/doubletake/exporter/serieslimitprometheusexporter/internal/metadata"
)

// NewFactory returns the prometheus exporter's factory with max_series
// added; its type is prometheus, as the exporter it wraps.
func NewFactory() exporter.Factory {
	inner := prometheusexporter.NewFactory()
	return exporter.NewFactory(metadata.Type,
		func() component.Config {
			return &Config{Config: *inner.CreateDefaultConfig().(*prometheusexporter.Config), MaxSeries: DefaultMaxSeries}
		},
		exporter.WithMetrics(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
			c := cfg.(*Config)
			next, err := inner.CreateMetrics(ctx, set, &c.Config)
			if err != nil {
				return nil, err
			}
			lim, err := newLimiter(set, c)
			if err != nil {
				return nil, err
			}
			return &limited{Metrics: next, lim: lim}, nil
		}, metadata.MetricsStability))
}
