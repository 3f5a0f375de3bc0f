package dedupprocessor

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/doubletake/doubletake/internal/streams"
)

// The tests of copies.go: a copy of items whose original is still in the
// next consumer is not answered before the original is. Each runs for
// spans and for log records. The next consumer is a gate that holds the
// request carrying the original until the test answers it; the tests
// synchronize on what the gate receives and on the copy's goroutine
// parking in its wait, never on time.

// gate is the next consumer of both signals, recording what it accepted
// by item name (span name, log body). The first request carrying each
// item of hold blocks until the test answers it on release; lose, if set,
// runs then for its items (a component after dedup losing them). Every
// other request is accepted at once and its items sent on arrived.
type gate struct {
	hold     []string
	entered  chan struct{}
	release  chan error
	lose     func(ctx context.Context, names []string)
	arrived  chan string
	mu       sync.Mutex
	held     map[string]bool
	accepted map[string]int
	metrics  []pmetric.Metrics // the metric requests accepted
}

func newGate(hold ...string) *gate {
	return &gate{hold: hold, entered: make(chan struct{}, len(hold)), release: make(chan error),
		arrived: make(chan string, 64), held: map[string]bool{}, accepted: map[string]int{}}
}

func (g *gate) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: false} }

func (g *gate) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	var names []string
	forEachSpan(td, func(s ptrace.Span) { names = append(names, s.Name()) })
	return g.consume(ctx, names)
}

func (g *gate) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	var names []string
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, r := range sl.LogRecords().All() {
				names = append(names, r.Body().Str())
			}
		}
	}
	return g.consume(ctx, names)
}

// ConsumeMetrics names a request's points by their metrics' names.
func (g *gate) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	var names []string
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				for range pointsOf(m) {
					names = append(names, m.Name())
				}
			}
		}
	}
	err := g.consume(ctx, names)
	if err == nil {
		c := pmetric.NewMetrics()
		md.CopyTo(c)
		g.mu.Lock()
		g.metrics = append(g.metrics, c)
		g.mu.Unlock()
	}
	return err
}

func pointsOf(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

func (g *gate) consume(ctx context.Context, names []string) error {
	g.mu.Lock()
	hold := false
	for _, h := range g.hold {
		if !g.held[h] && slices.Contains(names, h) {
			g.held[h], hold = true, true
		}
	}
	g.mu.Unlock()
	if hold {
		g.entered <- struct{}{}
		err := <-g.release
		if g.lose != nil {
			g.lose(ctx, names)
			return err
		}
		if err == nil {
			g.record(names)
		}
		return err
	}
	g.record(names)
	for _, n := range names {
		g.arrived <- n
	}
	return nil
}

func (g *gate) record(names []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range names {
		g.accepted[n]++
	}
}

func (g *gate) got() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.accepted)
}

// copyRig is one dedup component with a gate behind it, for one signal.
type copyRig struct {
	t    *testing.T
	g    *gate
	tb   *TakeBack
	tel  *componenttest.Telemetry
	send func(ctx context.Context, names ...string) error
	// takeBack hands the named items back to dedup, as an exporter does.
	takeBack func(ctx context.Context, names []string)
	signal   string
	p        component.Component // the processor
	// sendMetrics sends md (metrics only).
	sendMetrics func(ctx context.Context, md pmetric.Metrics) error
}

// copySignals are the signals whose copies wait: they build a rig.
var copySignals = []struct {
	name string
	rig  func(t *testing.T, mutate func(*Config)) *copyRig
}{
	{"traces", func(t *testing.T, mutate func(*Config)) *copyRig {
		r := newCopyRig(t, "traces")
		p := startCopyRig(t, r, mutate, func(f processor.Factory, set processor.Settings, cfg *Config) (component.Component, error) {
			return f.CreateTraces(context.Background(), set, cfg, r.g)
		}).(processor.Traces)
		r.send = func(ctx context.Context, names ...string) error { return p.ConsumeTraces(ctx, namedSpans(names...)) }
		r.takeBack = func(ctx context.Context, names []string) {
			if _, err := r.tb.Traces(ctx, component.NewID(Type), namedSpans(names...), errors.New("refused for good")); err != nil {
				t.Error(err)
			}
		}
		return r
	}},
	{"logs", func(t *testing.T, mutate func(*Config)) *copyRig {
		r := newCopyRig(t, "logs")
		p := startCopyRig(t, r, mutate, func(f processor.Factory, set processor.Settings, cfg *Config) (component.Component, error) {
			return f.CreateLogs(context.Background(), set, cfg, r.g)
		}).(processor.Logs)
		r.send = func(ctx context.Context, names ...string) error { return p.ConsumeLogs(ctx, namedLogs(names...)) }
		r.takeBack = func(ctx context.Context, names []string) {
			if _, err := r.tb.Logs(ctx, component.NewID(Type), namedLogs(names...), errors.New("refused for good")); err != nil {
				t.Error(err)
			}
		}
		return r
	}},
	{"metrics", func(t *testing.T, mutate func(*Config)) *copyRig {
		r := newCopyRig(t, "metrics")
		p := startCopyRig(t, r, mutate, func(f processor.Factory, set processor.Settings, cfg *Config) (component.Component, error) {
			return f.CreateMetrics(context.Background(), set, cfg, r.g)
		}).(processor.Metrics)
		r.send = func(ctx context.Context, names ...string) error { return p.ConsumeMetrics(ctx, namedPoints(names...)) }
		r.sendMetrics = p.ConsumeMetrics
		r.p = p
		// A point handed back is not forgotten (TakeBack.Metrics): its
		// writer's election stands, and a re-sent point is judged by it.
		return r
	}},
}

func newCopyRig(t *testing.T, signal string) *copyRig {
	return &copyRig{t: t, g: newGate("x"), tel: componenttest.NewTelemetry(), signal: signal}
}

func startCopyRig(t *testing.T, r *copyRig, mutate func(*Config),
	create func(processor.Factory, processor.Settings, *Config) (component.Component, error),
) component.Component {
	t.Helper()
	cfg := createDefaultConfig()
	if mutate != nil {
		mutate(cfg)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	f, tb := NewFactoryWithTakeBack()
	r.tb = tb
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = r.tel.NewTelemetrySettings()
	p, err := create(f, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		_ = r.tel.Shutdown(context.Background())
	})
	return p
}

// namedSpans is a request of one span per name, its ids derived from the
// name's first byte, so that equal names are copies.
func namedSpans(names ...string) ptrace.Traces {
	var specs []spanSpec
	for _, n := range names {
		specs = append(specs, spanSpec{"a", n[0], n[0], n, 0})
	}
	return traces(specs...)
}

func namedLogs(names ...string) plog.Logs {
	var specs []logSpec
	for _, n := range names {
		specs = append(specs, logSpec{"a", n, 1, ""})
	}
	return logs(specs...)
}

// namedPoints is a request of one cumulative point per name, the metric
// named so, always the same point: equal names are exact repeats.
func namedPoints(names ...string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "a")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	for _, n := range names {
		m := ms.AppendEmpty()
		m.SetName(n)
		sum := m.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sum.SetIsMonotonic(true)
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(1_000)
		dp.SetTimestamp(2_000)
		dp.SetIntValue(int64(n[0]))
	}
	return md
}

// async sends a request in its own goroutine; its answer comes on the
// channel returned.
func (r *copyRig) async(ctx context.Context, names ...string) chan error {
	ch := make(chan error, 1)
	go func() { ch <- r.send(ctx, names...) }()
	return ch
}

// bound is how long a test waits for what must happen: far more than it
// takes, on a loaded machine; reaching it fails the test.
const bound = 30 * time.Second

func (r *copyRig) answer(ch chan error, what string) error {
	r.t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(bound):
		r.t.Fatalf("%s: no answer in %s", what, bound)
		return nil
	}
}

// sendOriginal sends the request carrying x (or names), which the gate
// holds, and waits until it is there.
func (r *copyRig) sendOriginal(names ...string) chan error {
	r.t.Helper()
	if len(names) == 0 {
		names = []string{"x"}
	}
	ch := r.async(context.Background(), names...)
	select {
	case <-r.g.entered:
	case err := <-ch:
		r.t.Fatalf("the original was answered (%v) before the gate had it", err)
	case <-time.After(bound):
		r.t.Fatal("the original did not reach the gate")
	}
	return ch
}

// arrivedAt waits until the gate has accepted the item named n.
func (r *copyRig) arrivedAt(n string) {
	r.t.Helper()
	for {
		select {
		case got := <-r.g.arrived:
			if got == n {
				return
			}
		case <-time.After(bound):
			r.t.Fatalf("%s did not reach the gate", n)
		}
	}
}

// parkedOrAnswered waits until the copy sent on ch is answered or waits
// for its original: a goroutine of the process is in the wait (read from
// the goroutines' stacks, which name it whatever the code's version).
func (r *copyRig) parkedOrAnswered(ch chan error) {
	r.t.Helper()
	deadline := time.Now().Add(bound)
	buf := make([]byte, 1<<20)
	for len(ch) == 0 {
		if n := runtime.Stack(buf, true); bytes.Contains(buf[:n], []byte("dedupprocessor.(*flights).await")) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the copy neither waits nor was answered")
		}
		runtime.Gosched()
	}
}

// notAnswered fails when the copy sent on ch has been answered.
func (r *copyRig) notAnswered(ch chan error, while string) {
	r.t.Helper()
	select {
	case err := <-ch:
		r.t.Fatalf("the copy was answered (%v) %s", err, while)
	default:
	}
}

func (r *copyRig) waits(outcome string) int64 {
	m, err := r.tel.GetMetric("otelcol_processor_dedup_copy_waits")
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if hasAll(dp.Attributes, []attribute.KeyValue{attribute.String("signal", r.signal), attribute.String("outcome", outcome)}) {
			n += dp.Value
		}
	}
	return n
}

func wantAccepted(t *testing.T, got, want map[string]int) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Fatalf("the next consumer accepted %v, want %v", got, want)
	}
}

// TestCopyWaitsForItsOriginal: a copy that arrives while its original is
// in the next consumer is not answered until the original is; once the
// original is accepted, the copy is dropped and answered with success.
func TestCopyWaitsForItsOriginal(t *testing.T) {
	for _, sig := range copySignals {
		t.Run(sig.name, func(t *testing.T) {
			r := sig.rig(t, nil)
			orig := r.sendOriginal()
			cp := r.async(context.Background(), "x")
			r.parkedOrAnswered(cp)
			r.notAnswered(cp, "while its original was still in the next consumer")
			r.g.release <- nil
			if err := r.answer(orig, "original"); err != nil {
				t.Fatalf("original: %v", err)
			}
			if err := r.answer(cp, "copy"); err != nil {
				t.Fatalf("copy: %v, want success once the original was accepted", err)
			}
			wantAccepted(t, r.g.got(), map[string]int{"x": 1})
			if n := r.waits("delivered"); n != 1 {
				t.Fatalf("%d waits counted delivered, want 1", n)
			}
		})
	}
}

// TestCopyAtItsDeadline: a copy still waiting for its original when its
// own context ends (a deadline passed, or the sender gone) is answered
// with a retryable error, never with success; a retry after the original
// was accepted is dropped and answered with success.
func TestCopyAtItsDeadline(t *testing.T) {
	for _, sig := range copySignals {
		t.Run(sig.name, func(t *testing.T) {
			r := sig.rig(t, nil)
			orig := r.sendOriginal()
			past, cancelPast := context.WithDeadline(context.Background(), time.Unix(1, 0))
			defer cancelPast()
			for _, err := range []error{r.send(past, "x"), r.send(past, "x", "y")} {
				if err == nil || consumererror.IsPermanent(err) {
					t.Fatalf("a copy past its deadline answered %v while its original was in the next consumer, want a retryable error", err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cp := r.async(ctx, "x")
			r.parkedOrAnswered(cp)
			r.notAnswered(cp, "before its context ended")
			cancel()
			if err := r.answer(cp, "copy"); err == nil || consumererror.IsPermanent(err) || !errors.Is(err, errCopyWaiting) {
				t.Fatalf("a copy whose context ended answered %v, want errCopyWaiting", err)
			}
			r.g.release <- nil
			if err := r.answer(orig, "original"); err != nil {
				t.Fatalf("original: %v", err)
			}
			if err := r.send(context.Background(), "x"); err != nil {
				t.Fatalf("the retry after the original was accepted: %v", err)
			}
			// y went on at once (new), in the request that answered its
			// deadline: the sender retries it, and it is a copy then.
			wantAccepted(t, r.g.got(), map[string]int{"x": 1, "y": 1})
			if n := r.waits("deadline"); n != 3 {
				t.Fatalf("%d waits counted deadline, want 3", n)
			}
		})
	}
}

// TestCopyPassesWhenItsOriginalFails: the copy of an original that the
// next consumer refuses is judged again as new and goes on; the new items
// of the copy's request went on at once.
func TestCopyPassesWhenItsOriginalFails(t *testing.T) {
	for _, sig := range copySignals {
		t.Run(sig.name, func(t *testing.T) {
			r := sig.rig(t, nil)
			orig := r.sendOriginal()
			cp := r.async(context.Background(), "x", "z")
			r.arrivedAt("z") // the copy's request was judged: x is its original's copy
			r.g.release <- errDownstream
			if err := r.answer(orig, "original"); !errors.Is(err, errDownstream) {
				t.Fatalf("original: %v, want the consumer's refusal", err)
			}
			if err := r.answer(cp, "copy"); err != nil {
				t.Fatalf("copy: %v", err)
			}
			wantAccepted(t, r.g.got(), map[string]int{"x": 1, "z": 1})
		})
	}
}

// TestCopyPassesWhenItsOriginalIsTakenBack: the copy of an original that
// a component after dedup accepted, then lost for good and handed back
// before answering (a direct send the backend refused in part) goes on as
// new.
func TestCopyPassesWhenItsOriginalIsTakenBack(t *testing.T) {
	for _, sig := range copySignals {
		if sig.name == "metrics" {
			continue // points handed back keep their elections (TakeBack.Metrics): a re-sent point is judged by them
		}
		t.Run(sig.name, func(t *testing.T) {
			r := sig.rig(t, nil)
			r.g.lose = r.takeBack
			orig := r.sendOriginal()
			cp := r.async(context.Background(), "x", "z")
			r.arrivedAt("z")
			r.g.release <- nil
			if err := r.answer(orig, "original"); err != nil {
				t.Fatalf("original: %v", err)
			}
			if err := r.answer(cp, "copy"); err != nil {
				t.Fatalf("copy: %v", err)
			}
			wantAccepted(t, r.g.got(), map[string]int{"x": 1, "z": 1})
		})
	}
}

// TestCopyWaitsAreBounded: past copies.max_waiters_per_original,
// copies.max_waiting or copies.max_waiting_bytes a copy is answered at
// once with a retryable error, counted.
func TestCopyWaitsAreBounded(t *testing.T) {
	for _, sig := range copySignals {
		for _, bc := range []struct {
			name   string
			mutate func(*Config)
			first  bool // the first copy waits
		}{
			{"per_original", func(c *Config) { c.Copies.MaxWaitersPerOriginal = 1 }, true},
			{"requests", func(c *Config) { c.Copies.MaxWaiting = 1 }, true},
			{"bytes", func(c *Config) { c.Copies.MaxWaitingBytes = 1 }, false},
		} {
			t.Run(sig.name+"/"+bc.name, func(t *testing.T) {
				r := sig.rig(t, bc.mutate)
				orig := r.sendOriginal()
				var first chan error
				if bc.first {
					first = r.async(context.Background(), "x")
					r.parkedOrAnswered(first)
					r.notAnswered(first, "while its original was still in the next consumer")
				}
				err := r.send(context.Background(), "x")
				if !errors.Is(err, errCopyRefused) || consumererror.IsPermanent(err) {
					t.Fatalf("a copy past the bound answered %v, want errCopyRefused", err)
				}
				r.g.release <- nil
				if err := r.answer(orig, "original"); err != nil {
					t.Fatalf("original: %v", err)
				}
				if first != nil {
					if err := r.answer(first, "first copy"); err != nil {
						t.Fatalf("first copy: %v", err)
					}
				}
				wantAccepted(t, r.g.got(), map[string]int{"x": 1})
				if n := r.waits("refused"); n != 1 {
					t.Fatalf("%d waits counted refused, want 1", n)
				}
			})
		}
	}
}

// TestCopyOfTwoOriginals: a request whose copies belong to two originals,
// interleaved, waits for both, once each (copies.max_waiters_per_original
// 1 refuses no one), and is answered once both are accepted.
func TestCopyOfTwoOriginals(t *testing.T) {
	for _, sig := range copySignals {
		t.Run(sig.name, func(t *testing.T) {
			r := sig.rig(t, func(c *Config) { c.Copies.MaxWaitersPerOriginal = 1 })
			r.g.hold = []string{"a", "b"}
			r.g.entered = make(chan struct{}, 2)
			origA := r.sendOriginal("a", "c")
			origB := r.sendOriginal("b")
			cp := r.async(context.Background(), "a", "b", "c", "n")
			r.arrivedAt("n")
			r.parkedOrAnswered(cp)
			r.notAnswered(cp, "while its originals were in the next consumer")
			r.g.release <- nil
			r.g.release <- nil
			for _, ch := range []chan error{origA, origB} {
				if err := r.answer(ch, "original"); err != nil {
					t.Fatalf("original: %v", err)
				}
			}
			if err := r.answer(cp, "copy"); err != nil {
				t.Fatalf("copy: %v", err)
			}
			wantAccepted(t, r.g.got(), map[string]int{"a": 1, "b": 1, "c": 1, "n": 1})
			if n := r.waits("delivered"); n != 1 {
				t.Fatalf("%d waits counted delivered, want 1", n)
			}
		})
	}
}

// TestMetricCopiesOfEveryKind: a repeat of a request whose points are of
// every kind (gauge, sum, histogram, exponential histogram, summary),
// sent while that request is in the next consumer, waits for it; when it
// is refused, every repeated point goes on as new, of its own kind and
// unchanged.
func TestMetricCopiesOfEveryKind(t *testing.T) {
	r := copySignals[2].rig(t, nil)
	r.send = func(ctx context.Context, _ ...string) error { return r.sendMetrics(ctx, everyKind()) }
	orig := r.sendOriginal()
	cp := r.async(context.Background())
	r.parkedOrAnswered(cp)
	r.notAnswered(cp, "while its original was still in the next consumer")
	r.g.release <- errDownstream
	if err := r.answer(orig, "original"); !errors.Is(err, errDownstream) {
		t.Fatalf("original: %v, want the consumer's refusal", err)
	}
	if err := r.answer(cp, "copy"); err != nil {
		t.Fatalf("copy: %v", err)
	}
	wantAccepted(t, r.g.got(), map[string]int{"x": 1, "g": 1, "h": 1, "e": 1, "s": 1})
	r.g.mu.Lock()
	mds := slices.Clone(r.g.metrics)
	r.g.mu.Unlock()
	if len(mds) != 1 {
		t.Fatalf("%d metric requests accepted, want the copy's", len(mds))
	}
	got := map[string]pmetric.Metric{}
	for _, rm := range mds[0].ResourceMetrics().All() {
		if v, _ := rm.Resource().Attributes().Get("service.name"); v.Str() != "a" {
			t.Fatalf("resource %v, want service.name a", rm.Resource().Attributes().AsRaw())
		}
		for _, sm := range rm.ScopeMetrics().All() {
			if sm.Scope().Name() != "lib" {
				t.Fatalf("scope %q, want lib", sm.Scope().Name())
			}
			for _, m := range sm.Metrics().All() {
				got[m.Name()] = m
			}
		}
	}
	for _, m := range everyKind().ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().All() {
		g, ok := got[m.Name()]
		if !ok {
			t.Fatalf("%s did not go on", m.Name())
		}
		w := pmetric.NewMetric()
		m.CopyTo(w)
		if g.Type() != w.Type() || g.Unit() != w.Unit() || g.Description() != w.Description() {
			t.Fatalf("%s went on as a %v (%q, %q), want a %v (%q, %q)", m.Name(), g.Type(), g.Unit(), g.Description(), w.Type(), w.Unit(), w.Description())
		}
		gb, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(wrapMetric(g))
		wb, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(wrapMetric(w))
		if !bytes.Equal(gb, wb) {
			t.Fatalf("%s went on as\n%s\nwant\n%s", m.Name(), gb, wb)
		}
	}
}

// wrapMetric is m alone in a request, to compare by its encoding.
func wrapMetric(m pmetric.Metric) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m.CopyTo(md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty())
	return md
}

// everyKind is one point of each kind, under service a and scope lib:
// x a cumulative sum (the gate holds it), g a gauge, h a histogram, e an
// exponential histogram, s a summary.
func everyKind() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "a")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("lib")
	ms := sm.Metrics()
	x := ms.AppendEmpty()
	x.SetName("x")
	x.SetUnit("1")
	x.SetDescription("requests")
	sum := x.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sum.SetIsMonotonic(true)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(1_000)
	dp.SetTimestamp(2_000)
	dp.SetIntValue(7)
	dp.Attributes().PutStr("k", "v")
	g := ms.AppendEmpty()
	g.SetName("g")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(2_000)
	gp.SetDoubleValue(0.5)
	h := ms.AppendEmpty()
	h.SetName("h")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := hist.DataPoints().AppendEmpty()
	hp.SetStartTimestamp(1_000)
	hp.SetTimestamp(2_000)
	hp.SetCount(3)
	hp.SetSum(6)
	hp.ExplicitBounds().FromRaw([]float64{1, 5})
	hp.BucketCounts().FromRaw([]uint64{1, 1, 1})
	e := ms.AppendEmpty()
	e.SetName("e")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	ep := eh.DataPoints().AppendEmpty()
	ep.SetStartTimestamp(1_000)
	ep.SetTimestamp(2_000)
	ep.SetCount(2)
	ep.SetScale(1)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 1})
	s := ms.AppendEmpty()
	s.SetName("s")
	sp := s.SetEmptySummary().DataPoints().AppendEmpty()
	sp.SetStartTimestamp(1_000)
	sp.SetTimestamp(2_000)
	sp.SetCount(4)
	sp.SetSum(10)
	q := sp.QuantileValues().AppendEmpty()
	q.SetQuantile(0.5)
	q.SetValue(2)
	return md
}

// TestMetricSnapshotWaitsForRequestsInFlight: a checkpoint taken while a
// metric request is in the next consumer does not store that request's
// changes before it is accepted: a kill -9 then would restore its points
// as delivered, and its sender's retry would be dropped as a repeat. The
// snapshot is stored by the next checkpoint once the request is accepted,
// and never if it is refused.
func TestMetricSnapshotWaitsForRequestsInFlight(t *testing.T) {
	r := copySignals[2].rig(t, nil)
	u := r.p.(*metricsProcessor).st.metrics
	client := copyingClient{storagetest.NewInMemoryClient(component.KindProcessor, component.NewID(Type), "")}
	ctx := context.Background()
	// The streams a restart would know, from what is stored now.
	stored := func() int {
		t.Helper()
		b, err := client.Get(ctx, metricsSnapshotKey)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			return 0
		}
		tr, err := streams.NewTracker(createDefaultConfig().Metrics.policy())
		if err != nil {
			t.Fatal(err)
		}
		n, err := tr.Restore(b)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	checkpoint := func() {
		t.Helper()
		if err := u.storeSettled(ctx, client); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.send(ctx, "a"); err != nil { // accepted at once
		t.Fatal(err)
	}
	checkpoint()
	if n := stored(); n != 1 {
		t.Fatalf("with nothing in flight the snapshot holds %d streams, want a's", n)
	}
	orig := r.sendOriginal() // x, held
	checkpoint()
	if n := stored(); n != 1 {
		t.Fatalf("a checkpoint while x was in flight stored %d streams, want a's alone", n)
	}
	r.g.release <- nil
	if err := r.answer(orig, "original"); err != nil {
		t.Fatal(err)
	}
	checkpoint()
	if n := stored(); n != 2 {
		t.Fatalf("once x was accepted the snapshot holds %d streams, want a's and x's", n)
	}

	// y in flight at a checkpoint, then refused: its snapshot is dropped,
	// and the next one, with nothing in flight, is stored without y.
	r.g.hold, r.g.held = []string{"y"}, map[string]bool{}
	orig = r.sendOriginal("y")
	checkpoint()
	r.g.release <- errDownstream
	if err := r.answer(orig, "original"); !errors.Is(err, errDownstream) {
		t.Fatalf("y: %v, want the consumer's refusal", err)
	}
	checkpoint()
	if n := stored(); n != 2 {
		t.Fatalf("after y was refused the snapshot holds %d streams, want a's and x's", n)
	}

	// z in flight at two checkpoints: the first's snapshot is not stored
	// at the second (z still in flight), nor is the second's.
	r.g.hold, r.g.held = []string{"z"}, map[string]bool{}
	orig = r.sendOriginal("z")
	checkpoint()
	checkpoint()
	if n := stored(); n != 2 {
		t.Fatalf("with z in flight the snapshot holds %d streams, want a's and x's", n)
	}
	r.g.release <- nil
	if err := r.answer(orig, "original"); err != nil {
		t.Fatal(err)
	}
	checkpoint()
	if n := stored(); n != 3 {
		t.Fatalf("once z was accepted the snapshot holds %d streams, want 3", n)
	}
}

// copyingClient stores a copy of each value, as a storage does: the
// in-memory test client keeps the caller's slice, which the snapshots
// reuse.
type copyingClient struct{ *storagetest.TestClient }

func (c copyingClient) Set(ctx context.Context, key string, value []byte) error {
	return c.TestClient.Set(ctx, key, bytes.Clone(value))
}
