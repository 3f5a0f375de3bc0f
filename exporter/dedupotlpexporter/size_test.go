package dedupotlpexporter

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestOversizedItemIsRefusedBeforeQueueing: a request holding a span that
// no upstream request can carry is refused with InvalidArgument, naming
// the span; a request as large made of small spans passes, since the
// queue's batcher splits it.
func TestOversizedItemIsRefusedBeforeQueueing(t *testing.T) {
	up := &upstream{cfg: &Config{MaxRequestBytes: 64 << 10}, splits: true}
	many := spansOf(3000, func(int) string { return strings.Repeat("n", 40) })
	size, err := up.checkTraces(many)
	if err != nil {
		t.Fatalf("a request of many small spans (%d bytes) was refused: %v", tracesSizer.TracesSize(many), err)
	}
	if size != tracesSizer.TracesSize(many) {
		t.Fatalf("check says the request is %d bytes, it is %d", size, tracesSizer.TracesSize(many))
	}
	big := spansOf(30, func(i int) string {
		if i == 17 {
			return strings.Repeat("x", 70<<10)
		}
		return "small"
	})
	_, err = up.checkTraces(big)
	if !consumererror.IsPermanent(err) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want a permanent InvalidArgument", err)
	}
	if !strings.Contains(err.Error(), "max_request_bytes 65536") || !strings.Contains(err.Error(), `service "svc11"`) {
		t.Fatalf("error %q does not name the limit and the span's service", err)
	}
	// Just under the limit, alone with its resource and scope, passes.
	edge := spansOf(1, func(int) string { return strings.Repeat("y", 64<<10-200) })
	if _, err := up.checkTraces(edge); err != nil {
		t.Fatalf("a span that fits was refused: %v", err)
	}
	// Without a splitting batcher the whole request must fit.
	up.splits = false
	if _, err := up.checkTraces(many); err == nil {
		t.Fatal("without batching, a request over the limit passed")
	}
}
