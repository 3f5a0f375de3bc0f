package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

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
		loadgen.WaitDrain(sk, g.Stats.Snapshot().Spans, loadgen.DrainQuiet, 3*time.Minute)
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
	k := loadgen.WaitDrain(sk, want, loadgen.DrainQuiet, time.Minute)
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
