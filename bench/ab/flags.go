package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

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
