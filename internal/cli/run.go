package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/httpprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"

	"github.com/doubletake/doubletake/internal/distro"
)

// defaultOnlyFlags change the embedded default config; with --config they
// would be silently ignored, so they are refused instead.
var defaultOnlyFlags = []string{
	"grpc-endpoint", "http-endpoint", "upstream", "upstream-protocol", "data-dir",
	"metrics-endpoint", "telemetry-endpoint", "health-endpoint", "summary-interval", "spool-endpoint", "memory-soft-limit-mib",
	"status-endpoint",
}

func collectorSettings() otelcol.CollectorSettings {
	return otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "doubletake",
			Description: "doubletake gateway: an OpenTelemetry Collector that drops duplicate telemetry",
			Version:     Version,
		},
		Factories: distro.Components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
					yamlprovider.NewFactory(),
					httpprovider.NewFactory(),
				},
				DefaultScheme: "env",
			},
		},
	}
}

func newRunCommand(s Streams) *cobra.Command {
	opts := distro.DefaultOptions()
	cmd := otelcol.NewCommand(collectorSettings())
	cmd.Use = "run"
	cmd.Short = "Run the gateway: an OpenTelemetry Collector with the dedup processor"
	cmd.Long = `Run the doubletake gateway, an OpenTelemetry Collector distribution whose dedup
processor drops duplicate spans and log records in flight.

Without --config it runs an embedded default: OTLP in on 127.0.0.1:4317 (gRPC)
and 127.0.0.1:4318 (HTTP); with --upstream every signal is forwarded over OTLP
after dedup; without it traces and logs are written as OTLP-JSON lines under
--data-dir and metrics are served for scraping on --metrics-endpoint.
Print the default with 'doubletake run default-config'.

With --config it runs any collector config (files, env:, yaml:, http: URIs,
--set overrides), exactly as otelcol does; 'doubletake run validate --config F'
checks one.`
	cmd.SilenceErrors = true
	cmd.SetIn(s.In)
	cmd.SetOut(s.Out)
	cmd.SetErr(s.Err)

	f := cmd.PersistentFlags() // default-config renders with them too
	f.StringVar(&opts.GRPCEndpoint, "grpc-endpoint", opts.GRPCEndpoint, "OTLP/gRPC listen address of the default config (0.0.0.0:4317 listens on every interface)")
	f.StringVar(&opts.HTTPEndpoint, "http-endpoint", opts.HTTPEndpoint, "OTLP/HTTP listen address of the default config")
	f.StringVar(&opts.Upstream, "upstream", "", "forward traces, metrics and logs after dedup to this OTLP endpoint (http://host:port or https://host:port)")
	f.StringVar(&opts.UpstreamProtocol, "upstream-protocol", opts.UpstreamProtocol, "protocol for --upstream: grpc or http")
	f.StringVar(&opts.DataDir, "data-dir", opts.DataDir, "directory for the local trace and log files and the persistent queue")
	f.StringVar(&opts.MetricsEndpoint, "metrics-endpoint", opts.MetricsEndpoint, "where metrics are served for scraping when there is no --upstream")
	f.StringVar(&opts.TelemetryEndpoint, "telemetry-endpoint", opts.TelemetryEndpoint, "where the gateway's own metrics are served")
	f.StringVar(&opts.HealthEndpoint, "health-endpoint", opts.HealthEndpoint, "health check address")
	f.StringVar(&opts.StatusEndpoint, "status-endpoint", opts.StatusEndpoint, "where dedup's status page is served (HTML at /, JSON at /status.json); empty turns it off")
	f.StringVar(&opts.SpoolEndpoint, "spool-endpoint", opts.SpoolEndpoint, "loopback address of the persistent spool between the receiver and dedup (with --upstream)")
	f.IntVar(&opts.MemorySoftLimitMiB, "memory-soft-limit-mib", opts.MemorySoftLimitMiB, "resident size above which dedup shrinks its windows (0 turns it off; default: half the memory available)")
	f.DurationVar(&opts.SummaryInterval, "summary-interval", opts.SummaryInterval, "how often to log what was received and dropped (0 turns it off)")

	otelRunE := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError("run takes no arguments, got %q", strings.Join(args, " "))
		}
		if c.Flags().Changed("config") {
			for _, name := range defaultOnlyFlags {
				if c.Flags().Changed(name) {
					return usageError("--%s changes the embedded default config and cannot be used with --config", name)
				}
			}
			return otelRunE(c, args)
		}
		yaml, err := distro.DefaultConfig(opts)
		if err != nil {
			return usageError("%v", err)
		}
		// The default config pushes no telemetry of its own; make sure no
		// SDK default picks up an OTLP endpoint from the environment that
		// points back at our own receivers.
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_EXPORTER_OTLP_") {
				_ = os.Unsetenv(k)
			}
		}
		if err := c.Flags().Set("config", "yaml:"+yaml); err != nil {
			return fmt.Errorf("loading the default config: %w", err)
		}
		return otelRunE(c, args)
	}

	cmd.AddCommand(&cobra.Command{
		Use:   "default-config",
		Short: "Print the embedded default config, rendered with the run flags given",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			yaml, err := distro.DefaultConfig(opts)
			if err != nil {
				return usageError("%v", err)
			}
			_, err = fmt.Fprint(s.Out, yaml)
			return err
		},
	})
	return cmd
}
