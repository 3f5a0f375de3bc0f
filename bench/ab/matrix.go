package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
)

// The matrix of docs/benchmarks.md: the embedded --upstream default
// against a stock durable collector, CPU per accepted span and the time
// to an answer, in every cell of senders × spans per request × load.
const (
	matrixSenders = "1,2,16,64"
	matrixBatches = "64,512,8192"
	matrixLoads   = "sat,10000,40000"
	// matrixTarget is the most CPU per span the default may cost in a
	// cell, as a ratio to the stock collector's (paired medians).
	matrixTarget = 1.05
)

// matrixPresets are the flags -matrix sets, unless given as well: full is
// the figures' run (5 interleaved rounds, the window prefilled as in a
// gateway that has run for a while), quick a look at every cell in a
// fraction of the time (one round, short windows, a shorter prefill). A
// gateway measured cold pays for first touching its heap: the default,
// whose windows make its heap large, took 8 times the stock collector's
// page faults over a first 10 s and cost 1.7 times its CPU per span where
// warmed up it cost 0.8.
var matrixPresets = map[string]map[string]string{
	"full": {
		"pair": "default", "senders": matrixSenders, "batches": matrixBatches, "loads": matrixLoads,
		"dups": "0", "rounds": "5", "order": "abba", "warmup": "3s", "duration": "10s", "ceiling": "false",
	},
	"quick": {
		"pair": "default", "senders": matrixSenders, "batches": matrixBatches, "loads": matrixLoads,
		"dups": "0", "rounds": "1", "order": "abba", "warmup": "1s", "duration": "4s", "ceiling": "false",
		"prefill": "500000",
	},
}

// applyMatrix sets the flags of preset name that were not set explicitly.
func applyMatrix(fs *flag.FlagSet, name string, explicit map[string]bool) error {
	preset, ok := matrixPresets[name]
	if !ok {
		return fmt.Errorf("matrix %q: want full or quick", name)
	}
	for k, v := range preset {
		if explicit[k] {
			continue
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("matrix %s: -%s %s: %w", name, k, v, err)
		}
	}
	return nil
}

// matrixTable is, for -pair default, one row per cell: the CPU per
// accepted span of both sides (medians), their paired ratio (median and
// range), the throughput and the time to an answer of both sides, and
// whether the cell meets matrixTarget; then which cells do not, and which
// cost less than the stock collector.
func matrixTable(results []runResult, keys []scenarioKey) string {
	var b strings.Builder
	cpu := func(r runResult) float64 { return r.CPUPerM } // CPU s per M spans = µs per span
	acc := func(r runResult) float64 { return r.Accepted }
	p50 := func(r runResult) float64 { return r.LatP50Ms }
	p99 := func(r runResult) float64 { return r.LatP99Ms }
	fmt.Fprintf(&b, "\nThe matrix: gateway CPU µs per accepted span, stock durable collector and embedded default (medians over rounds), their paired ratio default/stock (median, range), target ≤ %.2f; accepted spans/s and the time to an answer of both (ms: medians over rounds of each run's p50 and p99).\n\n", matrixTarget)
	b.WriteString("| senders × spans | load | µs/span stock | µs/span default | ratio (range) | target | spans/s stock | default | p50 stock | p50 default | p99 stock | p99 default |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
	var over, below []string
	for _, k := range keys {
		pr := pairedRatios(results, k, cpu)
		ratio := median(pr)
		load := strings.TrimPrefix(loadName(k), shapeName(k.senders, k.batch)+" ")
		verdict := passFail(ratio <= matrixTarget)
		switch {
		case ratio > matrixTarget:
			over = append(over, fmt.Sprintf("%s %s (%.2f)", shapeName(k.senders, k.batch), load, ratio))
		case ratio < 1:
			below = append(below, fmt.Sprintf("%s %s (%.2f)", shapeName(k.senders, k.batch), load, ratio))
			verdict = "met, below 1"
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | **%.3f** (%s) | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n",
			shapeName(k.senders, k.batch), load,
			median(pick(results, k, without, cpu)), median(pick(results, k, with, cpu)), ratio, spread(pr), verdict,
			median(pick(results, k, without, acc)), median(pick(results, k, with, acc)),
			median(pick(results, k, without, p50)), median(pick(results, k, with, p50)),
			median(pick(results, k, without, p99)), median(pick(results, k, with, p99)))
	}
	fmt.Fprintf(&b, "\n%d of %d cells meet the target (≤ %.2f).", len(keys)-len(over), len(keys), matrixTarget)
	if len(over) > 0 {
		fmt.Fprintf(&b, " Above it: %s.", strings.Join(over, "; "))
	}
	if len(below) > 0 {
		slices.Sort(below)
		fmt.Fprintf(&b, " Below 1 (the default costs less than the stock collector): %s.", strings.Join(below, "; "))
	}
	b.WriteString("\n")
	b.WriteString(backlogTable(results, keys))
	return b.String()
}

// backlogSlack is how much more a side may accept than it delivers in a
// window before the cell is listed by backlogTable.
const backlogSlack = 1.05

// backlogTable lists the cells where a side accepted more than it
// delivered in some round (its queue grew during the window, so the
// delivery of that backlog is not in the window): both per-span ratios,
// per accepted span (the matrix's) and per delivered span (gateway CPU
// over the spans the sink received), the most accepted per delivered and
// the delivered spans/s of both. Empty when no cell grew a backlog.
func backlogTable(results []runResult, keys []scenarioKey) string {
	cpuAcc := func(r runResult) float64 { return r.CPUPerM }
	cpuDel := func(r runResult) float64 {
		if r.Delivered <= 0 {
			return 0
		}
		return r.GatewayCores / r.Delivered * 1e6
	}
	del := func(r runResult) float64 { return r.Delivered }
	var rows []string
	for _, k := range keys {
		most := 0.0
		for _, r := range results {
			if keyOf(r) == k && r.Delivered > 0 {
				most = max(most, r.Accepted/r.Delivered)
			}
		}
		if most <= backlogSlack {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s %s | %.3f | %.3f | %.2f | %.0f | %.0f |\n",
			shapeName(k.senders, k.batch), strings.TrimPrefix(loadName(k), shapeName(k.senders, k.batch)+" "),
			median(pairedRatios(results, k, cpuAcc)), median(pairedRatios(results, k, cpuDel)), most,
			median(pick(results, k, without, del)), median(pick(results, k, with, del))))
	}
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nCells where a side accepted more than %.2f times what it delivered in a round (its queue grew in the window; the backlog's delivery is not in it): the paired ratio default/stock per accepted span and per delivered span (gateway CPU over the spans the sink received), the most accepted per delivered, and the delivered spans/s of both (medians).\n\n", backlogSlack)
	b.WriteString("| cell | per accepted span | per delivered span | accepted / delivered (most) | delivered/s stock | delivered/s default |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		b.WriteString(r)
	}
	return b.String()
}
