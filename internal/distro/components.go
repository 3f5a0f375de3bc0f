// Package distro is doubletake's OpenTelemetry Collector distribution: the
// component factories it is built with and the embedded default config that
// `doubletake run` starts when no --config is given.
package distro

import (
	"context"

	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusremotewriteexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/exporter/dedupotlpexporter"
	"github.com/doubletake/doubletake/exporter/dedupotlphttpexporter"
	"github.com/doubletake/doubletake/exporter/serieslimitprometheusexporter"
	"github.com/doubletake/doubletake/extension/encoding/otlpjsonencodingextension"
	"github.com/doubletake/doubletake/extension/guardextension"
	"github.com/doubletake/doubletake/extension/logstorageextension"
	"github.com/doubletake/doubletake/internal/datadir"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// CollectorVersion is the OpenTelemetry Collector release the distribution
// is built on; every collector module in go.mod is at this release.
const CollectorVersion = "v0.161.0"

// moveFileStorage is log_storage's FileStorageMover: internal/datadir's
// check, salvage and migration, each file checked by this program in a
// child process.
func moveFileStorage(ctx context.Context, dir string, to logstorageextension.Clients, logger *zap.Logger) error {
	check, err := datadir.SelfChecker()
	if err != nil {
		return err
	}
	return datadir.MoveFileStorage(ctx, dir, to, check, dedupprocessor.SalvageJournal, logger)
}

// Components returns the factories of every component the distribution
// carries.
func Components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
		otlpreceiver.NewFactory(),
	); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](
		// The dedup OTLP exporters hand items lost after acceptance back
		// to its processors, found through the host (dedupcontract).
		dedupprocessor.NewFactory(),
		memorylimiterprocessor.NewFactory(),
		batchprocessor.NewFactory(),
	); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		otlpexporter.NewFactory(),
		otlphttpexporter.NewFactory(),
		dedupotlpexporter.NewFactory(),
		dedupotlphttpexporter.NewFactory(),
		debugexporter.NewFactory(),
		fileexporter.NewFactory(),
		// The prometheus exporter with max_series.
		serieslimitprometheusexporter.NewFactory(),
		prometheusremotewriteexporter.NewFactory(),
		loadbalancingexporter.NewFactory(),
	); err != nil {
		return f, err
	}
	if f.Connectors, err = otelcol.MakeFactoryMap[connector.Factory](
		spanmetricsconnector.NewFactory(),
	); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](
		healthcheckextension.NewFactory(),
		filestorage.NewFactory(),
		bearertokenauthextension.NewFactory(),
		guardextension.NewFactory(),
		// log_storage moves a file_storage directory's files into its
		// clients at Start, each checked in a child process first
		// (doubletake's __check-storage command).
		logstorageextension.NewFactory(logstorageextension.WithFileStorageMover(moveFileStorage)),
		otlpjsonencodingextension.NewFactory(),
	); err != nil {
		return f, err
	}
	f.ProcessorModules = map[component.Type]string{
		dedupprocessor.Type: "github.com/doubletake/doubletake/processor/dedupprocessor",
	}
	return f, nil
}
