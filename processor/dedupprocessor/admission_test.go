package dedupprocessor

import (
	"context"
	"testing"

	"github.com/doubletake/doubletake/internal/admission"
)

// A request dedup leaves nothing of is marked as ended, so that the
// receiver's server does not take it for one that was routed past the
// queue; one it passes on is not.
func TestWholeCopiesEndTheirRoute(t *testing.T) {
	h := newHarness(t, nil)
	td := traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 2, "y", 0})
	for i, wantEnded := range []bool{false, true} {
		ctx, route := admission.NewContext(context.Background())
		if err := h.traces.ConsumeTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
		if route.Ended() != wantEnded {
			t.Fatalf("request %d: ended %v, want %v", i+1, route.Ended(), wantEnded)
		}
	}
	ld := logs(logSpec{service: "a", body: "one", ts: 1})
	for i, wantEnded := range []bool{false, true} {
		ctx, route := admission.NewContext(context.Background())
		if err := h.logs.ConsumeLogs(ctx, ld); err != nil {
			t.Fatal(err)
		}
		if route.Ended() != wantEnded {
			t.Fatalf("logs request %d: ended %v, want %v", i+1, route.Ended(), wantEnded)
		}
	}
}
