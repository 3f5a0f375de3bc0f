package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

// The two variants of the A/B: the same pipeline, without and with dedup.
const (
	without = "without"
	with    = "with"
)

type abConfig struct {
	bin          string
	rounds       int
	warmup       time.Duration
	duration     time.Duration
	loads        []loadSpec
	dups         []float64 // duplicate shares
	senders      []int     // span senders of each cell
	batches      []int     // spans per request of each cell
	rate         float64   // -rate: the rate of a "fixed" load; 0: half the median saturation throughput
	order        string    // abab or abba
	gen          loadgen.Config
	pair         string // "dedup": the pipeline without and with dedup; "default": a stock durable collector and the embedded default
	nested       bool   // -pair default: keep the default's nested-duplicate detection on
	gatewayCPUs  string // taskset -c list for the gateway; empty: not pinned
	maxSpans     int
	prefill      int    // new spans sent before the warmup of every run; 0: none
	prefillShape [2]int // senders and spans per request of the prefill
	queueSize    int    // exporter sending_queue size in requests, blocking when full; 0 disables the queue
	consumers    int    // exporter sending_queue num_consumers
	dedupMetrics bool
	ceiling      bool
	quietBelow   float64       // wait before a run until other processes use fewer cores than this
	quietWait    time.Duration // for at most this long
	maxOther     float64       // discard and rerun a pair when other processes used more cores than this
	retries      int           // at most this many times per pair
	workdir      string
	keep         bool
	mdOut        string
	jsonOut      string
	x            abExtra // cells.go: -cells, -fresh
}

// loadSpec is one load of the scenarios: saturation ("sat"), or a fixed
// rate in spans/s ("fixed"; rate 0: half the median saturation throughput).
type loadSpec struct {
	name string
	rate float64
}

// scenario is one cell: a load, a duplicate share, and the shape of the
// traffic (senders, each with one request in flight, and spans per
// request).
type scenario struct {
	load    string
	rate    float64
	dup     float64
	senders int
	batch   int
}

// runResult is one gateway run, measured over the window after the warmup.
type runResult struct {
	Load    string  `json:"load"`
	Dup     float64 `json:"dup"`
	Senders int     `json:"senders"`
	Batch   int     `json:"spans_per_request"`
	Variant string  `json:"variant"`
	Round   int     `json:"round"`
	Rate    float64 `json:"rate"` // asked; 0 saturates

	Prefill      float64 `json:"prefill_s,omitempty"` // how long filling the window took
	Window       float64 `json:"window_s"`
	Accepted     float64 `json:"accepted_per_s"`  // spans the gateway accepted (the generator's successful sends)
	Delivered    float64 `json:"delivered_per_s"` // spans the sink received
	PointsIn     float64 `json:"points_accepted_per_s,omitempty"`
	PointsOut    float64 `json:"points_delivered_per_s,omitempty"`
	CPUPerM      float64 `json:"gateway_cpu_s_per_million_spans"`
	LatP50Ms     float64 `json:"latency_p50_ms"` // span requests answered in the window: send to answer
	LatP99Ms     float64 `json:"latency_p99_ms"`
	GatewayCores float64 `json:"gateway_cores"`
	DriverCores  float64 `json:"driver_cores"` // generator + sink
	OtherCores   float64 `json:"other_cores"`  // everything else on the machine
	PeakRSSMB    float64 `json:"gateway_peak_rss_mb"`
	EndRSSMB     float64 `json:"gateway_rss_at_window_end_mb"`
	// Totals over the whole run (warmup included), after draining.
	SentSpans   uint64 `json:"accepted_spans"`
	SentFresh   uint64 `json:"accepted_fresh_spans"`
	FailedReqs  uint64 `json:"failed_requests"`
	SinkSpans   uint64 `json:"sink_spans"`
	SinkUnique  uint64 `json:"sink_distinct_spans"`
	Check       string `json:"check"`
	Discarded   bool   `json:"discarded,omitempty"` // run again: the machine was busy
	FirstError  string `json:"first_error,omitempty"`
	GatewayLogs string `json:"gateway_log,omitempty"`

	Start *freshStart `json:"start,omitempty"` // -fresh runs: the gateway's start
}

// abFlags are the flags that are not fields of abConfig.
type abFlags struct {
	loads, dups, senders, batches, matrix, printConfig *string
}

// register registers every flag of the driver on fs, into c and the
// returned abFlags.
func (c *abConfig) register(fs *flag.FlagSet) *abFlags {
	f := &abFlags{}
	loadgen.RegisterFlags(fs, &c.gen, true)
	fs.StringVar(&c.bin, "bin", "", "the doubletake binary (empty: go build ./cmd/doubletake into the work directory)")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds; each runs the without and with variant once per scenario")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "load before each measured window")
	fs.DurationVar(&c.duration, "duration", 8*time.Second, "measured window of each run")
	f.loads = fs.String("loads", "sat,fixed", "scenarios' loads: sat (saturation), fixed (-rate spans/s), or rates in spans/s (10000)")
	f.dups = fs.String("dups", "0,0.5", "duplicate shares to run")
	f.senders = fs.String("senders", "", "span senders of the cells, a list (empty: -concurrency)")
	f.batches = fs.String("batches", "", "spans per request of the cells, a list (empty: -batch)")
	f.matrix = fs.String("matrix", "", "full or quick: the -pair default matrix of docs/benchmarks.md (senders 1,2,16,64 × spans per request 64,512,8192 × saturation, 10k and 40k spans/s); flags given as well override it")
	fs.IntVar(&c.prefillShape[0], "prefill-senders", 16, "senders of the prefill")
	fs.IntVar(&c.prefillShape[1], "prefill-batch", 1000, "spans per request of the prefill")
	fs.StringVar(&c.pair, "pair", "dedup", "dedup: one pipeline without and with dedup; default: a stock durable collector (otlp, memory_limiter, batch, otlp_grpc with a file_storage sending queue) as \"without\" against `doubletake run --upstream` with its embedded default as \"with\"")
	fs.BoolVar(&c.nested, "default-nested", true, "-pair default: keep the embedded default's nested-duplicate detection (traces.nested.detect) on; false turns it off, to take its cost apart")
	fs.StringVar(&c.order, "order", "abab", "abab: without first in every round; abba: the first variant alternates by round")
	fs.StringVar(&c.gatewayCPUs, "gateway-cpus", "", "pin the gateway with taskset -c LIST (pin this driver yourself: taskset -c 0 ab ...)")
	fs.IntVar(&c.maxSpans, "max-spans", 2_000_000, "dedup traces.max_spans")
	fs.IntVar(&c.prefill, "prefill", -1, "new spans sent as fast as possible before each run's warmup, so that the window is full and every new span evicts one (the steady state); -1: max-spans, 0: none")
	fs.IntVar(&c.queueSize, "queue-size", 20, "the exporter's sending_queue size, in requests of up to 8192 spans (the batch processor's), blocking when full; 0 disables the queue (exports then block the batch processor)")
	fs.IntVar(&c.consumers, "queue-consumers", 10, "the exporter's sending_queue num_consumers (concurrent exports)")
	fs.BoolVar(&c.dedupMetrics, "dedup-metrics", true, "with -metric-streams: put dedup in the metrics pipeline of the with variant too")
	fs.BoolVar(&c.ceiling, "ceiling", true, "first measure the generator against the sink directly (no gateway), once per duplicate share")
	fs.Float64Var(&c.quietBelow, "quiet-below", 0, "before each run, wait until the rest of the machine uses fewer cores than this (0: do not wait); for shared machines")
	fs.DurationVar(&c.quietWait, "quiet-wait", 20*time.Second, "the longest wait for -quiet-below")
	fs.Float64Var(&c.maxOther, "max-other", 0, "discard a round's pair and run it again when other processes used more cores than this during either window (0: keep every pair)")
	fs.IntVar(&c.retries, "retries", 2, "the most times one pair is run again for -max-other")
	fs.StringVar(&c.workdir, "workdir", "", "where configs and gateway logs go (empty: a temporary directory)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory")
	fs.StringVar(&c.mdOut, "out", "", "also write the report (markdown) to this file")
	fs.StringVar(&c.jsonOut, "json", "", "write every run's figures (JSON) to this file")
	c.x.register(fs)
	f.printConfig = fs.String("print-config", "", "print the gateway config of variant with or without (on the fixed ports 4317, 4318, 13133, sink 4319) and exit")
	return f
}

func abMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("ab", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var c abConfig
	f := c.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("ab takes no arguments, got %q", fs.Args())
	}
	if *f.printConfig != "" {
		if *f.printConfig != with && *f.printConfig != without {
			return fmt.Errorf("print-config %q: want with or without", *f.printConfig)
		}
		_, err := fmt.Fprint(out, c.gatewayConfig(*f.printConfig, "127.0.0.1:4317", "127.0.0.1:4318", "127.0.0.1:13133", "127.0.0.1:4319"))
		return err
	}
	if *f.matrix != "" {
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		if err := applyMatrix(fs, *f.matrix, set); err != nil {
			return err
		}
	}
	c.rate = c.gen.Rate
	c.gen.Target = "127.0.0.1:1" // validated here, replaced per run
	if err := c.parse(*f.loads, *f.dups, *f.senders, *f.batches); err != nil {
		return err
	}
	if c.workdir == "" {
		d, err := os.MkdirTemp("", "doubletake-ab-")
		if err != nil {
			return err
		}
		c.workdir = d
		if !c.keep {
			defer os.RemoveAll(d)
		}
	} else if err := os.MkdirAll(c.workdir, 0o755); err != nil {
		return err
	}
	if c.bin == "" {
		c.bin = filepath.Join(c.workdir, "doubletake")
		fmt.Fprintf(errOut, "building ./cmd/doubletake into %s\n", c.bin)
		build := exec.CommandContext(ctx, "go", "build", "-o", c.bin, "github.com/doubletake/doubletake/cmd/doubletake")
		build.Stdout, build.Stderr = errOut, errOut
		if err := build.Run(); err != nil {
			return fmt.Errorf("building doubletake: %w", err)
		}
	}
	return runAB(ctx, &c, out, errOut)
}

func (c *abConfig) parse(loads, dups, senders, batches string) error {
	var errs []error
	for l := range strings.SplitSeq(loads, ",") {
		switch l = strings.TrimSpace(l); l {
		case "sat":
			c.loads = append(c.loads, loadSpec{name: "sat"})
		case "fixed":
			c.loads = append(c.loads, loadSpec{name: "fixed", rate: c.rate})
		default:
			v, err := strconv.ParseFloat(l, 64)
			if err != nil || v <= 0 || v > 100e6 {
				errs = append(errs, fmt.Errorf("load %q: want sat, fixed or a rate in spans/s", l))
			}
			c.loads = append(c.loads, loadSpec{name: "fixed", rate: v})
		}
	}
	// Saturation first: the fixed rate may be derived from it.
	slices.SortStableFunc(c.loads, func(a, b loadSpec) int { return strings.Compare(b.name, a.name) })
	c.loads = slices.Compact(c.loads)
	list := func(what, v string, def int) []int {
		if v == "" {
			return []int{def}
		}
		var out []int
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				errs = append(errs, fmt.Errorf("%s %q: want positive numbers", what, f))
			}
			out = append(out, n)
		}
		return out
	}
	c.senders = list("senders", senders, c.gen.Concurrency)
	c.batches = list("batches", batches, c.gen.Batch)
	for d := range strings.SplitSeq(dups, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(d), 64)
		if err != nil || v < 0 || v >= 1 {
			errs = append(errs, fmt.Errorf("dup %q: want a share in [0, 1)", d))
		}
		c.dups = append(c.dups, v)
	}
	if c.rounds < 1 || c.rounds > 100 {
		errs = append(errs, errors.New("rounds: want 1 to 100"))
	}
	if c.duration <= 0 || c.duration > 10*time.Minute || c.warmup < 0 || c.warmup > time.Minute {
		errs = append(errs, errors.New("duration must be in (0, 10m], warmup in [0, 1m]"))
	}
	if c.order != "abab" && c.order != "abba" {
		errs = append(errs, fmt.Errorf("order %q: want abab or abba", c.order))
	}
	if c.pair != "dedup" && c.pair != "default" {
		errs = append(errs, fmt.Errorf("pair %q: want dedup or default", c.pair))
	}
	if c.pair == "default" && c.gen.MetricStreams > 0 {
		errs = append(errs, errors.New("pair default compares spans only: drop -metric-streams"))
	}
	if c.queueSize < 0 || c.consumers < 1 {
		errs = append(errs, errors.New("queue-size must not be negative and queue-consumers must be positive"))
	}
	if c.prefill < 0 {
		c.prefill = c.maxSpans
	}
	if c.maxSpans < 1 {
		errs = append(errs, errors.New("max-spans must be positive"))
	}
	if slices.Contains(c.loads, loadSpec{name: "fixed"}) && !slices.Contains(c.loads, loadSpec{name: "sat"}) {
		errs = append(errs, errors.New("a fixed load without sat needs -rate"))
	}
	if c.prefillShape[0] < 1 || c.prefillShape[1] < 1 {
		errs = append(errs, errors.New("prefill-senders and prefill-batch must be positive"))
	}
	for _, n := range c.senders {
		for _, b := range c.batches {
			g := c.gen
			g.Dup, g.Concurrency, g.Batch = 0, n, b
			if err := g.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%d senders × %d spans: %w", n, b, err))
			}
		}
	}
	return errors.Join(errs...)
}

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

// gatewayProc is a running `doubletake run`.
type gatewayProc struct {
	cmd  *exec.Cmd
	pid  string
	log  string
	done chan struct{}
	err  error
}

func (c *abConfig) startGateway(ctx context.Context, cfgPath, logPath, health string) (*gatewayProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{c.bin, "run", "--config", cfgPath}
	if c.gatewayCPUs != "" {
		// taskset execs the gateway: the pid stays the gateway's.
		args = append([]string{"taskset", "-c", c.gatewayCPUs}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	g := &gatewayProc{cmd: cmd, pid: strconv.Itoa(cmd.Process.Pid), log: logPath, done: make(chan struct{})}
	go func() { g.err = cmd.Wait(); logf.Close(); close(g.done) }()
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-g.done:
			return nil, fmt.Errorf("the gateway exited before it was healthy: %w\n%s", g.err, tail(logPath))
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		default:
		}
		if resp, err := client.Get("http://" + health + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g, nil
			}
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("the gateway was not healthy within 60s\n%s", tail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the gateway with SIGINT, then SIGKILL after 20s.
func (g *gatewayProc) stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

type probe struct {
	gen     loadgen.Snapshot
	sink    loadgen.Counts
	gwCPU   float64
	selfCPU float64
	busy    float64
}

func takeProbe(g *loadgen.Generator, sk *loadgen.Sink, pid string) probe {
	p := probe{gen: g.Stats.Snapshot(), sink: sk.Counts()}
	p.gwCPU, _ = loadgen.ProcCPU(pid)
	p.selfCPU, _ = loadgen.ProcCPU("self")
	p.busy, _ = loadgen.SystemBusy()
	return p
}

// runOne runs one gateway variant in scenario sc (its rate decided) and
// measures it.
func (c *abConfig) runOne(ctx context.Context, n int, sc scenario, variant string, round int) (runResult, error) {
	if c.x.fresh > 0 {
		return c.runFresh(ctx, n, sc, variant, round)
	}
	r := runResult{Load: sc.load, Dup: sc.dup, Senders: sc.senders, Batch: sc.batch, Variant: variant, Round: round, Rate: sc.rate}
	nonce := loadgen.NewNonce()
	sk, err := loadgen.StartSink("127.0.0.1:0", nonce)
	if err != nil {
		return r, err
	}
	defer sk.Close()
	addrs, err := freeAddrs(6)
	if err != nil {
		return r, err
	}
	grpcAddr, httpAddr, health := addrs[0], addrs[1], addrs[2]
	cfgPath := filepath.Join(c.workdir, fmt.Sprintf("run-%03d-%s.yaml", n, variant))
	logPath := filepath.Join(c.workdir, fmt.Sprintf("run-%03d-%s.log", n, variant))
	dataDir := filepath.Join(c.workdir, fmt.Sprintf("run-%03d-%s-data", n, variant))
	defer os.RemoveAll(dataDir)
	cfg := c.gatewayConfig(variant, grpcAddr, httpAddr, health, sk.Addr())
	if c.pair == "default" {
		cfg, err = c.defaultPairConfig(ctx, variant, addrs, sk.Addr(), dataDir)
		if err != nil {
			return r, err
		}
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return r, err
	}
	gw, err := c.startGateway(ctx, cfgPath, logPath, health)
	if err != nil {
		return r, err
	}
	defer gw.stop()
	gc := c.gen
	gc.Dup, gc.Rate, gc.Target = sc.dup, sc.rate, grpcAddr
	gc.Concurrency, gc.Batch = sc.senders, sc.batch
	if gc.Protocol == "http" {
		gc.Target = httpAddr
	}
	g, err := loadgen.NewGenerator(gc, nonce)
	if err != nil {
		return r, err
	}
	if c.prefill > 0 && gc.Concurrency > 0 {
		t0 := time.Now()
		if err := g.Prefill(ctx, uint64(c.prefill), t0.Add(3*time.Minute), c.prefillShape[0], c.prefillShape[1]); err != nil {
			return r, err
		}
		// A gateway with a queue may still be exporting the prefill: let it
		// drain, so that the window measures the load alone.
		loadgen.WaitDrain(sk, g.Stats.Snapshot().Spans, 3*time.Minute)
		r.Prefill = time.Since(t0).Seconds()
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { _ = g.Run(ctx, start.Add(c.warmup+c.duration)); close(done) }()
	wait := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-done:
		case <-gw.done:
		}
	}
	wait(c.warmup)
	p0 := takeProbe(g, sk, gw.pid)
	wait(c.duration)
	p1 := takeProbe(g, sk, gw.pid)
	if rss, err := loadgen.ProcStatusKB(gw.pid, "VmRSS"); err == nil {
		r.EndRSSMB = float64(rss) / 1024
	}
	<-done
	end := g.Stats.Snapshot()
	select {
	case <-gw.done:
		return r, fmt.Errorf("the gateway exited during the run: %w\n%s", gw.err, tail(logPath))
	default:
	}
	want := end.Spans
	if variant == with && sc.dup > 0 {
		want = end.Fresh
	}
	k := loadgen.WaitDrain(sk, want, 10*time.Second)
	if hwm, err := loadgen.ProcStatusKB(gw.pid, "VmHWM"); err == nil {
		r.PeakRSSMB = float64(hwm) / 1024
	}
	gw.stop()

	win := p1.gen.At.Sub(p0.gen.At).Seconds()
	spans := float64(p1.gen.Spans - p0.gen.Spans)
	r.Window = win
	r.Accepted = spans / win
	r.Delivered = float64(p1.sink.Spans-p0.sink.Spans) / win
	r.PointsIn = float64(p1.gen.Points-p0.gen.Points) / win
	r.PointsOut = float64(p1.sink.Points-p0.sink.Points) / win
	gwCPU := p1.gwCPU - p0.gwCPU
	if spans > 0 {
		r.CPUPerM = gwCPU / spans * 1e6
	}
	r.GatewayCores = gwCPU / win
	if q, n := loadgen.LatQuantiles(p0.gen.SpanLat, p1.gen.SpanLat, 0.5, 0.99); n > 0 {
		r.LatP50Ms, r.LatP99Ms = float64(q[0])/1e6, float64(q[1])/1e6
	}
	r.DriverCores = (p1.selfCPU - p0.selfCPU) / win
	r.OtherCores = max(0, (p1.busy-p0.busy)/win-r.GatewayCores-r.DriverCores)
	r.SentSpans, r.SentFresh, r.FailedReqs = end.Spans, end.Fresh, end.FailedReqs
	r.SinkSpans, r.SinkUnique = k.Spans, k.Distinct
	if err := g.Stats.Err(); err != nil {
		r.FirstError = err.Error()
	}
	r.Check = check(r, variant)
	if r.Check != "ok" {
		r.GatewayLogs = logPath
	}
	return r, nil
}

// check compares what the sink received with what the gateway accepted:
// without dedup every accepted span arrives; with it, every distinct span
// arrives exactly once.
func check(r runResult, variant string) string {
	var problems []string
	if r.SinkUnique != r.SentFresh {
		problems = append(problems, fmt.Sprintf("%d distinct spans arrived, %d were accepted", r.SinkUnique, r.SentFresh))
	}
	switch {
	case variant == without && r.SinkSpans != r.SentSpans:
		problems = append(problems, fmt.Sprintf("%d spans arrived, %d were accepted", r.SinkSpans, r.SentSpans))
	case variant == with && r.SinkSpans != r.SinkUnique:
		problems = append(problems, fmt.Sprintf("%d duplicate spans passed", r.SinkSpans-r.SinkUnique))
	}
	if r.FailedReqs > 0 {
		problems = append(problems, fmt.Sprintf("%d requests failed", r.FailedReqs))
	}
	if len(problems) == 0 {
		return "ok"
	}
	return strings.Join(problems, "; ")
}

// ceilingResult is the generator against the sink directly.
type ceilingResult struct {
	Dup         float64 `json:"dup"`
	Accepted    float64 `json:"accepted_per_s"`
	DriverCores float64 `json:"driver_cores"`
	CPUPerM     float64 `json:"driver_cpu_s_per_million_spans"`
}

func (c *abConfig) runCeiling(ctx context.Context, dup float64) (ceilingResult, error) {
	r := ceilingResult{Dup: dup}
	nonce := loadgen.NewNonce()
	sk, err := loadgen.StartSink("127.0.0.1:0", nonce)
	if err != nil {
		return r, err
	}
	defer sk.Close()
	gc := c.gen
	gc.Dup, gc.Rate, gc.Target = dup, 0, sk.Addr()
	gc.MetricStreams = 0
	g, err := loadgen.NewGenerator(gc, nonce)
	if err != nil {
		return r, err
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { _ = g.Run(ctx, start.Add(c.warmup+c.duration)); close(done) }()
	select {
	case <-time.After(c.warmup):
	case <-done:
	}
	s0, cpu0 := g.Stats.Snapshot(), must(loadgen.ProcCPU("self"))
	select {
	case <-time.After(c.duration):
	case <-done:
	}
	s1, cpu1 := g.Stats.Snapshot(), must(loadgen.ProcCPU("self"))
	<-done
	win := s1.At.Sub(s0.At).Seconds()
	spans := float64(s1.Spans - s0.Spans)
	r.Accepted = spans / win
	r.DriverCores = (cpu1 - cpu0) / win
	if spans > 0 {
		r.CPUPerM = (cpu1 - cpu0) / spans * 1e6
	}
	return r, g.Stats.Err()
}

func must(v float64, _ error) float64 { return v }

// waitQuiet waits until the machine's CPUs, less this process, were busy
// for fewer than below cores over half a second, or limit passes; it
// returns the last figure.
func waitQuiet(ctx context.Context, below float64, limit time.Duration) float64 {
	deadline := time.Now().Add(limit)
	for {
		b0, s0, t0 := must(loadgen.SystemBusy()), must(loadgen.ProcCPU("self")), time.Now()
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(500 * time.Millisecond):
		}
		secs := time.Since(t0).Seconds()
		other := (must(loadgen.SystemBusy()) - b0 - (must(loadgen.ProcCPU("self")) - s0)) / secs
		if other < below || time.Now().After(deadline) {
			return other
		}
	}
}

func runAB(ctx context.Context, c *abConfig, out, errOut io.Writer) error {
	began := time.Now()
	var ceilings []ceilingResult
	if c.ceiling {
		for _, d := range c.dups {
			if c.quietBelow > 0 {
				waitQuiet(ctx, c.quietBelow, c.quietWait)
			}
			cr, err := c.runCeiling(ctx, d)
			if err != nil {
				return fmt.Errorf("ceiling run: %w", err)
			}
			fmt.Fprintf(errOut, "ceiling dup=%s: generator → sink %.0f spans/s, driver %.2f cores, %.2f CPU s per million spans\n",
				pct(d), cr.Accepted, cr.DriverCores, cr.CPUPerM)
			ceilings = append(ceilings, cr)
		}
	}
	var results, discarded []runResult
	n := 0
	for _, ld := range c.loads {
		rate := ld.rate
		if ld.name == "fixed" && rate == 0 {
			rate = autoRate(results)
			fmt.Fprintf(errOut, "fixed rate: %.0f spans/s (half the median saturation throughput)\n", rate)
		}
		for _, dup := range c.dups {
			for _, cell := range c.shapes() {
				sc := scenario{load: ld.name, rate: rate, dup: dup, senders: cell[0], batch: cell[1]}
				rs, ds, err := c.runRounds(ctx, &n, sc, errOut)
				results, discarded = append(results, rs...), append(discarded, ds...)
				if err != nil {
					return err
				}
			}
		}
	}
	report := c.report(results, discarded, ceilings, time.Since(began))
	fmt.Fprint(out, report)
	if c.mdOut != "" {
		if err := os.WriteFile(c.mdOut, []byte(report), 0o644); err != nil {
			return err
		}
	}
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(struct {
			Ceilings  []ceilingResult `json:"ceilings"`
			Runs      []runResult     `json:"runs"`
			Discarded []runResult     `json:"discarded_runs"`
		}{ceilings, results, discarded}, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// shapes is every cell's senders and spans per request, in order.
func (c *abConfig) shapes() [][2]int {
	if len(c.x.cells) > 0 {
		return c.x.cells
	}
	var out [][2]int
	for _, n := range c.senders {
		for _, b := range c.batches {
			out = append(out, [2]int{n, b})
		}
	}
	return out
}

// runRounds runs scenario sc's rounds, each a pair of runs (without and
// with), interleaved; n numbers the runs.
func (c *abConfig) runRounds(ctx context.Context, n *int, sc scenario, errOut io.Writer) (results, discarded []runResult, err error) {
	if sc.load != "fixed" {
		sc.rate = 0
	}
	for round := 1; round <= c.rounds; round++ {
		variants := []string{without, with}
		if c.order == "abba" && round%2 == 0 {
			variants = []string{with, without}
		}
		for attempt := 0; ; attempt++ {
			var pair []runResult
			for _, v := range variants {
				if ctx.Err() != nil {
					return results, discarded, ctx.Err()
				}
				*n++
				if c.quietBelow > 0 {
					if busy := waitQuiet(ctx, c.quietBelow, c.quietWait); busy >= c.quietBelow {
						fmt.Fprintf(errOut, "the machine stayed busy (%.2f other cores) for %s: running anyway\n", busy, c.quietWait)
					}
				}
				r, err := c.runOne(ctx, *n, sc, v, round)
				if err != nil {
					return results, discarded, fmt.Errorf("run %d (%s, %d×%d, dup %s, %s, round %d): %w", *n, sc.load, sc.senders, sc.batch, pct(sc.dup), v, round, err)
				}
				pair = append(pair, r)
				fmt.Fprintf(errOut, "[%d] %-5s %s dup=%-3s %-7s r%d/%d: accepted %7.0f/s delivered %7.0f/s  gw %.2f s/M spans, %.2f cores, p50 %.2f ms p99 %.2f ms, peak RSS %.0f MB  driver %.2f cores  other %.2f cores  %s\n",
					*n, sc.load, shapeName(sc.senders, sc.batch), pct(sc.dup), v, round, c.rounds, r.Accepted, r.Delivered, r.CPUPerM, r.GatewayCores, r.LatP50Ms, r.LatP99Ms, r.PeakRSSMB, r.DriverCores, r.OtherCores, r.Check)
			}
			busiest := max(pair[0].OtherCores, pair[1].OtherCores)
			if c.maxOther > 0 && busiest > c.maxOther && attempt < c.retries {
				fmt.Fprintf(errOut, "round %d discarded: other processes used %.2f cores (above -max-other %.2f); running the pair again\n", round, busiest, c.maxOther)
				for i := range pair {
					pair[i].Discarded = true
				}
				discarded = append(discarded, pair...)
				continue
			}
			results = append(results, pair...)
			break
		}
	}
	return results, discarded, nil
}

// shapeName is a cell's shape: senders × spans per request.
func shapeName(senders, batch int) string { return fmt.Sprintf("%d×%d", senders, batch) }

// autoRate is half the median saturation throughput over every saturation
// run (either variant, any duplicate share), rounded down to 1000 spans/s.
func autoRate(results []runResult) float64 {
	var sat []float64
	for _, r := range results {
		if r.Load == "sat" {
			sat = append(sat, r.Accepted)
		}
	}
	return max(1000, float64(int(median(sat)/2/1000))*1000)
}

type scenarioKey struct {
	load    string
	rate    float64
	dup     float64
	senders int
	batch   int
}

func keyOf(r runResult) scenarioKey { return scenarioKey{r.Load, r.Rate, r.Dup, r.Senders, r.Batch} }

func scenarioKeys(results []runResult) []scenarioKey {
	var keys []scenarioKey
	for _, r := range results {
		k := keyOf(r)
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func pick(results []runResult, k scenarioKey, variant string, f func(runResult) float64) []float64 {
	var v []float64
	for _, r := range results {
		if keyOf(r) == k && r.Variant == variant {
			v = append(v, f(r))
		}
	}
	return v
}

// pairedRatios is with/without per round.
func pairedRatios(results []runResult, k scenarioKey, f func(runResult) float64) []float64 {
	byRound := map[int][2]float64{}
	for _, r := range results {
		if keyOf(r) != k {
			continue
		}
		p := byRound[r.Round]
		if r.Variant == without {
			p[0] = f(r)
		} else {
			p[1] = f(r)
		}
		byRound[r.Round] = p
	}
	var out []float64
	for _, p := range byRound {
		if p[0] > 0 && p[1] > 0 {
			out = append(out, p[1]/p[0])
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f–%.3f", slices.Min(v), slices.Max(v))
}

func pct(d float64) string { return strconv.FormatFloat(d*100, 'f', -1, 64) + "%" }

// loadName is a scenario's shape and load: "16×512 saturation",
// "1×64 fixed 10k/s".
func loadName(k scenarioKey) string {
	load := "saturation"
	if k.load == "fixed" {
		load = fmt.Sprintf("fixed %sk/s", strconv.FormatFloat(k.rate/1000, 'f', -1, 64))
	}
	return shapeName(k.senders, k.batch) + " " + load
}

func passFail(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (c *abConfig) report(results, discarded []runResult, ceilings []ceilingResult, took time.Duration) string {
	var b strings.Builder
	host, _ := os.Hostname()
	mem, _ := procStatusKBFile("/proc/meminfo", "MemTotal")
	fmt.Fprintf(&b, "bench/ab: %d rounds (%s), prefill %d spans (%s) + warmup %s + window %s per run, %s, senders %v × spans per request %v, dup mode %s, max_spans %d, exporter queue %d, took %s\n",
		c.rounds, c.order, c.prefill, shapeName(c.prefillShape[0], c.prefillShape[1]), c.warmup, c.duration, c.gen.Protocol, c.senders, c.batches, c.gen.DupMode, c.maxSpans, c.queueSize, took.Round(time.Second))
	pin := "not pinned"
	if c.gatewayCPUs != "" {
		pin = "gateway pinned to CPU " + c.gatewayCPUs
	}
	fmt.Fprintf(&b, "machine: %s, %d CPUs (%s), %.1f GiB; driver on %d of them, GOMAXPROCS %d; %s\n\n",
		host, loadgen.OnlineCPUs(), loadgen.CPUModel(), float64(mem)/1024/1024, runtime.NumCPU(), runtime.GOMAXPROCS(0), pin)
	if c.pair == "default" {
		b.WriteString("Pair: **without** = a stock durable collector (otlp → memory_limiter → batch → otlp_grpc with a file_storage sending queue); **with** = `doubletake run --upstream` with its embedded default (memory_limiter → dedup, journaled, nested detection on → dedup_otlp_grpc with a persistent bytes-sized queue). The exporter-queue and max_spans figures above apply to -pair dedup only; the default's window is its own (2M spans).\n\n")
		if !c.nested {
			b.WriteString("The default's nested-duplicate detection was turned off (-default-nested=false).\n\n")
		}
	}
	if len(ceilings) > 0 {
		b.WriteString("Generator ceiling (generator → counting sink in this process, no gateway):\n\n")
		b.WriteString("| dup | spans/s | driver cores | driver CPU s / M spans |\n|---|---:|---:|---:|\n")
		for _, cr := range ceilings {
			fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f |\n", pct(cr.Dup), cr.Accepted, cr.DriverCores, cr.CPUPerM)
		}
		b.WriteString("\n")
	}
	keys := scenarioKeys(results)
	acc := func(r runResult) float64 { return r.Accepted }
	del := func(r runResult) float64 { return r.Delivered }
	cpu := func(r runResult) float64 { return r.CPUPerM }
	rss := func(r runResult) float64 { return r.PeakRSSMB }
	endRSS := func(r runResult) float64 { return r.EndRSSMB }
	cores := func(r runResult) float64 { return r.GatewayCores }
	drv := func(r runResult) float64 { return r.DriverCores }
	oth := func(r runResult) float64 { return r.OtherCores }

	b.WriteString("Throughput: spans/s accepted by the gateway (the generator's successful sends) and delivered to the sink; medians over rounds.\n\n")
	b.WriteString("| load | dup | accepted without | accepted with | ratio with/without (of medians) | paired ratio median (range) | delivered without | delivered with |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		aw, ab := median(pick(results, k, without, acc)), median(pick(results, k, with, acc))
		pr := pairedRatios(results, k, acc)
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.3f | %.3f (%s) | %.0f | %.0f |\n", loadName(k), pct(k.dup), aw, ab, ratio(ab, aw),
			median(pr), spread(pr), median(pick(results, k, without, del)), median(pick(results, k, with, del)))
	}
	b.WriteString("\nGateway CPU: CPU seconds (user + system, /proc/PID/stat) per million spans accepted, medians; added = with/without − 1.\n\n")
	b.WriteString("| load | dup | CPU s/M without | CPU s/M with | added (of medians) | paired added median (range) | gateway cores without | with |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		cw, cb := median(pick(results, k, without, cpu)), median(pick(results, k, with, cpu))
		pr := pairedRatios(results, k, cpu)
		for i := range pr {
			pr[i]--
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %+.1f%% | %+.1f%% (%s) | %.2f | %.2f |\n", loadName(k), pct(k.dup), cw, cb, (ratio(cb, cw)-1)*100,
			median(pr)*100, spreadPct(pr), median(pick(results, k, without, cores)), median(pick(results, k, with, cores)))
	}
	lat50 := func(r runResult) float64 { return r.LatP50Ms }
	lat99 := func(r runResult) float64 { return r.LatP99Ms }
	b.WriteString("\nAnswer latency: ms from a span request's send to its answer (within 4%), in the window; medians over rounds.\n\n")
	b.WriteString("| load | dup | p50 without | p50 with | p99 without | p99 with |\n|---|---|---:|---:|---:|---:|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f | %.2f |\n", loadName(k), pct(k.dup),
			median(pick(results, k, without, lat50)), median(pick(results, k, with, lat50)),
			median(pick(results, k, without, lat99)), median(pick(results, k, with, lat99)))
	}
	b.WriteString("\nGateway memory (MB, medians: VmHWM over the whole run, prefill included; VmRSS at the end of the window) and what else used the CPUs (cores, medians):\n\n")
	b.WriteString("| load | dup | peak RSS without | peak RSS with | RSS at end without | with | driver cores without | with | other cores without | with |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n", loadName(k), pct(k.dup),
			median(pick(results, k, without, rss)), median(pick(results, k, with, rss)),
			median(pick(results, k, without, endRSS)), median(pick(results, k, with, endRSS)),
			median(pick(results, k, without, drv)), median(pick(results, k, with, drv)),
			median(pick(results, k, without, oth)), median(pick(results, k, with, oth)))
	}
	if c.gen.MetricStreams > 0 {
		pin := func(r runResult) float64 { return r.PointsIn }
		pout := func(r runResult) float64 { return r.PointsOut }
		fmt.Fprintf(&b, "\nMetric points (%d streams × %d writers, every %s): accepted and delivered per second, medians.\n\n", c.gen.MetricStreams, c.gen.Writers, c.gen.MetricInterval)
		b.WriteString("| load | dup | accepted without | accepted with | delivered without | delivered with |\n|---|---|---:|---:|---:|---:|\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.0f |\n", loadName(k), pct(k.dup),
				median(pick(results, k, without, pin)), median(pick(results, k, with, pin)),
				median(pick(results, k, without, pout)), median(pick(results, k, with, pout)))
		}
	}
	if c.x.fresh > 0 {
		b.WriteString(freshTable(results, keys, c.x.fresh))
	}
	if c.pair == "default" {
		b.WriteString(matrixTable(results, keys))
	} else {
		b.WriteString("\nTargets: throughput with dedup ≥ 0.95 of without; CPU per span added by dedup ≤ 5% of the pipeline's (paired medians).\n\n")
		b.WriteString("| load | dup | throughput ratio | target | CPU added | target |\n|---|---|---:|---|---:|---|\n")
		for _, k := range keys {
			tr := median(pairedRatios(results, k, acc))
			cr := median(pairedRatios(results, k, cpu)) - 1
			fmt.Fprintf(&b, "| %s | %s | %.3f | %s | %+.1f%% | %s |\n", loadName(k), pct(k.dup), tr, passFail(tr >= 0.95), cr*100, passFail(cr <= 0.05))
		}
	}
	bad := 0
	for _, r := range results {
		if r.Check != "ok" {
			bad++
			fmt.Fprintf(&b, "\ncheck failed: %s dup=%s %s round %d: %s (first error: %s; log %s)", r.Load, pct(r.Dup), r.Variant, r.Round, r.Check, r.FirstError, r.GatewayLogs)
		}
	}
	if len(discarded) > 0 {
		fmt.Fprintf(&b, "\n%d pairs were discarded and run again because other processes used more than %.2f cores during them (in the JSON as discarded_runs).\n", len(discarded)/2, c.maxOther)
	}
	if bad == 0 {
		fmt.Fprintf(&b, "\nDelivery check: in all %d runs every accepted span reached the sink (without dedup) and every distinct span exactly once (with dedup); no request failed.\n", len(results))
	} else {
		b.WriteString("\n")
	}
	return b.String()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func spreadPct(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f%% to %+.1f%%", slices.Min(v)*100, slices.Max(v)*100)
}

func procStatusKBFile(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}
