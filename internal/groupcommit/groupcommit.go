// Package groupcommit commits concurrent calls together, as databases do
// with their logs ("group commit").
//
// A call that finds no commit running commits its item alone, at once: an
// idle pipeline waits for nothing. Calls that arrive while a commit runs
// wait; when it ends, the first of them commits their items together, as
// one, and every call of that group returns the one answer. Under
// concurrent load this turns many small storage transactions into few
// large ones; no call ever waits for a timer.
//
// A call's item may be merged into another call's: once it waits, it
// returns only with its group's answer, whatever its own context does,
// because its data may already be part of a commit that is running.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Group commits items of type T.
type Group[T any] struct {
	// commit commits first and rest as one; every call of the group gets
	// its error. It is never called concurrently.
	commit func(ctx context.Context, first T, rest []T) error
	// weight is an item's size; a group holds items of at most maxWeight
	// together (a single item may be heavier), and at most maxCalls
	// calls.
	weight    func(T) int
	maxWeight int
	maxCalls  int

	// hold, when set, says that committing now would only wait behind
	// earlier commits (a queue that has not taken them yet): the next
	// commit then waits, gathering the calls that arrive, until hold is
	// false, the group is full or holdFor has passed, polling every
	// holdPoll.
	hold     func() bool
	holdFor  time.Duration
	holdPoll time.Duration

	mu      sync.Mutex
	busy    bool
	waiting []*waiter[T]

	// Commits and Calls count what Do did, for tests and telemetry.
	stats Stats
}

// Stats counts calls and the commits they took.
type Stats struct {
	Calls   uint64 // calls of Do
	Commits uint64 // commits run; Calls - Commits calls were merged into another's
	Held    uint64 // commits that found hold true and waited, gathering the calls that arrived
}

type waiter[T any] struct {
	item T
	// done carries the group's answer, or, when lead is set, this
	// waiter's turn to commit the group lead (itself first).
	done chan outcome[T]
}

type outcome[T any] struct {
	err  error
	lead []*waiter[T]
}

// New returns a Group that commits with commit. weight and maxWeight
// bound what one commit holds (weight nil: every item weighs 1); maxCalls
// bounds the calls one commit answers (at least 1).
func New[T any](commit func(ctx context.Context, first T, rest []T) error, weight func(T) int, maxWeight, maxCalls int) *Group[T] {
	if weight == nil {
		weight = func(T) int { return 1 }
	}
	return &Group[T]{commit: commit, weight: weight, maxWeight: maxWeight, maxCalls: max(1, maxCalls)}
}

// Hold makes each commit wait while hold is true, up to d, gathering the
// calls that arrive meanwhile; see Group.hold. Call it before the first Do.
func (g *Group[T]) Hold(hold func() bool, d, poll time.Duration) {
	g.hold, g.holdFor, g.holdPoll = hold, d, poll
}

// Do commits item, alone or with the items of concurrent calls, and
// returns the answer of the commit that held it. ctx is used for the
// commit only when this call leads it.
func (g *Group[T]) Do(ctx context.Context, item T) error {
	g.mu.Lock()
	g.stats.Calls++
	if !g.busy {
		g.busy = true
		g.stats.Commits++
		g.mu.Unlock()
		return g.lead(ctx, item, nil)
	}
	w := &waiter[T]{item: item, done: make(chan outcome[T], 1)}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	o := <-w.done
	if o.lead != nil {
		return g.lead(ctx, item, o.lead[1:])
	}
	return o.err
}

// lead commits item with the items of rest, answers rest, and hands the
// next commit to the first call still waiting.
func (g *Group[T]) lead(ctx context.Context, item T, rest []*waiter[T]) error {
	if g.hold != nil && g.hold() {
		g.mu.Lock()
		g.stats.Held++
		g.mu.Unlock()
		rest = g.gather(item, rest)
	}
	var err error
	if len(rest) == 0 {
		err = g.commit(ctx, item, nil)
	} else {
		items := make([]T, len(rest))
		for i, w := range rest {
			items[i] = w.item
		}
		err = g.commit(ctx, item, items)
		for _, w := range rest {
			w.done <- outcome[T]{err: err}
		}
	}
	g.mu.Lock()
	if len(g.waiting) == 0 {
		g.busy = false
		g.mu.Unlock()
		return err
	}
	n, sum := 1, g.weight(g.waiting[0].item)
	for n < len(g.waiting) && n < g.maxCalls {
		wt := g.weight(g.waiting[n].item)
		if sum+wt > g.maxWeight {
			break
		}
		sum += wt
		n++
	}
	next := make([]*waiter[T], n)
	copy(next, g.waiting)
	rem := copy(g.waiting, g.waiting[n:])
	clear(g.waiting[rem:])
	g.waiting = g.waiting[:rem]
	g.stats.Commits++
	g.mu.Unlock()
	next[0].done <- outcome[T]{lead: next}
	return err
}

// gather waits while hold is true, up to holdFor, then adds to rest the
// calls that arrived, within the group's bounds.
func (g *Group[T]) gather(item T, rest []*waiter[T]) []*waiter[T] {
	sum := g.weight(item)
	for _, w := range rest {
		sum += g.weight(w.item)
	}
	// Waiting stops early once the group is full: under a sustained load
	// the queue never empties, and waiting then would only cap the rate
	// at a group per holdFor.
	deadline := time.Now().Add(g.holdFor)
	for g.hold() && time.Now().Before(deadline) {
		g.mu.Lock()
		n, w := g.fits(sum, len(rest))
		full := n < len(g.waiting) || w >= g.maxWeight || 1+len(rest)+n >= g.maxCalls
		g.mu.Unlock()
		if full {
			break
		}
		time.Sleep(g.holdPoll)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n, _ := g.fits(sum, len(rest))
	if n == 0 {
		return rest
	}
	rest = append(rest, g.waiting[:n]...)
	rem := copy(g.waiting, g.waiting[n:])
	clear(g.waiting[rem:])
	g.waiting = g.waiting[:rem]
	return rest
}

// fits returns how many of the calls waiting, in order, fit into a group
// that already holds 1+calls calls of weight sum, and the weight then.
// g.mu is held.
func (g *Group[T]) fits(sum, calls int) (int, int) {
	n := 0
	for n < len(g.waiting) && 1+calls+n < g.maxCalls {
		wt := g.weight(g.waiting[n].item)
		if sum+wt > g.maxWeight {
			break
		}
		sum += wt
		n++
	}
	return n, sum
}

// Waiting is how many calls wait for a commit now.
func (g *Group[T]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// Stats returns what the Group has done so far.
func (g *Group[T]) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}
