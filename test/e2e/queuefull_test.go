package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/capture"
)

// earlyRefusal is the message of a request refused before decoding: the
// queue's own refusal says "sending queue is full" alone.
const earlyRefusal = "sending queue is full (dedup_otlp_grpc/upstream); retry later"

// TestFullQueueRefusesBeforeDecoding: the embedded default, its upstream
// away, with a 1 MiB queue. Requests over gRPC and HTTP fill it; from then
// on they are refused with a retryable status, and once the receiver's
// server has seen that every request enters that queue, before they are
// decoded: the guard counts each of those (queue_full), dedup judges none
// of their spans (received_items), the receiver never sees them. With the
// upstream back, the senders' retries pass (nothing of the refused
// requests was recorded as seen) and every acknowledged span arrives once.
func TestFullQueueRefusesBeforeDecoding(t *testing.T) {
	upstream, free := heldPort(t) // refused, and no one else's, until it comes back
	d := startDefault(t, "--upstream", "http://"+upstream, "--upstream-max-request-bytes", "262144",
		"--set", "exporters::dedup_otlp_grpc/upstream::sending_queue::queue_size=1048576")
	ctx := ctxTimeout(t, 3*time.Minute)
	s := newAckSender(t, d.grpc)
	gen := &spanGen{prefix: 1}
	const spans = 50 // about 15 KB a request

	var refused []ptrace.Traces // to be sent again
	var accepted, late int
	early := map[string]int{}
	for attempt := 0; early["grpc"] < 20 || early["http"] < 20; attempt++ {
		if attempt == 2000 {
			t.Fatalf("after 2000 requests: %d accepted, %d refused by the queue, %v before decoding", accepted, late, early)
		}
		td := gen.request("full", spans, 200)
		protocol, msg, ok := "grpc", "", false
		if attempt%2 == 1 {
			protocol = "http"
			body, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
			code, m := postOTLP(t, "http://"+d.http+"/v1/traces", "application/x-protobuf", "", body)
			switch code {
			case http.StatusOK:
				ok = true
			case http.StatusServiceUnavailable:
				msg = m
			default:
				t.Fatalf("HTTP: %d %q, want 200 or 503", code, m)
			}
		} else {
			_, err := s.traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
			switch status.Code(err) {
			case codes.OK:
				ok = true
			case codes.Unavailable:
				msg = status.Convert(err).Message()
			default:
				t.Fatalf("gRPC: %v, want OK or Unavailable", err)
			}
		}
		switch {
		case ok:
			accepted++
			s.mu.Lock()
			eachSpan(td, func(k [24]byte) { s.acked[k] = true })
			s.mu.Unlock()
			continue
		case msg == earlyRefusal:
			early[protocol]++
		case strings.Contains(msg, "sending queue is full"):
			late++
		default:
			t.Fatalf("%s: refused with %q, want the queue's refusal", protocol, msg)
		}
		refused = append(refused, td)
	}
	t.Logf("%d requests accepted, %d refused by the queue after decoding, %v before", accepted, late, early)

	self := get(t, "http://"+d.tel+"/metrics")
	for _, protocol := range []string{"grpc", "http"} {
		series := fmt.Sprintf(`otelcol_guard_refused_requests{protocol=%q,reason="queue_full"`, protocol)
		if v, _ := promValue(self, series); int(v) != early[protocol] {
			t.Errorf("%s = %v, want the %d requests refused before decoding", series, v, early[protocol])
		}
	}
	// dedup judged the accepted requests and those the queue refused, not
	// one span more.
	if v, ok := promValue(self, `otelcol_processor_dedup_received_items{service_name="full",signal="traces"`); !ok || int(v) != spans*(accepted+late) {
		t.Errorf("dedup received %v spans, want %d: those of the %d accepted and %d late-refused requests", v, spans*(accepted+late), accepted, late)
	}
	g, _ := promValue(self, `otelcol_receiver_refused_spans{receiver="otlp",transport="grpc"`)
	h, _ := promValue(self, `otelcol_receiver_refused_spans{receiver="otlp",transport="http"`)
	if int(g+h) != spans*late {
		t.Errorf("the receiver refused %v gRPC and %v HTTP spans, want only the %d late-refused requests' %d", g, h, late, spans*late)
	}

	// The upstream comes back; every refused request is sent again.
	sk := &sink{spans: map[[24]byte]int{}}
	free()
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	for _, td := range refused {
		if err := s.sendTraces(ctx, td); err != nil {
			t.Fatalf("retry of a refused request: %v", err)
		}
	}
	acked := s.ackedIDs()
	want := spans * (accepted + len(refused))
	if len(acked) != want {
		t.Fatalf("%d spans acknowledged, want %d", len(acked), want)
	}
	waitFor(t, time.Minute, "every acknowledged span upstream", func() bool { _, u := sk.counts(); return u >= want })
	d.g.stop(t)
	total, unique := sk.counts()
	if total != want || unique != want {
		t.Fatalf("upstream got %d spans, %d distinct; want each of %d once; copies: %v", total, unique, want, sk.copiesOver())
	}
	got := sk.snapshot()
	for k := range acked {
		if got[k] != 1 {
			t.Fatalf("acknowledged span %x arrived %d times", k, got[k])
		}
	}
}
