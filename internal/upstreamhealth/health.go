// Package upstreamhealth follows whether an exporter's upstream takes what
// it is sent: reachable, refusing (it answers, with an error), or
// unreachable (no answer: refused connection, timeout, name not found)
// since when, with the last error and the last success. It logs one
// warning when the upstream becomes unreachable and one line when it is
// back, instead of one line per failed attempt.
package upstreamhealth

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// State is the upstream's state as the last send found it.
type State string

const (
	Unknown     State = "unknown"     // nothing sent yet
	Reachable   State = "reachable"   // the last send was taken
	Refusing    State = "refusing"    // the upstream answered the last send with an error
	Unreachable State = "unreachable" // the last send got no answer
)

// Snapshot is the tracker's state at one moment.
type Snapshot struct {
	Endpoint    string    `json:"endpoint"`
	State       State     `json:"state"`
	Since       time.Time `json:"since,omitzero"` // when State began; zero while Unknown
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	Failures    int64     `json:"failures"` // failed sends since the last success
}

// Tracker follows one upstream. It is safe for concurrent use.
type Tracker struct {
	logger *zap.Logger
	now    func() time.Time

	mu   sync.Mutex
	snap Snapshot
}

// New returns a Tracker of endpoint that logs its transitions to logger.
func New(endpoint string, logger *zap.Logger) *Tracker {
	return &Tracker{logger: logger, now: time.Now, snap: Snapshot{Endpoint: endpoint, State: Unknown}}
}

// Classify says what err, a send's result, tells of the upstream.
func Classify(err error) State {
	switch {
	case err == nil:
		return Reachable
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, context.DeadlineExceeded):
		return Unreachable
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	if errors.As(err, &dnsErr) || errors.As(err, &opErr) {
		return Unreachable
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return Unreachable
		}
	}
	return Refusing
}

// Record takes the result of one send.
func (t *Tracker) Record(err error) {
	state := Classify(err)
	now := t.now()
	t.mu.Lock()
	prev := t.snap
	if state != prev.State {
		t.snap.State, t.snap.Since = state, now
	}
	if err != nil {
		t.snap.LastError, t.snap.LastErrorAt = err.Error(), now
		t.snap.Failures++
	} else {
		t.snap.LastSuccess, t.snap.Failures = now, 0
	}
	snap := t.snap
	t.mu.Unlock()

	switch {
	case state == Unreachable && prev.State != Unreachable:
		t.logger.Warn("Upstream unreachable; what is accepted waits in the sending queue and is sent once it is back",
			zap.String("upstream", snap.Endpoint), zap.String("error", snap.LastError))
	case state == Reachable && (prev.State == Unreachable || prev.State == Refusing):
		t.logger.Info("Upstream reachable again",
			zap.String("upstream", snap.Endpoint), zap.String("was", string(prev.State)),
			zap.Duration("for", now.Sub(prev.Since)), zap.Int64("failed_sends", prev.Failures))
	case state == Refusing && prev.State != Refusing:
		t.logger.Warn("Upstream refusing data", zap.String("upstream", snap.Endpoint), zap.String("error", snap.LastError))
	}
}

// Snapshot returns the tracker's state now.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snap
}
