package dedupprocessor

import (
	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// trackerSet shows a Tracker to the telemetry and lifecycle code that every
// signal shares: entries are streams, the capacity is metrics.max_streams.
type trackerSet struct{ t *streams.Tracker }

func (s trackerSet) Len() int                   { return s.t.Len() }
func (s trackerSet) Capacity() int              { return s.t.Limit() }
func (s trackerSet) Oldest() (int64, bool)      { return 0, false } // streams have no window to report
func (s trackerSet) LastEvicted() (int64, bool) { return 0, false } // past max_streams new streams pass unjudged; none is evicted
func (s trackerSet) Stats() window.Stats        { return window.Stats{Expired: s.t.Stats().Expired} }
func (s trackerSet) Expire(now int64)           { s.t.Expire(now) }
func (s trackerSet) Shrink(int) int             { return 0 } // state is bounded by max_streams alone
