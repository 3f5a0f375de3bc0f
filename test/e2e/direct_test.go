package e2e

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The embedded default sends each request straight to a healthy upstream
// while its persistent queue is empty (direct), and answers the sender
// once the upstream has answered; these tests take that path through a
// crash, an upstream that turns slow and then away, and a permanent
// refusal followed by a restart.

// queueSize is the traces queue's size the gateway reports.
func (d *defaultGateway) queueSize(t *testing.T) float64 {
	t.Helper()
	v, ok := promValue(get(t, "http://"+d.tel+"/metrics"), `otelcol_exporter_queue_size{data_type="traces"`)
	if !ok {
		t.Fatal("the gateway reports no traces queue size")
	}
	return v
}

// streamTraces has senders goroutines send requests of perRequest spans
// through s until stop is closed, counting the acknowledged requests in
// sent; wait waits for them to end.
func streamTraces(t *testing.T, ctx context.Context, s *ackSender, senders, perRequest int, prefix byte, sent *atomic.Int64) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range senders {
		g := &spanGen{prefix: prefix + byte(i)}
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := s.sendTraces(ctx, g.request("direct", perRequest, 100)); err != nil {
					t.Errorf("sender %d: %v", i, err)
					return
				}
				sent.Add(1)
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// TestDirectKill9DuringForward: while retrying senders stream to the
// embedded default, the upstream holds the requests it gets, so that a
// direct send is under way (nothing queued), and the gateway is killed
// with SIGKILL; the upstream then takes what it held (it had arrived), and
// the gateway starts again on the same data dir. Every acknowledged span
// arrives; what arrives twice is within the bound per crash (the senders
// re-send what was not answered).
func TestDirectKill9DuringForward(t *testing.T) {
	up := newCollectorUpstream(t, freePort(t))
	d := startDefault(t, "--upstream", "http://"+up.addr)
	ctx := ctxTimeout(t, 3*time.Minute)
	// Requests that fill the queue's batch (1 MiB: about 1.4 MB each):
	// only those go straight upstream; smaller ones go to the queue.
	const senders, perRequest = 2, 8000
	s := newAckSender(t, d.grpc)
	var sent atomic.Int64
	stop := streamTraces(t, ctx, s, senders, perRequest, 0x50, &sent)
	waitFor(t, time.Minute, "requests acknowledged", func() bool { return sent.Load() >= 20 })
	// Hold the upstream until a send is held there with nothing queued:
	// a direct send. If the gateway gave up on it (direct::timeout) and
	// queued it meanwhile, let the queue drain and hold again.
	direct := false
	for attempt := 0; attempt < 5 && !direct; attempt++ {
		held, _ := up.heldCounts()
		up.holdAll()
		waitFor(t, time.Minute, "a send held by the upstream", func() bool { h, _ := up.heldCounts(); return h > held })
		if d.queueSize(t) == 0 {
			direct = true
			break
		}
		up.release()
		waitFor(t, time.Minute, "the queue to drain", func() bool { return d.queueSize(t) == 0 })
	}
	if !direct {
		t.Fatal("no direct send could be held with the queue empty")
	}
	if err := d.g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	up.release()
	d.restart(t)
	before := sent.Load()
	waitFor(t, time.Minute, "requests acknowledged after the restart", func() bool { return sent.Load() >= before+20 })
	stop()
	acked := s.ackedIDs()
	waitFor(t, time.Minute, "every acknowledged span upstream", func() bool { return up.has(acked) })
	d.g.stop(t)
	total, unique, maxSpans := up.counts()
	bound := copyBound(1, maxSpans, perRequest, senders)
	t.Logf("%d spans acknowledged in %d requests (sender retries %d); upstream got %d (%d distinct, %d copies; bound %d)",
		len(acked), sent.Load(), s.retries.Load(), total, unique, total-unique, bound)
	if s.retries.Load() == 0 {
		t.Fatal("the senders never had to retry: the kill did not interrupt a send")
	}
	if n, some := missing(acked, func(k [24]byte) bool { up.mu.Lock(); defer up.mu.Unlock(); return up.spans[k] > 0 }); n > 0 {
		t.Fatalf("%d acknowledged spans never arrived, e.g. %v", n, some)
	}
	if unique != len(acked) {
		t.Fatalf("upstream got %d distinct spans, want the %d acknowledged", unique, len(acked))
	}
	if total-unique > bound {
		t.Fatalf("%d copies after one crash, more than the bound of %d", total-unique, bound)
	}
}

// TestDirectUpstreamSlowThenAway: while retrying senders stream, the
// upstream stops answering (it holds every request), so that direct sends
// time out and requests go to the persistent queue; then it goes away
// altogether, and comes back later on the same address. Every acknowledged
// span arrives; copies are at most the spans of the requests the upstream
// held, which the gateway gave up on and sent again from its queue.
func TestDirectUpstreamSlowThenAway(t *testing.T) {
	addr := freePort(t)
	up := newCollectorUpstream(t, addr)
	d := startDefault(t, "--upstream", "http://"+addr)
	ctx := ctxTimeout(t, 3*time.Minute)
	const senders, perRequest = 2, 8000 // sent direct: they fill the queue's batch
	s := newAckSender(t, d.grpc)
	var sent atomic.Int64
	stop := streamTraces(t, ctx, s, senders, perRequest, 0x60, &sent)
	waitFor(t, time.Minute, "requests acknowledged", func() bool { return sent.Load() >= 20 })

	up.holdAll() // slow: nothing is answered
	waitFor(t, time.Minute, "the gateway to queue what the upstream does not answer", func() bool { return d.queueSize(t) > 0 })
	before := sent.Load()
	waitFor(t, time.Minute, "requests acknowledged while the upstream is slow", func() bool { return sent.Load() >= before+10 })
	up.stop() // away: it takes what it held, then nothing listens
	_, heldSpans := up.heldCounts()
	before = sent.Load()
	waitFor(t, time.Minute, "requests acknowledged while the upstream is away", func() bool { return sent.Load() >= before+10 })

	back := newCollectorUpstream(t, addr)
	before = sent.Load()
	waitFor(t, time.Minute, "requests acknowledged after the upstream is back", func() bool { return sent.Load() >= before+10 })
	stop()
	acked := s.ackedIDs()
	waitFor(t, 2*time.Minute, "every acknowledged span upstream", func() bool {
		for k := range acked {
			up.mu.Lock()
			n := up.spans[k]
			up.mu.Unlock()
			back.mu.Lock()
			n += back.spans[k]
			back.mu.Unlock()
			if n == 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, time.Minute, "the queue to drain", func() bool { return d.queueSize(t) == 0 })
	d.g.stop(t)
	total1, _, _ := up.counts()
	total2, _, _ := back.counts()
	distinct := map[[24]byte]bool{}
	for _, u := range []*collectorUpstream{up, back} {
		u.mu.Lock()
		for k := range u.spans {
			distinct[k] = true
		}
		u.mu.Unlock()
	}
	copies := total1 + total2 - len(distinct)
	t.Logf("%d spans acknowledged in %d requests (sender retries %d); upstream got %d before it went away and %d after (%d distinct, %d copies; %d spans were held)",
		len(acked), sent.Load(), s.retries.Load(), total1, total2, len(distinct), copies, heldSpans)
	if len(distinct) != len(acked) {
		t.Fatalf("upstream got %d distinct spans, want the %d acknowledged", len(distinct), len(acked))
	}
	if copies > heldSpans {
		t.Fatalf("%d copies, more than the %d spans the upstream held", copies, heldSpans)
	}
}

// TestDirectRefusalSurvivesARestart: the upstream refuses for good any
// request holding a span named "poison", and the gateway sends straight to
// it, so that the poison span is handed back to dedup before dedup has
// settled its request. After a restart (kill -9) the journal still has it
// taken back: once the upstream accepts it, the sender's re-send of the
// whole request delivers the poison span, and only it.
func TestDirectRefusalSurvivesARestart(t *testing.T) {
	up := newCollectorUpstream(t, freePort(t))
	var poisonOK atomic.Bool
	up.mu.Lock()
	up.refuse = func(td ptrace.Traces) error {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					if sp.Name() == "poison" && !poisonOK.Load() {
						return consumererror.NewPermanent(status.Error(codes.InvalidArgument, "poison span refused"))
					}
				}
			}
		}
		return nil
	}
	up.mu.Unlock()
	d := startDefault(t, "--upstream", "http://"+up.addr)
	ctx := ctxTimeout(t, time.Minute)
	s := newAckSender(t, d.grpc)
	g := &spanGen{prefix: 0x70}
	var poison ptrace.Traces
	// Requests that fill the queue's batch (1 MiB), so that they are
	// sent direct.
	const perRequest = 8000
	for r := range 10 {
		td := g.request("mixed", perRequest, 100)
		if r == 4 {
			td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(7).SetName("poison")
			poison = ptrace.NewTraces()
			td.CopyTo(poison)
		}
		if err := s.sendTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
		// Sent direct: the upstream had it before the answer (the queue
		// answers once it is stored, and sends it later).
		if r < 4 && !up.has(s.ackedIDs()) {
			t.Fatalf("request %d was answered before the upstream had it: not sent direct", r)
		}
	}
	waitFor(t, 30*time.Second, "the loss to be counted", func() bool {
		return strings.Contains(get(t, "http://"+d.tel+"/metrics"), `otelcol_processor_dedup_lost_items{signal="traces"} 1`)
	})
	metrics := get(t, "http://"+d.tel+"/metrics")
	inner, _ := promValue(metrics, `otelcol_exporter_sent_spans{exporter="otlp_grpc/upstream"`)
	if inner != 10*perRequest-1 {
		t.Fatalf("the upstream took %v spans; want the %d others", inner, 10*perRequest-1)
	}
	if err := d.g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	d.restart(t)
	poisonOK.Store(true)
	if err := s.sendTraces(ctx, poison); err != nil {
		t.Fatal(err)
	}
	d.g.stop(t)
	total, unique, _ := up.counts()
	t.Logf("upstream got %d spans (%d distinct)", total, unique)
	if total != 10*perRequest || unique != 10*perRequest {
		t.Fatalf("upstream got %d spans (%d distinct), want each of the %d once: after the restart the re-send passed the poison span, and only it", total, unique, 10*perRequest)
	}
}
