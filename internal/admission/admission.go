// Package admission lets a receiver's server refuse a request before it
// decodes it when the queue the request would enter is full, which the
// queue would answer anyway (a retryable refusal) only after the request
// was decoded, judged by dedup and taken back.
//
// The server learns where its requests go from the requests themselves: it
// gives each one a Route in its context, and a queue the request reaches
// synchronously (an exporter's sending queue, in the pipeline's own
// goroutine) Enters itself there. A Learner, one per server and kind of
// request, keeps the queues its requests entered as long as every request
// entered the same ones; only then does Full refuse a request, when one of
// those queues has less room than it. Requests that take different routes
// (a routing connector, a filter dropping whole requests, a batch processor
// in between) show it, and the Learner then stops refusing for good: a
// queue that only some requests enter must not refuse the others.
package admission

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unit is what a queue's size counts.
type Unit uint8

const (
	// Bytes: encoded (protobuf) bytes.
	Bytes Unit = iota
	// Items: spans, log records or metric points.
	Items
	// Requests: queue entries.
	Requests
)

// Queue is a queue that requests enter after the receiver.
type Queue interface {
	// Free is the room the queue has left, in its unit.
	Free() (int64, Unit)
	// Name names the queue in refusals: its component's ID.
	Name() string
}

type routeKey struct{}

// Route records the queues one request entered.
type Route struct {
	mu     sync.Mutex
	queues []Queue
	ended  bool
}

// NewContext returns ctx carrying a new Route, which the request's queues
// enter.
func NewContext(ctx context.Context) (context.Context, *Route) {
	r := &Route{}
	return context.WithValue(ctx, routeKey{}, r), r
}

// Enter records that the request of ctx entered q (a no-op without a
// Route, or when q is there already).
func Enter(ctx context.Context, q Queue) {
	r, _ := ctx.Value(routeKey{}).(*Route)
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.queues {
		if e == q {
			return
		}
	}
	r.queues = append(r.queues, q)
}

// End records that a component consumed the request of ctx whole, leaving
// nothing to pass on (dedup, when every item was a copy): a request that
// reached no queue for that reason says nothing about the route.
func End(ctx context.Context) {
	if r, _ := ctx.Value(routeKey{}).(*Route); r != nil {
		r.mu.Lock()
		r.ended = true
		r.mu.Unlock()
	}
}

// Reached says whether the request entered a queue or was consumed whole
// on its way (End).
func (r *Route) Reached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queues) > 0 || r.ended
}

// Ended says whether End was called for the request.
func (r *Route) Ended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// Learner learns the queues that one server's requests of one kind enter.
// Its zero value is ready; it is safe for concurrent use.
type Learner struct {
	mu      sync.Mutex
	learned atomic.Pointer[[]Queue]
	varied  atomic.Bool
	// OnVaried, if set before use, is called once, when requests are
	// first seen taking different routes.
	OnVaried func()
}

// Observe learns from r, the Route of a request that has been answered
// with err. A request that failed before it entered any queue (refused on
// its way: invalid, memory pressure) and one consumed whole on its way
// (End) say nothing; any other request's queues must be the ones every
// earlier request entered. (A request holding no items, which the OTLP
// receiver answers without passing it on, must not be observed.)
func (l *Learner) Observe(r *Route, err error) {
	if l.varied.Load() {
		return
	}
	r.mu.Lock()
	queues, ended := r.queues, r.ended
	r.mu.Unlock()
	if len(queues) == 0 && (ended || err != nil) {
		return
	}
	if p := l.learned.Load(); p != nil && sameSet(*p, queues) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch p := l.learned.Load(); {
	case p == nil:
		learned := slices.Clone(queues)
		l.learned.Store(&learned)
	case !sameSet(*p, queues) && !l.varied.Load():
		l.varied.Store(true)
		if l.OnVaried != nil {
			l.OnVaried()
		}
	}
}

// Varied says whether requests were seen taking different routes.
func (l *Learner) Varied() bool { return l.varied.Load() }

// Full returns the first queue of the route every request took so far that
// has less room than a request of size encoded bytes needs (a queue
// counting items or entries: no room at all), or nil: none, or no route
// learned, or routes that varied.
func (l *Learner) Full(size int64) Queue {
	if l.varied.Load() {
		return nil
	}
	p := l.learned.Load()
	if p == nil {
		return nil
	}
	for _, q := range *p {
		free, unit := q.Free()
		need := int64(1)
		if unit == Bytes {
			need = max(size, 1)
		}
		if free < need {
			return q
		}
	}
	return nil
}

func sameSet(a, b []Queue) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// FullError refuses a request, before it is decoded, that a full queue
// would refuse after.
type FullError struct{ Queue string }

func (e *FullError) Error() string {
	return fmt.Sprintf("sending queue is full (%s); retry later", e.Queue)
}

// GRPCStatus makes the refusal Unavailable, which OTLP clients retry (the
// OTLP receiver answers 503 over HTTP), as the queue's own refusal is.
func (e *FullError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}
