package e2e

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestKill9MidStream: a retrying sender streams requests of which 30% of
// the spans repeat earlier ones; the gateway (embedded default, --upstream)
// is killed with SIGKILL mid-stream and started again on the same data
// dir; the sender retries what was not answered and goes on. The upstream
// holds every unique span: accepted data survived in the persistent queue,
// and the journaled span window caught the copies the sender made; what
// a crash may add is bounded (copyBound): the upstream request in flight,
// the client request it was cut from, the sender's unanswered request.
func TestKill9MidStream(t *testing.T) {
	sk := newSink(t)
	d := startDefault(t, "--upstream", sk.srv.Endpoint())

	conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)

	const requests, perRequest = 300, 100
	r := rand.New(rand.NewPCG(7, 9))
	var sent [][24]byte // every unique span id made so far
	unique := map[[24]byte]bool{}
	build := func() ptrace.Traces {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "crash")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for range perRequest {
			var k [24]byte
			if len(sent) > 0 && r.Float64() < 0.3 {
				k = sent[r.IntN(len(sent))]
			} else {
				for i := 0; i < 24; i += 8 {
					v := r.Uint64()
					for j := range 8 {
						k[i+j] = byte(v >> (8 * j))
					}
				}
				sent = append(sent, k)
				unique[k] = true
			}
			s := spans.AppendEmpty()
			s.SetTraceID(pcommon.TraceID(k[:16]))
			s.SetSpanID(pcommon.SpanID(k[16:]))
			s.SetName("work")
			s.SetStartTimestamp(1)
			s.SetEndTimestamp(2)
		}
		return td
	}

	var done atomic.Int64
	var retries atomic.Int64
	// The sender waits at half its requests until the gateway is killed:
	// however the two are scheduled, the kill falls while it still has
	// requests to send.
	killed := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range requests {
			if i == requests/2 {
				<-killed
			}
			req := ptraceotlp.NewExportRequestFromTraces(build())
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := client.Export(ctx, req)
				cancel()
				if err == nil {
					break
				}
				retries.Add(1)
				time.Sleep(20 * time.Millisecond) // the sender's retry backoff
			}
			done.Add(1)
		}
	}()

	waitFor(t, time.Minute, "the stream to be under way", func() bool { return done.Load() >= requests/3 })
	if err := d.g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	killedAt := done.Load()
	close(killed)
	// Start it again only once the sender has met the dead gateway, so
	// that it surely retries something.
	waitFor(t, time.Minute, "the sender to retry while the gateway is down", func() bool { return retries.Load() > 0 })
	d.restart(t)
	wg.Wait()

	waitFor(t, 2*time.Minute, "every unique span upstream", func() bool { _, u := sk.counts(); return u >= len(unique) })
	d.g.stop(t)
	total, got := sk.counts()
	bound := copyBound(1, sk.largestRequest(), perRequest, 1)
	t.Logf("killed after %d of %d requests; the sender retried %d times; %d unique spans sent, upstream got %d (%d distinct, %d copies; bound %d)",
		killedAt, requests, retries.Load(), len(unique), total, got, total-got, bound)
	if got != len(unique) {
		t.Fatalf("upstream got %d distinct spans; want each of the %d unique ones", got, len(unique))
	}
	if total-got > bound {
		t.Fatalf("%d copies after one crash, more than the bound %d", total-got, bound)
	}
}
