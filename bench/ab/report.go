package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

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
