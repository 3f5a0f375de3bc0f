package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// duplicatesJudged is how many spans of service the gateway's dedup has
// taken for copies so far (dropped, or waiting for their originals).
func (d *defaultGateway) duplicatesJudged(t *testing.T, service string) float64 {
	t.Helper()
	var n float64
	for _, l := range strings.Split(get(t, "http://"+d.tel+"/metrics"), "\n") {
		if !strings.HasPrefix(l, "otelcol_processor_dedup_duplicate_items{") ||
			!strings.Contains(l, `action="dropped"`) || !strings.Contains(l, `service_name="`+service+`"`) {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			n += v
		}
	}
	return n
}

// TestRetryOfAnInFlightRequestSurvivesKill9: a sender of 8000-span
// requests (sent straight upstream) with a 2 s timeout per attempt, and an
// upstream that turns slow and keeps only what it answers (a backend whose
// caller gave up). The sender's request is held upstream; its attempt
// times out and the sender sends it again, a copy of a request still on
// its way; then the gateway is killed with SIGKILL, restarted on its data
// dir, and the upstream is fast again. Every span the sender was told had
// arrived did arrive: the copy was not acknowledged ahead of its original,
// which died with the process.
func TestRetryOfAnInFlightRequestSurvivesKill9(t *testing.T) {
	up := newCollectorUpstream(t, freePort(t))
	up.dropAbandoned = true
	d := startDefault(t, "--upstream", "http://"+up.addr)
	ctx := ctxTimeout(t, 3*time.Minute)
	const service, perRequest = "retrier", 8000
	s := newAckSender(t, d.grpc)
	s.attempt = 2 * time.Second
	g := &spanGen{prefix: 0x70}
	if err := s.sendTraces(ctx, g.request(service, perRequest, 100)); err != nil {
		t.Fatal(err)
	}
	up.holdAll()
	held, _ := up.heldCounts()
	retries := s.retries.Load()
	done := make(chan error, 1)
	go func() { done <- s.sendTraces(ctx, g.request(service, perRequest, 100)) }()
	// The request is held upstream, and the sender's retry has been
	// judged a copy; then either that retry was answered, or it waited
	// for its original until its deadline and the sender tried again.
	waitFor(t, time.Minute, "the request held upstream and its retry judged a copy", func() bool {
		h, _ := up.heldCounts()
		return h > held && d.duplicatesJudged(t, service) >= perRequest
	})
	waitFor(t, time.Minute, "the retry answered, or timed out and tried again", func() bool {
		return len(done) > 0 || s.retries.Load() >= retries+2
	})
	queued := d.queueSize(t)
	if err := d.g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	d.restart(t)
	up.release() // fast again; what it held counts for nothing: its caller is gone
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sender: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the sender's request was never acknowledged")
	}
	waitFor(t, time.Minute, "the queue to drain", func() bool { return d.queueSize(t) == 0 })
	d.g.stop(t)
	acked := s.ackedIDs()
	total, unique, _ := up.counts()
	t.Logf("%d spans acknowledged (sender retries %d, %v queued at the kill); upstream kept %d (%d distinct)",
		len(acked), s.retries.Load()-retries, queued, total, unique)
	if n, some := missing(acked, func(k [24]byte) bool { up.mu.Lock(); defer up.mu.Unlock(); return up.spans[k] > 0 }); n > 0 {
		t.Fatalf("%d acknowledged spans never arrived, e.g. %v", n, some)
	}
	if unique != len(acked) {
		t.Fatalf("upstream got %d distinct spans, want the %d acknowledged", unique, len(acked))
	}
}
