package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doubletake/doubletake/internal/capture"
)

// Config is what the load generator sends.
type Config struct {
	Target      string  // host:port, loopback only
	Protocol    string  // grpc or http
	Rate        float64 // spans/s over all span senders; 0 saturates
	Batch       int     // spans per request
	Dup         float64 // share of spans sent that are copies of spans sent before, [0, 1)
	DupMode     DupMode
	Concurrency int // span senders, each with its own connection and one request in flight

	MetricStreams  int           // metric streams; 0 sends no metrics
	Writers        int           // writers per stream, each with its own start time
	MetricInterval time.Duration // each writer exports all its streams every interval; 0 saturates
	MetricBatch    int           // points per metric request
}

// Validate checks the config; the target must be a loopback address.
func (c *Config) Validate() error {
	var errs []error
	if c.Protocol != "grpc" && c.Protocol != "http" {
		errs = append(errs, fmt.Errorf("protocol %q: want grpc or http", c.Protocol))
	}
	if c.Rate < 0 {
		errs = append(errs, errors.New("rate must not be negative"))
	}
	if c.Batch < 1 || c.Batch > 100_000 {
		errs = append(errs, fmt.Errorf("batch %d: want 1 to 100000", c.Batch))
	}
	if c.Dup < 0 || c.Dup >= 1 {
		errs = append(errs, fmt.Errorf("dup %v: want a share in [0, 1)", c.Dup))
	}
	if c.DupMode != DupBatch && c.DupMode != DupMixed {
		errs = append(errs, fmt.Errorf("dup-mode %q: want batch or mixed", c.DupMode))
	}
	if c.Concurrency < 0 || c.Concurrency > 1024 {
		errs = append(errs, fmt.Errorf("concurrency %d: want 0 to 1024", c.Concurrency))
	}
	if c.MetricStreams < 0 || c.Writers < 0 || c.Writers > 1024 || c.MetricBatch < 0 || c.MetricInterval < 0 {
		errs = append(errs, errors.New("metric streams, writers (≤ 1024), metric batch and interval must not be negative"))
	}
	if c.MetricStreams > 0 && (c.Writers < 1 || c.MetricBatch < 1) {
		errs = append(errs, errors.New("with metric streams, writers and metric batch must be at least 1"))
	}
	if c.Concurrency == 0 && c.MetricStreams == 0 {
		errs = append(errs, errors.New("nothing to send: concurrency and metric streams are both 0"))
	}
	errs = append(errs, CheckLoopback(c.Target))
	return errors.Join(errs...)
}

// Stats counts what the generator sent; every field is read while it
// runs.
type Stats struct {
	spanReqs     atomic.Uint64 // span requests accepted
	spans        atomic.Uint64 // spans accepted (fresh and copies)
	copies       atomic.Uint64 // of which copies
	fresh        atomic.Uint64 // of which fresh
	failedReqs   atomic.Uint64 // span requests refused or not answered
	failedSpans  atomic.Uint64
	pointReqs    atomic.Uint64
	points       atomic.Uint64 // metric points accepted
	failedPoints atomic.Uint64
	// spanLat holds the latency of every span request answered.
	spanLat latHist

	mu       sync.Mutex
	firstErr error
}

func (s *Stats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstErr == nil {
		s.firstErr = err
	}
}

// Err is the first error a request met, or nil.
func (s *Stats) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

// Snapshot is what Stats counted up to At.
type Snapshot struct {
	At                              time.Time
	SpanReqs, Spans, Copies, Fresh  uint64
	FailedReqs, FailedSpans         uint64
	PointReqs, Points, FailedPoints uint64
	SpanLat                         []uint64 // latHist buckets
}

// Snapshot reads the counts now.
func (s *Stats) Snapshot() Snapshot {
	return Snapshot{
		At: time.Now(), SpanReqs: s.spanReqs.Load(), Spans: s.spans.Load(), Copies: s.copies.Load(), Fresh: s.fresh.Load(),
		FailedReqs: s.failedReqs.Load(), FailedSpans: s.failedSpans.Load(),
		PointReqs: s.pointReqs.Load(), Points: s.points.Load(), FailedPoints: s.failedPoints.Load(),
		SpanLat: s.spanLat.snapshot(),
	}
}

// Generator holds the pre-built templates and the connections of one run.
type Generator struct {
	cfg     Config
	nonce   uint64
	spans   *spanTemplate
	metrics [][]*metricTemplate // per writer
	seq     atomic.Uint64       // last sequence number handed out
	Stats   Stats
}

// NewGenerator validates cfg and encodes its request templates; nonce is
// the run id in every trace id.
func NewGenerator(cfg Config, nonce uint64) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, nonce: nonce}
	var err error
	if cfg.Concurrency > 0 {
		if g.spans, err = newSpanTemplate(cfg.Batch); err != nil {
			return nil, err
		}
	}
	for w := range cfg.Writers * min(cfg.MetricStreams, 1) {
		ts, err := newMetricTemplates(w, cfg.MetricStreams, cfg.MetricBatch)
		if err != nil {
			return nil, err
		}
		g.metrics = append(g.metrics, ts)
	}
	return g, nil
}

func (g *Generator) alloc(n int) uint64 { return g.seq.Add(uint64(n)) - uint64(n) + 1 }

func (g *Generator) newPlanner() *planner {
	return &planner{batch: g.cfg.Batch, dup: g.cfg.Dup, mode: g.cfg.DupMode, alloc: g.alloc}
}

// Run sends until the deadline (or ctx ends) and returns when every sender
// has had its last answer. Requests in flight at the deadline finish (each
// within requestTimeout), so every span counted as accepted was answered.
func (g *Generator) Run(ctx context.Context, until time.Time) error {
	var senders []sender
	defer func() {
		for _, s := range senders {
			s.close()
		}
	}()
	for range g.cfg.Concurrency + len(g.metrics) {
		s, err := newSender(g.cfg.Protocol, g.cfg.Target)
		if err != nil {
			return err
		}
		senders = append(senders, s)
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	var wg sync.WaitGroup
	for i := range g.cfg.Concurrency {
		wg.Go(func() { g.spanWorker(ctx, senders[i], i) })
	}
	for w := range g.metrics {
		wg.Go(func() { g.metricWriter(ctx, senders[g.cfg.Concurrency+w], w) })
	}
	wg.Wait()
	return nil
}

// pacer spaces events interval apart from start; it never bursts more than
// a second's worth to catch up.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func (p *pacer) wait(ctx context.Context) bool {
	if p.interval <= 0 {
		return ctx.Err() == nil
	}
	now := time.Now()
	if now.Sub(p.next) > time.Second {
		p.next = now
	}
	if d := p.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	p.next = p.next.Add(p.interval)
	return ctx.Err() == nil
}

// spanWorker is sender i. At a fixed rate the senders' first requests are
// spread over one interval, so that requests arrive evenly, not in bursts
// of one per sender.
func (g *Generator) spanWorker(ctx context.Context, s sender, i int) {
	pl := g.newPlanner()
	var buf []byte
	pc := pacer{next: time.Now()}
	if g.cfg.Rate > 0 {
		perSender := g.cfg.Rate / float64(g.cfg.Concurrency)
		pc.interval = time.Duration(float64(time.Second) * float64(g.cfg.Batch) / perSender)
		pc.next = pc.next.Add(pc.interval * time.Duration(i) / time.Duration(g.cfg.Concurrency))
	}
	for pc.wait(ctx) {
		buf = g.sendSpans(s, g.spans, pl.next(), buf)
	}
}

// sendSpans builds the request of plan p from tmpl, sends it and counts
// the answer.
func (g *Generator) sendSpans(s sender, tmpl *spanTemplate, p plan, buf []byte) []byte {
	buf = tmpl.build(buf, p, g.nonce)
	rctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	t0 := time.Now()
	err := s.send(rctx, capture.Traces, buf)
	lat := time.Since(t0)
	cancel()
	n := uint64(tmpl.Batch())
	if err != nil {
		g.Stats.failedReqs.Add(1)
		g.Stats.failedSpans.Add(n)
		g.Stats.fail(err)
		return buf
	}
	g.Stats.spanLat.add(lat)
	g.Stats.spanReqs.Add(1)
	g.Stats.copies.Add(uint64(p.copies))
	g.Stats.fresh.Add(n - uint64(p.copies))
	g.Stats.spans.Add(n)
	return buf
}

// Prefill sends about n new spans (no copies) as fast as the target takes
// them, before the load that is measured, so that the dedup window is full
// and every new span evicts one, as in a gateway that has run for a while:
// senders senders with requests of batch spans, whatever the load's shape.
// It gives up at until. The spans count in the totals like any others.
func (g *Generator) Prefill(ctx context.Context, n uint64, until time.Time, senders, batch int) error {
	if senders < 1 || batch < 1 || batch > 100_000 {
		return fmt.Errorf("prefill: %d senders of %d spans: want at least 1 of 1 to 100000", senders, batch)
	}
	tmpl := g.spans
	if tmpl == nil || tmpl.Batch() != batch {
		var err error
		if tmpl, err = newSpanTemplate(batch); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, senders)
	for i := range senders {
		wg.Go(func() {
			s, err := newSender(g.cfg.Protocol, g.cfg.Target)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.close()
			pl := &planner{batch: batch, mode: DupBatch, alloc: g.alloc}
			var buf []byte
			for ctx.Err() == nil && g.seq.Load() < n {
				buf = g.sendSpans(s, tmpl, pl.next(), buf)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if g.seq.Load() < n {
		return fmt.Errorf("prefill: %d of %d spans sent by the deadline", g.seq.Load(), n)
	}
	return nil
}

func (g *Generator) metricWriter(ctx context.Context, s sender, w int) {
	var buf []byte
	pc := pacer{interval: g.cfg.MetricInterval, next: time.Now()}
	var tick int64
	for pc.wait(ctx) {
		tick++
		ts := uint64(time.Now().UnixNano())
		for _, t := range g.metrics[w] {
			buf = t.build(buf, ts, tick*10)
			rctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			err := s.send(rctx, capture.Metrics, buf)
			cancel()
			if err != nil {
				g.Stats.failedPoints.Add(uint64(t.Points()))
				g.Stats.fail(err)
				continue
			}
			g.Stats.pointReqs.Add(1)
			g.Stats.points.Add(uint64(t.Points()))
		}
	}
}
