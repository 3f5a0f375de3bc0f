package dedupprocessor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// A copy is never answered ahead of its original. A request's new items are
// recorded in the window when it is judged, before the next consumer has
// them; until that consumer has answered (the request is settled), a copy
// of those items that arrives is not a copy of something delivered: if the
// original fails, or the process dies, nobody holds the items any more. So
// a copy whose original is unsettled is set aside (parked) and its request
// waits for the original: once the original is settled the copy is judged
// again, as a new request would be: dropped if the original was accepted
// (the items are in the window still), passed on as new if it was refused
// or its items were taken back. A copy still waiting when its own context
// ends is answered with errCopyWaiting, which a receiver answers as
// retryable (gRPC Unavailable, HTTP 503): never with success.
//
// Which request's insertions an entry belongs to is read from the window's
// write sequence (window.Set.ObserveSeq): a request's insertions are
// written one after the other under the unit's lock, so each unsettled
// request is a range of sequence numbers, a flight. The ranges are
// registered in the judging itself, under the unit's lock, so that no copy
// can find an item without finding its flight while it is unsettled.

// errCopyWaiting answers a request whose copies were still waiting for
// their originals when its context ended. It is not permanent: the sender
// retries, and the retry is dropped once the original has been accepted.
var errCopyWaiting = errors.New("dedup: the request repeats items whose first copy is still being delivered; " +
	"it is answered once that copy is, retry")

// errCopyRefused answers a request whose copies could not wait: copies.*
// bound the waiting requests, over all and per original.
var errCopyRefused = errors.New("dedup: the request repeats items whose first copy is still being delivered, " +
	"and no more requests may wait for it now; retry")

// flight is one request's insertions while the next consumer has it: the
// window's write sequence numbers [start, end). It lives in the request's
// scratch.
type flight struct {
	start, end uint64
	// done is made by the first waiter and closed when the request is
	// settled; waiters is how many wait. Guarded by flights.mu.
	done    chan struct{}
	waiters int
	on      bool // registered; read and written by the request's goroutine
}

// flights is a unit's unsettled requests with insertions, by start.
type flights struct {
	// maxWaiters is copies.max_waiters_per_original: how many requests
	// may wait for one unsettled request. A sender that retries on a
	// timeout shorter than its original's delivery sends a copy per
	// attempt, and each attempt's context ends before the next one comes;
	// a sender that retries without ending its attempts gets the further
	// copies refused (retryable), and piles up no more than this.
	maxWaiters int
	mu         sync.Mutex
	list       []*flight
	// n is len(list), read without mu: while a judging holds the unit's
	// lock no flight is registered, so 0 means none of the window's
	// entries is unsettled but the judging request's own.
	n atomic.Int32
}

// register records f's insertions, the writes from start to end. Call
// under the unit's lock, with those the window's newest writes.
func (fl *flights) register(f *flight, start, end uint64) {
	f.start, f.end, f.on = start, end, true
	fl.mu.Lock()
	fl.list = append(fl.list, f)
	fl.n.Store(int32(len(fl.list)))
	fl.mu.Unlock()
}

// settle removes f, once the next consumer has answered for it and the
// window says what it says of f's items (kept, or forgotten on a refusal),
// and wakes its waiters.
func (fl *flights) settle(f *flight) {
	if !f.on {
		return
	}
	f.on = false
	fl.mu.Lock()
	if i, ok := fl.find(f.start); ok {
		copy(fl.list[i:], fl.list[i+1:])
		fl.list[len(fl.list)-1] = nil
		fl.list = fl.list[:len(fl.list)-1]
		fl.n.Store(int32(len(fl.list)))
	}
	if f.done != nil {
		close(f.done)
		f.done = nil
	}
	f.waiters = 0
	fl.mu.Unlock()
}

// find returns the index of the flight whose range holds seq. Call with mu
// held.
func (fl *flights) find(seq uint64) (int, bool) {
	i := sort.Search(len(fl.list), func(i int) bool { return fl.list[i].start > seq }) - 1
	if i >= 0 && seq < fl.list[i].end {
		return i, true
	}
	return 0, false
}

// unsettled returns the range of the unsettled flight that holds the write
// seq, if one does.
func (fl *flights) unsettled(seq uint64) (start, end uint64, ok bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	i, ok := fl.find(seq)
	if !ok {
		return 0, 0, false
	}
	return fl.list[i].start, fl.list[i].end, true
}

// parkedFlights tracks, in a request's scratch while it is judged, the
// flights its parked copies wait for.
type parkedFlights struct {
	own        uint64   // the window's writes when the judging began: later ones are the request's own
	starts     []uint64 // the flights waited for, by their first write
	start, end uint64   // the last flight found, so that a run of copies of one request looks once
}

func (p *parkedFlights) reset(own uint64) {
	p.own, p.starts, p.start, p.end = own, p.starts[:0], 0, 0
}

// waitsFor reports whether the entry written as seq, held in the window,
// belongs to an unsettled request other than the one judged, and notes
// that request. Call under the unit's lock.
func (p *parkedFlights) waitsFor(fl *flights, seq uint64) bool {
	if seq >= p.own || fl.n.Load() == 0 {
		return false
	}
	if p.end > p.start && seq >= p.start && seq < p.end {
		return true
	}
	start, end, ok := fl.unsettled(seq)
	if !ok {
		return false
	}
	p.start, p.end = start, end
	p.starts = append(p.starts, start)
	return true
}

// waiting is one wait on a flight.
type waiting struct {
	start uint64
	done  chan struct{}
}

// await waits until every flight of starts is settled. It returns
// errCopyRefused when one of them has its maxWaiters already, and
// errCopyWaiting when ctx ends first.
func (fl *flights) await(ctx context.Context, starts []uint64) error {
	var ws []waiting
	fl.mu.Lock()
	for _, s := range starts {
		if slices.ContainsFunc(ws, func(w waiting) bool { return w.start == s }) {
			continue // a request's copies can name one original more than once
		}
		i, ok := fl.find(s)
		if !ok || fl.list[i].start != s {
			continue // settled already
		}
		f := fl.list[i]
		if f.waiters >= fl.maxWaiters {
			fl.leaveLocked(ws)
			fl.mu.Unlock()
			return errCopyRefused
		}
		f.waiters++
		if f.done == nil {
			f.done = make(chan struct{})
		}
		ws = append(ws, waiting{start: s, done: f.done})
	}
	fl.mu.Unlock()
	for i, w := range ws {
		select {
		case <-w.done:
		case <-ctx.Done():
			fl.mu.Lock()
			fl.leaveLocked(ws[i:])
			fl.mu.Unlock()
			return fmt.Errorf("%w: %w", errCopyWaiting, context.Cause(ctx))
		}
	}
	return nil
}

// leaveLocked takes the waits ws off the flights not settled since. Call
// with mu held.
func (fl *flights) leaveLocked(ws []waiting) {
	for _, w := range ws {
		if i, ok := fl.find(w.start); ok && fl.list[i].done == w.done {
			fl.list[i].waiters--
		}
	}
}

// waitBudget bounds the requests waiting for their originals, across
// signals: copies.max_waiting requests, copies.max_waiting_bytes of
// parked items (encoded size).
type waitBudget struct {
	mu                    sync.Mutex
	requests, bytes       int
	maxRequests, maxBytes int
}

func (b *waitBudget) enter(size int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.requests >= b.maxRequests || b.bytes+size > b.maxBytes {
		return false
	}
	b.requests++
	b.bytes += size
	return true
}

func (b *waitBudget) leave(size int) {
	b.mu.Lock()
	b.requests--
	b.bytes -= size
	b.mu.Unlock()
}

// waitOutcome is what became of a request's wait for its originals.
type waitOutcome int

const (
	waitDelivered waitOutcome = iota // the originals were accepted: the copies were dropped
	waitResent                       // some original was refused or taken back: its copies went on as new
	waitDeadline                     // the request's context ended first: answered errCopyWaiting
	waitRefused                      // copies.* or an original's waiter: answered errCopyRefused
	numWaitOutcomes
)

var waitOutcomeNames = [numWaitOutcomes]string{"delivered", "resent", "deadline", "refused"}

// waitOpts are the attribute sets of processor_dedup_copy_waits, by
// signal and outcome.
type waitOpts [numWaitOutcomes]metric.MeasurementOption

func newWaitOpts(signal string) waitOpts {
	var o waitOpts
	for i, name := range waitOutcomeNames {
		o[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", signal), attribute.String("outcome", name)))
	}
	return o
}

// copyWaits is what a processor needs to make a request wait.
type copyWaits struct {
	budget *waitBudget
	tel    *telemetry
}

// awaitOriginals runs the copies of one request through their waits: it
// waits for the flights of starts, then calls again, which judges the
// parked copies again and forwards what is new; again returns the flights
// its copies still wait for (another request took them over), or none.
// The wait ends at ctx's end with errCopyWaiting.
func (w copyWaits) awaitOriginals(ctx context.Context, fl *flights, starts []uint64, size int, opts *waitOpts,
	again func() (starts []uint64, resent bool, err error),
) error {
	outcome := waitDelivered
	defer func() { w.tel.copyWaits.Add(context.WithoutCancel(ctx), 1, opts[outcome]) }()
	if !w.budget.enter(size) {
		outcome = waitRefused
		return errCopyRefused
	}
	defer w.budget.leave(size)
	for len(starts) > 0 {
		if err := fl.await(ctx, starts); err != nil {
			if errors.Is(err, errCopyRefused) {
				outcome = waitRefused
			} else {
				outcome = waitDeadline
			}
			return err
		}
		var resent bool
		var err error
		starts, resent, err = again()
		if resent {
			outcome = waitResent
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parkedItems holds a span or log request's parked copies, in a request D
// of their own under copies of their resources (R) and scopes (S); ri and
// si are the request's resource and scope that r and s copy. L adds each
// level of D's signal.
type parkedItems[D comparable, R resourceLevel, S scopeLevel, I any, L layout[D, R, S, I]] struct {
	d      D
	r      R
	s      S
	ri, si int
}

// layout adds to a request of one signal: a resource, a scope in it, and
// an item moved into the scope.
type layout[D, R, S, I any] interface {
	new() D
	resource(D) R
	scope(R) S
	move(I, S)
}

// resourceLevel and scopeLevel are a signal's ResourceSpans or
// ResourceLogs, and its ScopeSpans or ScopeLogs.
type resourceLevel interface {
	Resource() pcommon.Resource
	SchemaUrl() string
	SetSchemaUrl(string)
}

type scopeLevel interface {
	Scope() pcommon.InstrumentationScope
	SchemaUrl() string
	SetSchemaUrl(string)
}

// park sets item aside, a copy whose original is unsettled, under a copy
// of its resource r (the ri-th of the request) and scope s (the si-th).
func (p *parkedItems[D, R, S, I, L]) park(r R, ri int, s S, si int, item I) {
	var l L
	var none D
	if p.d == none {
		p.d, p.ri = l.new(), -1
	}
	if p.ri != ri {
		p.r = l.resource(p.d)
		r.Resource().CopyTo(p.r.Resource())
		p.r.SetSchemaUrl(r.SchemaUrl())
		p.ri, p.si = ri, -1
	}
	if p.si != si {
		p.s = l.scope(p.r)
		s.Scope().CopyTo(p.s.Scope())
		p.s.SetSchemaUrl(s.SchemaUrl())
		p.si = si
	}
	l.move(item, p.s)
}

// take hands over the parked copies and clears them.
func (p *parkedItems[D, R, S, I, L]) take() D {
	d := p.d
	*p = parkedItems[D, R, S, I, L]{}
	return d
}
