package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// gatewayConfig is the collector config of one variant: OTLP in, [dedup,]
// batch, OTLP/gRPC out to the sink, no compression, a small sending queue
// that blocks when full (so the sink's pace reaches the receiver and memory
// stays bounded), and no telemetry of its own. The two
// variants differ only in the processors list of the traces pipeline (and
// of the metrics pipeline with -dedup-metrics).
func (c *abConfig) gatewayConfig(variant, grpcAddr, httpAddr, healthAddr, sinkAddr string) string {
	procs := "[batch]"
	if variant == with {
		procs = "[dedup, batch]"
	}
	metrics := ""
	if c.gen.MetricStreams > 0 {
		mp := "[batch]"
		if variant == with && c.dedupMetrics {
			mp = "[dedup, batch]"
		}
		metrics = fmt.Sprintf(`
    metrics:
      receivers: [otlp]
      processors: %s
      exporters: [otlp_grpc]`, mp)
	}
	queue := "\n      enabled: false"
	if c.queueSize > 0 {
		queue = fmt.Sprintf(`
      enabled: true
      block_on_overflow: true
      sizer: requests
      queue_size: %d
      num_consumers: %d`, c.queueSize, c.consumers)
	}
	return fmt.Sprintf(`# bench/ab: variant %q
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
        max_recv_msg_size_mib: 16
      http:
        endpoint: %s
processors:
  dedup:
    mode: drop
    traces:
      window: 5m
      max_spans: %d
      on_conflict: keep_first
  batch: {}
exporters:
  otlp_grpc:
    endpoint: %s
    compression: none
    tls:
      insecure: true
    sending_queue:%s
service:
  extensions: [health_check]
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: %s
      exporters: [otlp_grpc]%s
`, variant, healthAddr, grpcAddr, httpAddr, c.maxSpans, sinkAddr, queue, procs, metrics)
}

// defaultPairConfig is, for -pair default, the stock durable collector
// (variant without): otlp -> memory_limiter -> batch -> otlp_grpc with a
// persistent sending_queue in file_storage, the exporter's defaults
// otherwise; or (variant with) the embedded default of `doubletake run
// --upstream`, rendered by the binary itself. Both serve their own
// metrics for scraping (never scraped) and send gzip, the OTLP exporter's
// default. addrs: gRPC, HTTP, health, telemetry, local metrics, status
// page.
func (c *abConfig) defaultPairConfig(ctx context.Context, variant string, addrs []string, sinkAddr, dataDir string) (string, error) {
	tel, telPort, _ := net.SplitHostPort(addrs[3])
	if variant == without {
		return fmt.Sprintf(`# bench/ab -pair default: a stock durable collector
extensions:
  health_check:
    endpoint: %s
  file_storage:
    directory: %s/queue
    create_directory: true
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
        max_recv_msg_size_mib: 16
      http:
        endpoint: %s
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: 80
    spike_limit_percentage: 20
  batch: {}
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
    sending_queue:
      enabled: true
      storage: file_storage
service:
  extensions: [health_check, file_storage]
  telemetry:
    logs:
      level: warn
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: %s
                port: %s
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [otlp_grpc]
`, addrs[2], dataDir, addrs[0], addrs[1], sinkAddr, tel, telPort), nil
	}
	cmd := exec.CommandContext(ctx, c.bin, "run", "default-config", "--upstream", "http://"+sinkAddr,
		"--grpc-endpoint", addrs[0], "--http-endpoint", addrs[1], "--health-endpoint", addrs[2],
		"--telemetry-endpoint", addrs[3], "--metrics-endpoint", addrs[4], "--status-endpoint", addrs[5], "--data-dir", dataDir)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("rendering the embedded default: %w", err)
	}
	cfg := string(out)
	if !c.nested {
		const on = "      nested:\n        detect: true\n"
		if !strings.Contains(cfg, on) {
			return "", errors.New("-default-nested=false: the embedded default no longer has traces.nested.detect: true where expected")
		}
		cfg = strings.Replace(cfg, on, "      nested:\n        detect: false\n", 1)
	}
	return cfg, nil
}

func freeAddrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
