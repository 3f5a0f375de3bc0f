package guard

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

// A request message refused by the codec, whose call an earlier
// interceptor answered (so the guard's never saw it), may be reused by
// pdata's pool for the next request: once that one passes the codec, the
// guard's interceptor lets it through.
func TestGRPCRefusalDoesNotOutliveItsMessage(t *testing.T) {
	g := NewGRPC(DefaultMaxDepth, nil, nil)
	c := codec{g}
	type msg struct{ _ int } // not zero-sized: each message has its own address
	v := &msg{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(guardtest.DeepTraces(200))}, v); err != nil {
		t.Fatal(err)
	}
	if g.npending.Load() != 1 {
		t.Fatalf("%d refusals pending, want 1", g.npending.Load())
	}
	ok, err := ptraceotlp.NewExportRequest().MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	// The same message, now for a normal request (decoded by a codec that
	// accepts anything).
	g.delegate = acceptAll{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(ok)}, v); err != nil {
		t.Fatal(err)
	}
	reached := false
	if _, err := g.intercept(context.Background(), v, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		reached = true
		return nil, nil
	}); err != nil || !reached {
		t.Fatalf("the reused message was refused: %v", err)
	}
}

type acceptAll struct{}

func (acceptAll) Marshal(any) (mem.BufferSlice, error) { return nil, nil }
func (acceptAll) Unmarshal(mem.BufferSlice, any) error { return nil }
func (acceptAll) Name() string                         { return "proto" }
