// Command ab is the gateway A/B driver of docs/benchmarks.md: it runs
// `doubletake run` with two configs, interleaved over rounds, under the
// load of internal/loadgen into its counting sink, and reports throughput,
// CPU per span, answer latency and memory, as medians and paired ratios.
//
//	go run ./bench/ab [flags]      (bench/ab.sh builds both binaries and runs it)
//
// -pair dedup compares one pipeline without and with the dedup processor;
// -pair default a stock durable collector with the embedded --upstream
// default. Every run stops by itself, and traffic only goes to loopback
// addresses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := abMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "ab:", err)
		os.Exit(1)
	}
}
