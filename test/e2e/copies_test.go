package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// duplicatesJudged is how many items of service the gateway's dedup has
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

// paddedLogs is a request of n log records of service, bodies
// prefix-from to prefix-(from+n-1), each with an attribute of pad bytes.
func paddedLogs(service, prefix string, from, n, pad int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	recs := rl.ScopeLogs().AppendEmpty().LogRecords()
	filler := strings.Repeat("p", pad)
	for i := range n {
		r := recs.AppendEmpty()
		r.Body().SetStr(fmt.Sprintf("%s-%d", prefix, from+i))
		r.SetTimestamp(pcommon.Timestamp(from + i + 1))
		r.Attributes().PutStr("pad", filler)
	}
	return ld
}

// TestRetryOfAnInFlightRequestSurvivesKill9: a sender of 8000-item
// requests (sent straight upstream: over 1 MiB) with a 2 s timeout per
// attempt, and an upstream that turns slow and keeps only what it answers
// (a backend whose caller gave up). The sender's request is held upstream;
// its attempt times out and the sender sends it again, a copy of a request
// still on its way; then the gateway is killed with SIGKILL, restarted on
// its data dir, and the upstream is fast again. Every item the sender was
// told had arrived did arrive: the copy was not acknowledged ahead of its
// original, which died with the process. Spans and log records.
func TestRetryOfAnInFlightRequestSurvivesKill9(t *testing.T) {
	t.Run("traces", func(t *testing.T) { testRetryOfAnInFlightRequest(t, false) })
	t.Run("logs", func(t *testing.T) { testRetryOfAnInFlightRequest(t, true) })
}

func testRetryOfAnInFlightRequest(t *testing.T, logs bool) {
	up := newCollectorUpstream(t, freePort(t))
	up.dropAbandoned, up.holdLogs = true, logs
	d := startDefault(t, "--upstream", "http://"+up.addr)
	ctx := ctxTimeout(t, 3*time.Minute)
	const perRequest = 8000
	service := "span-retrier"
	s := newAckSender(t, d.grpc)
	s.attempt = 2 * time.Second
	g := &spanGen{prefix: 0x70}
	from := 0
	send := func() error { return s.sendTraces(ctx, g.request(service, perRequest, 100)) }
	if logs {
		service = "log-retrier"
		send = func() error {
			from += perRequest
			return s.sendLogs(ctx, paddedLogs(service, "retried", from, perRequest, 100))
		}
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	up.holdAll()
	held, _ := up.heldCounts()
	retries, dups := s.retries.Load(), d.duplicatesJudged(t, service)
	done := make(chan error, 1)
	go func() { done <- send() }()
	// The request is held upstream, and the sender's retry has been
	// judged a copy; then either that retry was answered, or it waited
	// for its original until its deadline and the sender tried again.
	waitFor(t, time.Minute, "the request held upstream and its retry judged a copy", func() bool {
		h, _ := up.heldCounts()
		return h > held && d.duplicatesJudged(t, service) >= dups+perRequest
	})
	waitFor(t, time.Minute, "the retry answered, or timed out and tried again", func() bool {
		return len(done) > 0 || s.retries.Load() >= retries+2
	})
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
	up.mu.Lock()
	defer up.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	acked, got, lost := len(s.acked), len(up.spans), 0
	var some []string
	if logs {
		acked, got = len(s.ackedLogs), len(up.logs)
		for k := range s.ackedLogs {
			if up.logs[k] == 0 {
				if lost++; len(some) < 5 {
					some = append(some, k)
				}
			}
		}
	} else {
		for k := range s.acked {
			if up.spans[k] == 0 {
				if lost++; len(some) < 5 {
					some = append(some, fmt.Sprintf("%x/%x", k[:16], k[16:]))
				}
			}
		}
	}
	t.Logf("%d items acknowledged (sender retries %d); upstream kept %d distinct", acked, s.retries.Load()-retries, got)
	if lost > 0 {
		t.Fatalf("%d acknowledged items never arrived, e.g. %v", lost, some)
	}
	if got != acked {
		t.Fatalf("upstream got %d distinct items, want the %d acknowledged", got, acked)
	}
}
