package admission

import (
	"context"
	"errors"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// queue is a queue whose room the test sets.
type queue struct {
	name string
	free int64
	unit Unit
}

func (q *queue) Free() (int64, Unit) { return q.free, q.unit }
func (q *queue) Name() string        { return q.name }

// request runs one request through l: enter is what it reaches.
func request(l *Learner, err error, enter func(context.Context)) {
	ctx, r := NewContext(context.Background())
	enter(ctx)
	l.Observe(r, err)
}

func via(qs ...Queue) func(context.Context) {
	return func(ctx context.Context) {
		for _, q := range qs {
			Enter(ctx, q)
		}
	}
}

func TestFullOnlyOnceTheRouteIsLearned(t *testing.T) {
	q := &queue{name: "q", free: 0}
	var l Learner
	if l.Full(100) != nil {
		t.Fatal("refused before any request showed where requests go")
	}
	request(&l, nil, via(q))
	if got := l.Full(100); got != q {
		t.Fatalf("Full = %v, want the learned queue without room", got)
	}
	q.free = 100
	if l.Full(100) != nil {
		t.Fatal("refused a request that fits exactly")
	}
	if l.Full(101) != q {
		t.Fatal("took a request one byte larger than the room")
	}
	q.free = 1 << 20
	if l.Full(100) != nil {
		t.Fatal("refused with room")
	}
}

func TestUnitsOtherThanBytesNeedOneFree(t *testing.T) {
	for _, unit := range []Unit{Items, Requests} {
		q := &queue{name: "q", free: 1, unit: unit}
		var l Learner
		request(&l, nil, via(q))
		if l.Full(1<<20) != nil {
			t.Fatalf("unit %d: refused with room for one more, whatever the request's bytes", unit)
		}
		q.free = 0
		if l.Full(1) != q {
			t.Fatalf("unit %d: took a request with no room", unit)
		}
	}
}

// Requests that end on their way (dedup consumed them whole) or fail
// before any queue say nothing about the route; any other route that
// differs stops refusals for good.
func TestRoutesThatVaryStopRefusals(t *testing.T) {
	a, b := &queue{name: "a"}, &queue{name: "b", free: 1 << 30}
	var l Learner
	varied := 0
	l.OnVaried = func() { varied++ }
	request(&l, nil, via(a))
	request(&l, nil, End)                     // dedup: nothing left to pass on
	request(&l, errors.New("refused"), via()) // memory_limiter refused it
	request(&l, errors.New("full"), via(a))   // the queue refused it: same route
	request(&l, nil, via(a, a))               // entered twice: still a
	if l.Varied() || l.Full(1) != a {
		t.Fatalf("varied %v, Full %v; want the route {a} kept", l.Varied(), l.Full(1))
	}
	request(&l, nil, via(b)) // a routing connector sent this one elsewhere
	if !l.Varied() || l.Full(1) != nil || varied != 1 {
		t.Fatalf("varied %v (%d calls), Full %v; want refusals off for good", l.Varied(), varied, l.Full(1))
	}
	request(&l, nil, via(a))
	if l.Full(1) != nil || varied != 1 {
		t.Fatal("refusals came back, or OnVaried was called again")
	}
}

func TestAnEmptyRouteIsARoute(t *testing.T) {
	a := &queue{name: "a"}
	var l Learner
	request(&l, nil, via(a))
	request(&l, nil, via()) // answered without reaching a queue: a filter, a batch processor
	if l.Full(1) != nil {
		t.Fatal("a queue that some requests skip refused the others")
	}
}

func TestFanOutRefusesWhenAnyQueueIsFull(t *testing.T) {
	a, b := &queue{name: "a", free: 1 << 30}, &queue{name: "b", free: 1 << 30}
	var l Learner
	request(&l, nil, via(a, b))
	request(&l, nil, via(b, a)) // the same set in another order
	if l.Varied() {
		t.Fatal("the same queues in another order counted as another route")
	}
	b.free = 0
	if l.Full(1) != b {
		t.Fatal("a full queue of the fan-out did not refuse")
	}
}

func TestEnterWithoutARouteIsANoOp(_ *testing.T) {
	Enter(context.Background(), &queue{})
	End(context.Background())
}

func TestConcurrentUse(t *testing.T) {
	a := &queue{name: "a", free: 1 << 30}
	var l Learner
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				request(&l, nil, via(a))
				_ = l.Full(10)
			}
		})
	}
	wg.Wait()
	if l.Varied() {
		t.Fatal("one route seen as varied under concurrency")
	}
}

func TestFullErrorIsRetryable(t *testing.T) {
	err := error(&FullError{Queue: "dedup_otlp_grpc/upstream"})
	s, ok := status.FromError(err)
	if !ok || s.Code() != codes.Unavailable || s.Message() != "sending queue is full (dedup_otlp_grpc/upstream); retry later" {
		t.Fatalf("%v %v %q", ok, s.Code(), s.Message())
	}
}
