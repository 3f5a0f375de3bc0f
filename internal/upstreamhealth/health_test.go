package upstreamhealth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want State
	}{
		{nil, Reachable},
		{fmt.Errorf("sending: %w", syscall.ECONNREFUSED), Unreachable},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, Unreachable},
		{&net.DNSError{Err: "no such host", Name: "backend"}, Unreachable},
		{context.DeadlineExceeded, Unreachable},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:9: connect: connection refused\""), Unreachable},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), Unreachable},
		{status.Error(codes.InvalidArgument, "too large"), Refusing},
		{status.Error(codes.Unauthenticated, "no token"), Refusing},
		{errors.New("Permanent error: rpc error: code = ResourceExhausted"), Refusing},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestTransitionsLoggedOnce: many failed sends in a row give one warning,
// the first success after them one line; the snapshot follows each send.
func TestTransitionsLoggedOnce(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	tr := New("backend:4317", zap.New(core))
	clock := time.Unix(1_700_000_000, 0)
	tr.now = func() time.Time { return clock }

	if s := tr.Snapshot(); s.State != Unknown || !s.Since.IsZero() {
		t.Fatalf("before any send: %+v", s)
	}
	down := status.Error(codes.Unavailable, "connection refused")
	start := clock
	for i := 0; i < 50; i++ {
		tr.Record(down)
		clock = clock.Add(time.Second)
	}
	s := tr.Snapshot()
	if s.State != Unreachable || !s.Since.Equal(start) || s.Failures != 50 || s.LastError != down.Error() || !s.LastSuccess.IsZero() {
		t.Errorf("after 50 refused connections: %+v", s)
	}
	if n := logs.FilterMessageSnippet("Upstream unreachable").Len(); n != 1 || logs.Len() != 1 {
		t.Errorf("%d log lines, %d of them unreachable warnings; want one warning: %v", logs.Len(), n, logs.All())
	}

	tr.Record(nil)
	s = tr.Snapshot()
	if s.State != Reachable || !s.Since.Equal(clock) || s.Failures != 0 || !s.LastSuccess.Equal(clock) || s.LastError != down.Error() {
		t.Errorf("after a success: %+v", s)
	}
	back := logs.FilterMessage("Upstream reachable again").All()
	if len(back) != 1 || back[0].ContextMap()["failed_sends"] != int64(50) || back[0].ContextMap()["for"] != 50*time.Second {
		t.Errorf("want one line saying it is back after 50 failed sends in 50 s: %v", back)
	}
	for i := 0; i < 10; i++ {
		tr.Record(nil)
	}
	if logs.Len() != 2 {
		t.Errorf("successes while reachable logged: %v", logs.All())
	}

	tr.Record(status.Error(codes.InvalidArgument, "too large"))
	tr.Record(status.Error(codes.InvalidArgument, "too large"))
	if s := tr.Snapshot(); s.State != Refusing {
		t.Errorf("after an answered error: %s", s.State)
	}
	if n := logs.FilterMessage("Upstream refusing data").Len(); n != 1 {
		t.Errorf("%d refusing warnings, want 1", n)
	}
}
