package dedupprocessor

import (
	"testing"
	"time"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// fakeSet is a window with fixed contents, to read its status row.
type fakeSet struct {
	n, limit int
	oldest   int64
	stats    window.Stats
}

func (f *fakeSet) Len() int              { return f.n }
func (f *fakeSet) Capacity() int         { return f.limit }
func (f *fakeSet) Oldest() (int64, bool) { return f.oldest, f.n > 0 }
func (f *fakeSet) Stats() window.Stats   { return f.stats }
func (f *fakeSet) Expire(int64)          {}
func (f *fakeSet) Shrink(int) int        { return 0 }

// TestWindowStatusYoungIsNotShort: a window that has evicted nothing
// reaches back as far as configured; its age is not its effective window.
func TestWindowStatusYoungIsNotShort(t *testing.T) {
	now := int64(time.Hour)
	configured := 5 * time.Minute
	young := newSignalWindow("traces", &fakeSet{n: 1, limit: 2_000_000, oldest: now - int64(12*time.Second)})
	ws := young.status(now, configured)
	if ws.Effective != configured.Seconds() || ws.Short || !ws.NotFull {
		t.Fatalf("young window: %+v, want effective %v, not short, not full", ws, configured.Seconds())
	}
	if ws.OldestAge != 12 {
		t.Fatalf("oldest entry age %v, want 12", ws.OldestAge)
	}

	full := newSignalWindow("traces", &fakeSet{n: 10, limit: 10, oldest: now - int64(40*time.Second),
		stats: window.Stats{Evicted: 3}})
	ws = full.status(now, configured)
	if ws.Effective != 40 || !ws.Short || ws.NotFull {
		t.Fatalf("evicting window: %+v, want effective 40, short", ws)
	}
}
