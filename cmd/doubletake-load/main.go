// Command doubletake-load is an OTLP load generator with a counting sink
// (internal/loadgen). The gateway A/B driver that runs them against
// `doubletake run` is bench/ab.
//
//	doubletake-load gen  [flags]   send load to a gateway, or to an in-process sink (the ceiling)
//	doubletake-load sink [flags]   run a counting sink for a while
//
// Every run stops by itself (its duration), and traffic only goes to
// loopback addresses. Requests are encoded before the load starts: a
// request is the template's bytes with 24 bytes of ids written per span.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

const usage = `usage: doubletake-load <command> [flags]

commands:
  gen    send OTLP load to -target (a gateway), or with -target self to an
         in-process counting sink: the generator's own ceiling
  sink   run a counting OTLP sink (gRPC and HTTP on one port) for -duration

The gateway A/B driver is bench/ab (bench/ab.sh runs it).

'doubletake-load <command> -h' lists a command's flags.
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(errOut, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch args[0] {
	case "gen":
		err = genMain(ctx, args[1:], out, errOut)
	case "sink":
		err = sinkMain(ctx, args[1:], out, errOut)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(out, usage)
		return 0
	default:
		fmt.Fprintf(errOut, "unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(errOut, "doubletake-load:", err)
		return 1
	}
	return 0
}

func genMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var c loadgen.Config
	loadgen.RegisterFlags(fs, &c, false)
	target := fs.String("target", "self", "gateway OTLP endpoint host:port (loopback only), or self: an in-process counting sink, to measure the generator's ceiling")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	warmup := fs.Duration("warmup", time.Second, "sent before the measured window, not counted in the rates")
	nonce := fs.Uint64("nonce", 0, "run id in every trace id (0: random); a standalone sink counts distinct spans of this id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gen takes no arguments, got %q", fs.Args())
	}
	if *duration <= 0 || *duration > time.Hour || *warmup < 0 {
		return errors.New("duration must be in (0, 1h] and warmup not negative")
	}
	if *nonce == 0 {
		*nonce = loadgen.NewNonce()
	}
	var sk *loadgen.Sink
	if *target == "self" {
		var err error
		if sk, err = loadgen.StartSink("127.0.0.1:0", *nonce); err != nil {
			return err
		}
		defer sk.Close()
		c.Target = sk.Addr()
	} else {
		c.Target = *target
	}
	g, err := loadgen.NewGenerator(c, *nonce)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "doubletake-load gen: %s to %s, rate %s, batch %d, dup %.0f%% (%s), concurrency %d, metric streams %d × %d writers, warmup %s, duration %s, GOMAXPROCS %d, nonce %d\n",
		c.Protocol, c.Target, rateString(c.Rate), c.Batch, c.Dup*100, c.DupMode, c.Concurrency, c.MetricStreams, c.Writers, *warmup, *duration, runtime.GOMAXPROCS(0), *nonce)
	start := time.Now()
	done := make(chan struct{})
	go func() { _ = g.Run(ctx, start.Add(*warmup+*duration)); close(done) }()
	var s0, s1 loadgen.Snapshot
	var cpu0, cpu1 float64
	var k0, k1 loadgen.Counts
	snap := func(s *loadgen.Snapshot, cpu *float64, k *loadgen.Counts) {
		*s = g.Stats.Snapshot()
		*cpu, _ = loadgen.ProcCPU("self")
		if sk != nil {
			*k = sk.Counts()
		}
	}
	select {
	case <-time.After(*warmup):
	case <-done:
	}
	snap(&s0, &cpu0, &k0)
	select {
	case <-time.After(*duration):
	case <-done:
	}
	snap(&s1, &cpu1, &k1)
	<-done
	win := s1.At.Sub(s0.At).Seconds()
	acc := float64(s1.Spans-s0.Spans) / win
	fmt.Fprintf(out, "accepted:  %.0f spans/s (%d requests, %d spans, %d copies in the window of %.1fs); %.0f points/s\n",
		acc, s1.SpanReqs-s0.SpanReqs, s1.Spans-s0.Spans, s1.Copies-s0.Copies, win, float64(s1.Points-s0.Points)/win)
	if sk != nil {
		fmt.Fprintf(out, "sink:      %.0f spans/s received, %.0f distinct/s; %.0f points/s\n",
			float64(k1.Spans-k0.Spans)/win, float64(k1.Distinct-k0.Distinct)/win, float64(k1.Points-k0.Points)/win)
	}
	if q, n := loadgen.LatQuantiles(s0.SpanLat, s1.SpanLat, 0.5, 0.99); n > 0 {
		fmt.Fprintf(out, "latency:   span requests answered in p50 %s, p99 %s (%d requests)\n", fmtLat(q[0]), fmtLat(q[1]), n)
	}
	if spans := s1.Spans - s0.Spans; spans > 0 {
		fmt.Fprintf(out, "this process: %.2f CPU s per million spans (%.2f cores)\n", (cpu1-cpu0)/float64(spans)*1e6, (cpu1-cpu0)/win)
	}
	end := g.Stats.Snapshot()
	fmt.Fprintf(out, "totals:    %d spans accepted (%d fresh, %d copies), %d requests failed; %d points accepted, %d failed\n",
		end.Spans, end.Fresh, end.Copies, end.FailedReqs, end.Points, end.FailedPoints)
	if sk != nil {
		k := loadgen.WaitDrain(sk, end.Spans, loadgen.DrainQuiet, time.Minute)
		fmt.Fprintf(out, "sink totals: %d spans, %d distinct, %d of other runs; %d points\n", k.Spans, k.Distinct, k.Foreign, k.Points)
	}
	if err := g.Stats.Err(); err != nil {
		fmt.Fprintf(out, "first error: %v\n", err)
	}
	return nil
}

func rateString(r float64) string {
	if r == 0 {
		return "saturating"
	}
	return fmt.Sprintf("%.0f spans/s", r)
}

func sinkMain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	fs.SetOutput(errOut)
	listen := fs.String("listen", "127.0.0.1:4319", "address to listen on (loopback only)")
	duration := fs.Duration("duration", time.Minute, "how long to run")
	every := fs.Duration("every", time.Second, "how often to print the counts")
	nonce := fs.Uint64("nonce", 0, "count distinct spans of the generator run with this -nonce")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loadgen.CheckLoopback(*listen); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 24*time.Hour || *every <= 0 {
		return errors.New("duration must be in (0, 24h] and every positive")
	}
	sk, err := loadgen.StartSink(*listen, *nonce)
	if err != nil {
		return err
	}
	defer sk.Close()
	fmt.Fprintf(out, "sink on %s for %s\n", sk.Addr(), *duration)
	end := time.After(*duration)
	t := time.NewTicker(*every)
	defer t.Stop()
	prev, prevAt := sk.Counts(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end:
			k := sk.Counts()
			fmt.Fprintf(out, "total: %d requests, %d spans (%d distinct of nonce %d), %d points, %d log records\n",
				k.Requests, k.Spans, k.Distinct, *nonce, k.Points, k.Logs)
			return nil
		case now := <-t.C:
			k := sk.Counts()
			s := now.Sub(prevAt).Seconds()
			fmt.Fprintf(out, "%s  %8.0f spans/s  %8.0f distinct/s  %8.0f points/s  (total %d spans)\n",
				now.Format("15:04:05"), float64(k.Spans-prev.Spans)/s, float64(k.Distinct-prev.Distinct)/s, float64(k.Points-prev.Points)/s, k.Spans)
			prev, prevAt = k, now
		}
	}
}

// fmtLat prints a latency in milliseconds, 2 decimals.
func fmtLat(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
