package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder commits by recording each group; the first commit can be held
// open so that later calls pile up behind it.
type recorder struct {
	mu     sync.Mutex
	groups [][]int
	hold   chan struct{} // closed to let the first commit finish
	held   bool
	err    func(first int) error
}

func (r *recorder) commit(_ context.Context, first int, rest []int) error {
	r.mu.Lock()
	r.groups = append(r.groups, append([]int{first}, rest...))
	wait := !r.held && r.hold != nil
	r.held = true
	r.mu.Unlock()
	if wait {
		<-r.hold
	}
	if r.err != nil {
		return r.err(first)
	}
	return nil
}

// waitCalls polls until g has seen n calls: a call is counted before it
// waits, so once n are counted the n-1 after the first are queued.
func waitCalls[T any](t *testing.T, g *Group[T], n uint64) {
	t.Helper()
	for g.Stats().Calls < n {
		// The calls are goroutines started just before; yield until
		// they have queued. No timing decides the result.
		select {
		case <-t.Context().Done():
			t.Fatal("calls did not arrive")
		default:
		}
		runtime.Gosched()
	}
}

func TestAloneCommitsAtOnce(t *testing.T) {
	r := &recorder{}
	g := New(r.commit, nil, 10, 10)
	for i := range 3 {
		if err := g.Do(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	if want := [][]int{{0}, {1}, {2}}; !equalGroups(r.groups, want) {
		t.Fatalf("groups %v, want %v: sequential calls commit alone", r.groups, want)
	}
	if st := g.Stats(); st.Calls != 3 || st.Commits != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestWaitingCallsCommitTogether: while one commit runs, later calls wait
// and are committed together, in arrival order, within the bounds, each
// exactly once, each answered with its own group's error.
func TestWaitingCallsCommitTogether(t *testing.T) {
	for _, tc := range []struct {
		name                string
		n, maxWeight, calls int
		weight              func(int) int
		want                [][]int
	}{
		{"one group", 8, 100, 100, nil, [][]int{{0}, {1, 2, 3, 4, 5, 6, 7}}},
		{"max calls", 8, 100, 3, nil, [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}}},
		{"max weight", 8, 5, 100, func(int) int { return 2 }, [][]int{{0}, {1, 2}, {3, 4}, {5, 6}, {7}}},
		{"heavy item alone", 4, 1, 100, func(int) int { return 7 }, [][]int{{0}, {1}, {2}, {3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{hold: make(chan struct{})}
			r.err = func(first int) error { return errors.New("group led by " + string(rune('a'+first))) }
			g := New(r.commit, tc.weight, tc.maxWeight, tc.calls)
			errs := make([]error, tc.n)
			var wg sync.WaitGroup
			wg.Go(func() { errs[0] = g.Do(t.Context(), 0) })
			// The first commit holds; the others arrive one by one so
			// that their order is known.
			for r.groupsLen() == 0 {
				runtime.Gosched()
			}
			for i := 1; i < tc.n; i++ {
				wg.Go(func() { errs[i] = g.Do(t.Context(), i) })
				waitCalls(t, g, uint64(i+1))
			}
			if w := g.Waiting(); w != tc.n-1 {
				t.Fatalf("%d calls waiting behind the first commit, want %d", w, tc.n-1)
			}
			close(r.hold)
			wg.Wait()
			if w := g.Waiting(); w != 0 {
				t.Fatalf("%d calls waiting after every call returned", w)
			}

			var seen []int
			leaderOf := map[int]int{}
			for _, grp := range r.groups {
				w := 0
				for _, it := range grp {
					if tc.weight != nil {
						w += tc.weight(it)
					} else {
						w++
					}
					leaderOf[it] = grp[0]
				}
				if len(grp) > 1 && w > tc.maxWeight {
					t.Errorf("group %v weighs %d > %d", grp, w, tc.maxWeight)
				}
				if len(grp) > tc.calls {
					t.Errorf("group %v holds more than %d calls", grp, tc.calls)
				}
				seen = append(seen, grp...)
			}
			if want := seq(tc.n); !slices.Equal(seen, want) {
				t.Fatalf("committed %v, want each item once in arrival order %v", seen, want)
			}
			if !equalGroups(r.groups, tc.want) {
				t.Fatalf("groups %v, want %v", r.groups, tc.want)
			}
			for i, err := range errs {
				if want := "group led by " + string(rune('a'+leaderOf[i])); err == nil || err.Error() != want {
					t.Errorf("call %d: %v, want %q", i, err, want)
				}
			}
			if st := g.Stats(); st.Calls != uint64(tc.n) || st.Commits != uint64(len(r.groups)) {
				t.Fatalf("stats %+v for %d groups", st, len(r.groups))
			}
		})
	}
}

// TestWaiterKeepsWaitingWhenCancelled: a call whose item may be part of a
// running commit returns that commit's answer, not its context's error.
func TestWaiterKeepsWaitingWhenCancelled(t *testing.T) {
	r := &recorder{hold: make(chan struct{})}
	g := New(r.commit, nil, 10, 10)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Do(t.Context(), 0) })
	for r.groupsLen() == 0 {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(t.Context())
	var err error
	wg.Go(func() { err = g.Do(ctx, 1) })
	waitCalls(t, g, 2)
	cancel()
	close(r.hold)
	wg.Wait()
	if err != nil {
		t.Fatalf("cancelled waiter got %v, want its commit's answer (nil)", err)
	}
	if want := [][]int{{0}, {1}}; !equalGroups(r.groups, want) {
		t.Fatalf("groups %v, want %v", r.groups, want)
	}
}

// TestManyConcurrentCalls: under the race detector, every item is
// committed exactly once and commits never overlap.
func TestManyConcurrentCalls(t *testing.T) {
	var mu sync.Mutex
	running := false
	got := map[int]int{}
	g := New(func(_ context.Context, first int, rest []int) error {
		mu.Lock()
		if running {
			mu.Unlock()
			return errors.New("commits overlap")
		}
		running = true
		got[first]++
		for _, r := range rest {
			got[r]++
		}
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		running = false
		mu.Unlock()
		return nil
	}, nil, 16, 16)
	var wg sync.WaitGroup
	const workers, each = 16, 200
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := g.Do(t.Context(), w*each+i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(got) != workers*each {
		t.Fatalf("%d items committed, want %d", len(got), workers*each)
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("item %d committed %d times", k, n)
		}
	}
	st := g.Stats()
	t.Logf("%d calls in %d commits", st.Calls, st.Commits)
}

func (r *recorder) groupsLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.groups)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func equalGroups(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}

// TestHoldStopsWhenTheGroupIsFull: a commit that waits for hold gathers the
// calls that arrive, and stops waiting as soon as they fill the group, so
// that a queue that never empties does not cap the rate at a group per
// hold time.
func TestHoldStopsWhenTheGroupIsFull(t *testing.T) {
	r := &recorder{}
	g := New(r.commit, nil, 3, 100)
	g.Hold(func() bool { return true }, time.Hour, time.Millisecond)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() { errs[i] = g.Do(t.Context(), i) })
		waitCalls(t, g, uint64(i+1))
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // only a failing run waits: the hold is an hour
		t.Fatal("the full group was not committed: the leader kept waiting for hold")
	}
	if want := [][]int{{0, 1, 2}}; !equalGroups(r.groups, want) {
		t.Fatalf("groups %v, want %v", r.groups, want)
	}
	if st := g.Stats(); st.Held != 1 {
		t.Fatalf("stats %+v, want the one commit counted as held", st)
	}
}

// TestHoldEndsAtMaxDelay: a commit waits for hold at most the hold time,
// even when hold never turns false (a queue that never empties, an
// upstream that is down): what README bounds as max_delay.
func TestHoldEndsAtMaxDelay(t *testing.T) {
	r := &recorder{}
	g := New(r.commit, nil, 100, 100)
	g.Hold(func() bool { return true }, 10*time.Millisecond, time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- g.Do(t.Context(), 0) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // only a failing run waits: the hold is 10ms
		t.Fatal("the commit kept waiting past the hold time")
	}
	if want := [][]int{{0}}; !equalGroups(r.groups, want) {
		t.Fatalf("groups %v, want %v", r.groups, want)
	}
}
