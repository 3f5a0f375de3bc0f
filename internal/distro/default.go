package distro

import (
	_ "embed"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/doubletake/doubletake/exporter/dedupotlpexporter"
	"github.com/doubletake/doubletake/internal/termsafe"
)

//go:embed default.yaml.tmpl
var defaultTemplate string

var tmpl = template.Must(template.New("default").Parse(defaultTemplate))

// Options are what `doubletake run`'s flags change in the default config.
type Options struct {
	GRPCEndpoint      string        // OTLP/gRPC listen address
	HTTPEndpoint      string        // OTLP/HTTP listen address
	Upstream          string        // forward all signals here over OTLP; empty: write locally
	UpstreamProtocol  string        // grpc or http
	DataDir           string        // where local files and the persistent queue live
	MetricsEndpoint   string        // where metrics are served without an upstream
	TelemetryEndpoint string        // where the gateway's own metrics are served
	HealthEndpoint    string        // health_check extension
	StatusEndpoint    string        // dedup's status page; empty: off
	SummaryInterval   time.Duration // how often the dedup summary is logged
	// UpstreamMaxRequestBytes is the largest request the upstream takes:
	// batches stay under it, and a request holding a larger item is refused.
	UpstreamMaxRequestBytes int
	MemorySoftLimitMiB      int // dedup shrinks its windows above this resident size; 0 off
}

// DefaultOptions are the defaults of `doubletake run`: everything on
// loopback.
func DefaultOptions() Options {
	return Options{
		GRPCEndpoint:            "127.0.0.1:4317",
		HTTPEndpoint:            "127.0.0.1:4318",
		UpstreamProtocol:        "grpc",
		DataDir:                 "./doubletake-data",
		MetricsEndpoint:         "127.0.0.1:8889",
		TelemetryEndpoint:       "127.0.0.1:8888",
		HealthEndpoint:          "127.0.0.1:13133",
		StatusEndpoint:          "127.0.0.1:8890",
		SummaryInterval:         time.Minute,
		UpstreamMaxRequestBytes: dedupotlpexporter.DefaultMaxRequestBytes,
		MemorySoftLimitMiB:      dedupSoftLimitMiB(),
	}
}

type view struct {
	Options
	UpstreamExporter string
	UpstreamInsecure bool
	TelemetryHost    string
	TelemetryPort    int
	Signals          []string
}

// DefaultConfig renders the embedded default config with o.
func DefaultConfig(o Options) (string, error) {
	v := view{Options: o, Signals: []string{"traces", "metrics", "logs"}}
	for name, addr := range map[string]string{
		"--grpc-endpoint": o.GRPCEndpoint, "--http-endpoint": o.HTTPEndpoint,
		"--metrics-endpoint": o.MetricsEndpoint, "--telemetry-endpoint": o.TelemetryEndpoint,
		"--health-endpoint": o.HealthEndpoint,
		"--status-endpoint": o.StatusEndpoint,
	} {
		if name == "--status-endpoint" && addr == "" {
			continue // off
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("%s %q: want host:port: %w", name, addr, err)
		}
	}
	host, port, _ := net.SplitHostPort(o.TelemetryEndpoint)
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("--telemetry-endpoint %q: port must be a number", o.TelemetryEndpoint)
	}
	v.TelemetryHost, v.TelemetryPort = host, p
	if strings.ContainsAny(o.DataDir, "\n\"'") {
		return "", fmt.Errorf("--data-dir %q: quotes and newlines are not allowed", o.DataDir)
	}
	if o.MemorySoftLimitMiB < 0 {
		return "", fmt.Errorf("--memory-soft-limit-mib must not be negative, got %d", o.MemorySoftLimitMiB)
	}
	if o.UpstreamMaxRequestBytes < 1024 {
		return "", fmt.Errorf("--upstream-max-request-bytes must be at least 1024, got %d", o.UpstreamMaxRequestBytes)
	}
	if o.SummaryInterval < 0 {
		return "", fmt.Errorf("--summary-interval must not be negative, got %s", o.SummaryInterval)
	}
	if o.Upstream != "" {
		// Errors quote the URL without its user info.
		shown := termsafe.RedactURL(o.Upstream)
		u, err := url.Parse(o.Upstream)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", fmt.Errorf("--upstream %q: want http://host:port or https://host:port", shown)
		}
		if u.User != nil {
			// Refused, not dropped: a gateway that silently sent without
			// them would be refused upstream with no hint why.
			return "", fmt.Errorf("--upstream %q: credentials in the URL are refused (they would show in the process list and the printed config); use --config with an authenticator extension (bearertokenauth) or exporter headers read from ${env:...}", shown)
		}
		switch o.UpstreamProtocol {
		case "grpc":
			// The OTLP/gRPC exporter takes host:port; the scheme says
			// whether to use TLS.
			v.UpstreamExporter = "dedup_otlp_grpc"
			v.Upstream = u.Host
			v.UpstreamInsecure = u.Scheme == "http"
		case "http":
			v.UpstreamExporter = "dedup_otlp_http"
			v.Upstream = strings.TrimSuffix(u.String(), "/")
		default:
			return "", fmt.Errorf("--upstream-protocol %q: want grpc or http", o.UpstreamProtocol)
		}
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}
