package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
