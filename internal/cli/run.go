package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/httpprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.yaml.in/yaml/v3"

	"github.com/doubletake/doubletake/internal/buildinfo"
	"github.com/doubletake/doubletake/internal/distro"
	"github.com/doubletake/doubletake/internal/termsafe"
)

// defaultOnlyFlags change the embedded default config; with --config they
// would be silently ignored, so they are refused instead.
var defaultOnlyFlags = []string{
	"grpc-endpoint", "http-endpoint", "upstream", "upstream-protocol", "data-dir",
	"metrics-endpoint", "telemetry-endpoint", "health-endpoint", "summary-interval", "upstream-max-request-bytes", "memory-soft-limit-mib",
	"status-endpoint", "fsync",
}

func collectorSettings() otelcol.CollectorSettings {
	return otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "doubletake",
			Description: "doubletake gateway: an OpenTelemetry Collector that drops duplicate telemetry",
			Version:     buildinfo.Read().Version,
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
checks one. The collector's --feature-gates flag works too (not listed).`
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
	f.IntVar(&opts.UpstreamMaxRequestBytes, "upstream-max-request-bytes", opts.UpstreamMaxRequestBytes, "largest request the --upstream takes (its receive limit): batches stay under it, and a request holding a larger item is refused; the default is the collector's 4 MiB gRPC limit less 64 KiB")
	f.IntVar(&opts.MemorySoftLimitMiB, "memory-soft-limit-mib", opts.MemorySoftLimitMiB, "resident size above which dedup shrinks its windows (0 turns it off)")
	// The default depends on the machine: say where it comes from, once.
	f.Lookup("memory-soft-limit-mib").DefValue = fmt.Sprintf("%d, half the memory available", opts.MemorySoftLimitMiB)
	f.BoolVar(&opts.FSync, "fsync", false, "sync the persistent queue's and dedup journal's writes to disk before answering (file_storage fsync): acknowledged data then survives a power loss, not only a crash, at a cost in throughput")
	f.DurationVar(&opts.SummaryInterval, "summary-interval", opts.SummaryInterval, "how often to log what was received and dropped (0 turns it off)")

	// The collector's own flags, for people: its --feature-gates usage
	// lists every gate of every component (still accepted, not listed);
	// --config's usage quotes itself.
	if fl := cmd.Flags().Lookup("feature-gates"); fl != nil {
		fl.Hidden = true
	}
	if fl := cmd.Flags().Lookup("config"); fl != nil {
		fl.Usage = "run the collector config at `URI` instead of the embedded default (file:PATH or a path, env:VAR, yaml:..., http(s)://...); repeatable, merged in order"
		fl.DefValue = ""
	}
	if fl := cmd.Flags().Lookup("set"); fl != nil {
		fl.Usage = "set the config property `KEY=VALUE` over the config (processors.batch.timeout=2s); repeatable"
	}
	// --version prints doubletake's version, as 'doubletake version' does.
	cmd.Version = versionLine(buildinfo.Read())
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.Flags().BoolP("version", "v", false, "print doubletake's version and exit")

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
			if err := checkConfigFiles(c); err != nil {
				return err
			}
			return otelRunE(c, args)
		}
		yaml, err := distro.DefaultConfig(opts)
		if err != nil {
			return usageError("%v", err)
		}
		if err := checkDataDir(opts.DataDir); err != nil {
			return usageError("%v", err)
		}
		// A port taken (a second gateway) is one clear line, before the
		// collector starts and logs the failure with a stack trace.
		if err := checkPorts(opts); err != nil {
			return &ExitError{Code: ExitInternal, Err: err}
		}
		// One gateway per data dir, its local files writable; its
		// storage is checked, salvaged and moved from file_storage by
		// log_storage at Start.
		lock, err := prepareDataDir(opts)
		if err != nil {
			return &ExitError{Code: ExitInternal, Err: err}
		}
		// Released once the collector has stopped, so that a later run in
		// this process (tests; the collector's own restarts) can take it.
		defer lock.Close()
		fmt.Fprintln(s.Err, startupLine(opts))
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
		// Errors the collector logs (a port taken between the check and
		// the start) come without a Go stack trace. Merged over the
		// default, which stays as printed by default-config.
		if err := c.Flags().Set("config", "yaml:service::telemetry::logs::disable_stacktrace: true"); err != nil {
			return fmt.Errorf("loading the default config: %w", err)
		}
		return otelRunE(c, args)
	}

	// validate names a config file that is not YAML, as run does.
	for _, sub := range cmd.Commands() {
		if sub.Name() == "validate" && sub.RunE != nil {
			validate := sub.RunE
			sub.RunE = func(c *cobra.Command, args []string) error {
				if err := checkConfigFiles(c); err != nil {
					return err
				}
				return validate(c, args)
			}
		}
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

// checkPorts tries every address the default config listens on and says,
// in one line, which is taken and by which flag it is moved.
func checkPorts(o distro.Options) error {
	addrs := []struct{ flag, addr string }{
		{"--grpc-endpoint", o.GRPCEndpoint}, {"--http-endpoint", o.HTTPEndpoint},
		{"--telemetry-endpoint", o.TelemetryEndpoint}, {"--health-endpoint", o.HealthEndpoint},
	}
	if o.Upstream == "" {
		addrs = append(addrs, struct{ flag, addr string }{"--metrics-endpoint", o.MetricsEndpoint})
	}
	if o.StatusEndpoint != "" {
		addrs = append(addrs, struct{ flag, addr string }{"--status-endpoint", o.StatusEndpoint})
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("run: %s is already in use (another gateway running?); stop it or choose another address with %s", a.addr, a.flag)
			}
			return fmt.Errorf("run: %s %s: %w", a.flag, a.addr, err)
		}
		_ = ln.Close()
	}
	return nil
}

// uriScheme is how a --config URI that is not a plain path begins.
var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// checkConfigFiles reads each --config that names a file (a path, or
// file:PATH) and says, naming the file, when it is not YAML: the
// collector's own message names neither. A file it cannot read is left to
// the collector to report.
func checkConfigFiles(c *cobra.Command) error {
	fl := c.Flags().Lookup("config")
	if fl == nil || !fl.Changed {
		return nil
	}
	// otelcol's flag value prints as "[URI, URI]".
	list := strings.TrimSuffix(strings.TrimPrefix(fl.Value.String(), "["), "]")
	for _, uri := range strings.Split(list, ", ") {
		path, ok := strings.CutPrefix(uri, "file:")
		if !ok && uriScheme.MatchString(uri) {
			continue // env:, yaml:, http(s):
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var doc any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return &ExitError{Code: ExitInternal, Err: fmt.Errorf("--config %s is not valid YAML: %w", path, err)}
		}
	}
	return nil
}

// checkDataDir makes sure --data-dir is a directory the gateway can use,
// creating it, and says so naming the flag: the collector's file_storage
// would say "problem accessing configured directory" of a path under it.
func checkDataDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("--data-dir %s is a file, not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	return nil
}

// startupLine is the one line the embedded default starts with: where data
// comes in, where it goes, the data dir and the status page.
func startupLine(o distro.Options) string {
	out := fmt.Sprintf("traces and logs to %s and %s, metrics for scraping at http://%s/metrics",
		filepath.Join(o.DataDir, "traces.jsonl"), filepath.Join(o.DataDir, "logs.jsonl"), o.MetricsEndpoint)
	if o.Upstream != "" {
		out = fmt.Sprintf("everything to %s over OTLP/%s, through a persistent queue", termsafe.RedactURL(o.Upstream), o.UpstreamProtocol)
	}
	status := "status page off"
	if o.StatusEndpoint != "" {
		status = "status page http://" + o.StatusEndpoint + "/"
	}
	return fmt.Sprintf("doubletake: OTLP in on %s (gRPC) and http://%s (HTTP); %s; data dir %s; %s; own metrics http://%s/metrics",
		o.GRPCEndpoint, o.HTTPEndpoint, out, o.DataDir, status, o.TelemetryEndpoint)
}
