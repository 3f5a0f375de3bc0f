package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

// abExtra holds the flags of the closed-loop and fresh-process cells.
type abExtra struct {
	// cells, when set, are the shapes run instead of -senders × -batches:
	// "1x64,1x512,2x512".
	cells [][2]int
	// fresh, when positive, makes every run a fresh-process run: the
	// gateway starts, and the measured window is its first fresh spans
	// (no prefill, no warmup), sent closed loop in the cell's shape.
	fresh int
}

// register registers the flags of abExtra on fs.
func (x *abExtra) register(fs *flag.FlagSet) {
	fs.Func("cells", "the cells' shapes, a list of SENDERSxSPANS (1x64,1x512,2x512), run instead of -senders × -batches; at load sat each sender sends its next request when the last is answered (closed loop)", func(s string) error {
		cells, err := parseCells(s)
		x.cells = cells
		return err
	})
	fs.IntVar(&x.fresh, "fresh", 0, "fresh-process cell: measure each run over the first N spans a newly started gateway accepts (no prefill, no warmup; -duration is ignored), closed loop in the cell's shape; its time to healthy and RSS when healthy are reported too")
}

// parseCells parses "1x64,2x512" (× works too).
func parseCells(s string) ([][2]int, error) {
	var out [][2]int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "×", "x"))
		a, b, ok := strings.Cut(f, "x")
		n, err1 := strconv.Atoi(a)
		m, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || m < 1 {
			return nil, fmt.Errorf("cell %q: want SENDERSxSPANS, both positive", f)
		}
		out = append(out, [2]int{n, m})
	}
	return out, nil
}

// The closed-loop single-sender cells of docs/benchmarks.md: a lone
// sender (an SDK's batch processor exports one batch at a time) and two,
// each sending its next request when the last is answered.
const closedCells = "1x64,1x512,2x512"

func init() {
	matrixPresets["closed"] = map[string]string{
		"pair": "default", "cells": closedCells, "loads": "sat",
		"dups": "0", "rounds": "5", "order": "abba", "warmup": "2s", "duration": "8s", "ceiling": "false",
		"prefill": "500000",
	}
	// fresh: the dedup processor against the same pipeline without it,
	// over the first 1M spans of a new process (16 closed-loop senders of
	// 1000 spans, the prefill's shape).
	matrixPresets["fresh"] = map[string]string{
		"pair": "dedup", "cells": "16x1000", "loads": "sat", "fresh": "1000000",
		"dups": "0", "rounds": "5", "order": "abba", "ceiling": "false",
	}
}

// freshStart is what a fresh run records of the gateway's start.
type freshStart struct {
	HealthyS float64 `json:"time_to_healthy_s"`
	RSSMB    float64 `json:"rss_when_healthy_mb"`
	// MinFltPerM is the gateway's minor page faults per million spans
	// over the window (/proc/PID/stat minflt): a count the machine's
	// other load does not move, where CPU seconds do.
	MinFltPerM float64 `json:"minor_faults_per_million_spans"`
}

// minorFaults is field 10 of /proc/PID/stat.
func minorFaults(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 8 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[7], 64)
	return v
}

// runFresh runs one variant of scenario sc as a fresh-process run: the
// gateway's CPU from healthy until it has accepted c.x.fresh spans, sent
// as fast as answered by sc.senders senders of sc.batch spans.
func (c *abConfig) runFresh(ctx context.Context, n int, sc scenario, variant string, round int) (runResult, error) {
	r := runResult{Load: sc.load, Dup: sc.dup, Senders: sc.senders, Batch: sc.batch, Variant: variant, Round: round}
	if sc.dup != 0 {
		return r, errors.New("-fresh sends new spans only: use -dups 0")
	}
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
		if cfg, err = c.defaultPairConfig(ctx, variant, addrs, sk.Addr(), dataDir); err != nil {
			return r, err
		}
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return r, err
	}
	t0 := time.Now()
	gw, err := c.startGateway(ctx, cfgPath, logPath, health)
	if err != nil {
		return r, err
	}
	defer gw.stop()
	healthy := time.Since(t0).Seconds()
	rss0, _ := loadgen.ProcStatusKB(gw.pid, "VmRSS")
	gc := c.gen
	gc.Dup, gc.Rate, gc.Target = 0, 0, grpcAddr
	gc.Concurrency, gc.Batch = sc.senders, sc.batch
	if gc.Protocol == "http" {
		gc.Target = httpAddr
	}
	g, err := loadgen.NewGenerator(gc, nonce)
	if err != nil {
		return r, err
	}
	f0 := minorFaults(gw.pid)
	p0 := takeProbe(g, sk, gw.pid)
	if err := g.Prefill(ctx, uint64(c.x.fresh), time.Now().Add(10*time.Minute), sc.senders, sc.batch); err != nil {
		return r, err
	}
	p1 := takeProbe(g, sk, gw.pid)
	f1 := minorFaults(gw.pid)
	if rss, err := loadgen.ProcStatusKB(gw.pid, "VmRSS"); err == nil {
		r.EndRSSMB = float64(rss) / 1024
	}
	end := g.Stats.Snapshot()
	k := loadgen.WaitDrain(sk, end.Spans, loadgen.DrainQuiet, time.Minute)
	if hwm, err := loadgen.ProcStatusKB(gw.pid, "VmHWM"); err == nil {
		r.PeakRSSMB = float64(hwm) / 1024
	}
	select {
	case <-gw.done:
		return r, fmt.Errorf("the gateway exited during the run: %w\n%s", gw.err, tail(logPath))
	default:
	}
	gw.stop()
	win := p1.gen.At.Sub(p0.gen.At).Seconds()
	spans := float64(p1.gen.Spans - p0.gen.Spans)
	r.Window = win
	r.Accepted = spans / win
	r.Delivered = float64(p1.sink.Spans-p0.sink.Spans) / win
	gwCPU := p1.gwCPU - p0.gwCPU
	if spans > 0 {
		r.CPUPerM = gwCPU / spans * 1e6
	}
	r.GatewayCores = gwCPU / win
	if q, m := loadgen.LatQuantiles(p0.gen.SpanLat, p1.gen.SpanLat, 0.5, 0.99); m > 0 {
		r.LatP50Ms, r.LatP99Ms = float64(q[0])/1e6, float64(q[1])/1e6
	}
	r.DriverCores = (p1.selfCPU - p0.selfCPU) / win
	r.OtherCores = max(0, (p1.busy-p0.busy)/win-r.GatewayCores-r.DriverCores)
	r.SentSpans, r.SentFresh, r.FailedReqs = end.Spans, end.Fresh, end.FailedReqs
	r.SinkSpans, r.SinkUnique = k.Spans, k.Distinct
	r.Start = &freshStart{HealthyS: healthy, RSSMB: float64(rss0) / 1024}
	if spans > 0 {
		r.Start.MinFltPerM = (f1 - f0) / spans * 1e6
	}
	if err := g.Stats.Err(); err != nil {
		r.FirstError = err.Error()
	}
	r.Check = check(r, variant)
	if r.Check != "ok" {
		r.GatewayLogs = logPath
	}
	return r, nil
}

// freshTable is, for -fresh, one row per cell: CPU per span of both
// variants over the first spans of a new process, their paired ratio,
// the answer times, and each variant's time to healthy and RSS when
// healthy (medians over rounds).
func freshTable(results []runResult, keys []scenarioKey, spans int) string {
	var b strings.Builder
	cpu := func(r runResult) float64 { return r.CPUPerM }
	p50 := func(r runResult) float64 { return r.LatP50Ms }
	p99 := func(r runResult) float64 { return r.LatP99Ms }
	hs := func(r runResult) float64 {
		if r.Start == nil {
			return 0
		}
		return r.Start.HealthyS
	}
	rss := func(r runResult) float64 {
		if r.Start == nil {
			return 0
		}
		return r.Start.RSSMB
	}
	flt := func(r runResult) float64 {
		if r.Start == nil {
			return 0
		}
		return r.Start.MinFltPerM
	}
	fmt.Fprintf(&b, "\nFresh process: gateway CPU µs per span over the first %d spans of a new process (medians over rounds), the paired ratio with/without (median, range), target ≤ %.2f; p50 and p99 answer times (ms); time to healthy (s), RSS when healthy (MB) and minor page faults per 1k spans in the window.\n\n", spans, matrixTarget)
	b.WriteString("| senders × spans | µs/span without | µs/span with | ratio (range) | target | p50 without | p50 with | p99 without | p99 with | healthy without | with | RSS at start without | with | faults/1k spans without | with |\n")
	b.WriteString("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		pr := pairedRatios(results, k, cpu)
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | **%.3f** (%s) | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f | %.1f |\n",
			shapeName(k.senders, k.batch),
			median(pick(results, k, without, cpu)), median(pick(results, k, with, cpu)), median(pr), spread(pr), passFail(median(pr) <= matrixTarget),
			median(pick(results, k, without, p50)), median(pick(results, k, with, p50)),
			median(pick(results, k, without, p99)), median(pick(results, k, with, p99)),
			median(pick(results, k, without, hs)), median(pick(results, k, with, hs)),
			median(pick(results, k, without, rss)), median(pick(results, k, with, rss)),
			median(pick(results, k, without, flt))/1000, median(pick(results, k, with, flt))/1000)
	}
	return b.String()
}
