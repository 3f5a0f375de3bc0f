package dedupprocessor

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/journal"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// This file is what the signal units (traces.go, logs.go, metrics.go) are
// made of and what state, persistence and memory pressure see of them.
// The units depend on it, on telemetry and on their own windows, never on
// state.

// windowSet is what every signal's window offers to telemetry and lifecycle.
type windowSet interface {
	Len() int
	Capacity() int
	Oldest() (int64, bool)
	// LastEvicted is no earlier than the arrival of the newest entry
	// evicted or shrunk before its window ended (false: none was).
	LastEvicted() (int64, bool)
	Stats() window.Stats
	Expire(now int64)
	Shrink(n int) int
}

// signalWindow is one signal's window behind its lock, with what it has
// reported to telemetry so far.
type signalWindow struct {
	signal      string
	signalAttrs attribute.Set
	signalOpt   metric.MeasurementOption
	capacityOpt metric.MeasurementOption
	shrinkOpt   metric.MeasurementOption
	// configured is how far back the window is to reach: traces.window,
	// logs.window, metrics.max_stale.
	configured time.Duration

	now func() int64 // the clock, in Unix nanoseconds; tests replace it

	mu       sync.Mutex
	set      windowSet
	reported window.Stats // counted into telemetry already; guarded by mu
}

func newSignalWindow(signal string, set windowSet, configured time.Duration) *signalWindow {
	sig := attribute.String("signal", signal)
	return &signalWindow{
		signal:      signal,
		signalAttrs: attribute.NewSet(sig),
		signalOpt:   metric.WithAttributeSet(attribute.NewSet(sig)),
		capacityOpt: metric.WithAttributeSet(attribute.NewSet(sig, attribute.String("reason", "capacity"))),
		shrinkOpt:   metric.WithAttributeSet(attribute.NewSet(sig, attribute.String("reason", "shrink"))),
		configured:  configured,
		now:         func() int64 { return time.Now().UnixNano() },
		set:         set,
	}
}

// windowSnapshot is a window at one moment, as the gauges, the status page
// and the summary line all read it.
type windowSnapshot struct {
	entries, limit int
	// effective is how far back the window reaches (reach); short says
	// that is less than configured.
	effective time.Duration
	short     bool
	oldestAge time.Duration // the age of the oldest entry held; 0 when empty
	stats     window.Stats
}

func (w *signalWindow) snapshot(now int64) windowSnapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := windowSnapshot{entries: w.set.Len(), limit: w.set.Capacity(), stats: w.set.Stats()}
	if oldest, ok := w.set.Oldest(); ok && now > oldest {
		s.oldestAge = time.Duration(now - oldest)
	}
	at, evicted := w.set.LastEvicted()
	s.effective, s.short = reach(now, w.configured, at, evicted)
	return s
}

// reach is how far back a window reaches at now: every key that arrived
// since then is held. That is the configured window unless an entry that
// arrived within it was evicted (the window full) or shrunk (memory
// pressure): then it reaches back to just after that entry. A window that
// has evicted nothing reaches back as far as configured however young it
// is (its oldest entry's age is how long it has been filling, not a limit
// on what it compares).
// lastEvicted (when evicted) is no earlier than that entry's arrival.
func reach(now int64, configured time.Duration, lastEvicted int64, evicted bool) (effective time.Duration, short bool) {
	if !evicted || now-lastEvicted >= int64(configured) {
		return configured, false
	}
	return time.Duration(max(now-lastEvicted, 0)), true
}

// status is the window as the status page shows it.
func (w *signalWindow) status(now int64) statuspage.WindowStatus {
	snap := w.snapshot(now)
	ws := statuspage.WindowStatus{
		Signal: w.signal, Entries: snap.entries, Limit: snap.limit,
		Effective: snap.effective.Seconds(), Configured: w.configured.Seconds(), Short: snap.short,
		Evicted: snap.stats.Evicted, Shrunk: snap.stats.Shrunk, Expired: snap.stats.Expired,
	}
	if _, streams := w.set.(trackerSet); streams {
		// Streams are kept until idle for max_stale, never evicted: the
		// bound limits once max_streams are held (new ones pass unjudged).
		ws.Streams, ws.NotFull = true, snap.entries < snap.limit
	} else {
		age := snap.oldestAge.Seconds()
		ws.NotFull, ws.OldestAge = snap.stats.Evicted+snap.stats.Shrunk == 0, &age
	}
	if snap.limit > 0 {
		ws.Fill = float64(snap.entries) / float64(snap.limit)
	}
	return ws
}

// observe registers the gauges, read from the windows at collection time.
func observeWindows(t *telemetry, windows []*signalWindow) error {
	snapshots := func(f func(s windowSnapshot, attrs metric.ObserveOption)) {
		for _, w := range windows {
			f(w.snapshot(w.now()), metric.WithAttributeSet(w.signalAttrs))
		}
	}
	return errors.Join(
		t.builder.RegisterProcessorDedupEntriesCallback(func(_ context.Context, o metric.Int64Observer) error {
			snapshots(func(s windowSnapshot, attrs metric.ObserveOption) { o.Observe(int64(s.entries), attrs) })
			return nil
		}),
		t.builder.RegisterProcessorDedupEntriesLimitCallback(func(_ context.Context, o metric.Int64Observer) error {
			snapshots(func(s windowSnapshot, attrs metric.ObserveOption) { o.Observe(int64(s.limit), attrs) })
			return nil
		}),
		t.builder.RegisterProcessorDedupEffectiveWindowCallback(func(_ context.Context, o metric.Float64Observer) error {
			snapshots(func(s windowSnapshot, attrs metric.ObserveOption) { o.Observe(s.effective.Seconds(), attrs) })
			return nil
		}),
	)
}

// evictionsLocked returns the evictions not yet reported and marks them
// reported. Call with mu held.
func (w *signalWindow) evictionsLocked() (capacity, shrunk int64) {
	s := w.set.Stats()
	capacity = int64(s.Evicted - w.reported.Evicted)
	shrunk = int64(s.Shrunk - w.reported.Shrunk)
	w.reported = s
	return capacity, shrunk
}

// shrink removes a quarter of the window's entries, reports the evictions
// and returns how many it removed.
func (w *signalWindow) shrink(ctx context.Context, t *telemetry) int {
	w.mu.Lock()
	removed := w.set.Shrink(w.set.Len() / 4)
	capEv, shrunk := w.evictionsLocked()
	w.mu.Unlock()
	w.reportEvictions(ctx, t, capEv, shrunk)
	return removed
}

// window is the signal's window itself; every unit embeds one.
func (w *signalWindow) window() *signalWindow { return w }

func (w *signalWindow) reportEvictions(ctx context.Context, t *telemetry, capacity, shrunk int64) {
	if capacity > 0 {
		t.evicted.Add(ctx, capacity, w.capacityOpt)
	}
	if shrunk > 0 {
		t.evicted.Add(ctx, shrunk, w.shrinkOpt)
	}
}

// unit is one signal's part of the state: its window (or tracker) behind
// its lock, its services, its totals and, with storage, its journal. Each
// unit also judges its signal's requests and settles them (traces.go,
// logs.go, metrics.go); state holds the units, and persistence and memory
// pressure loop over them.
type unit interface {
	// window is the unit's entries behind its lock, as telemetry, the
	// status page and memory pressure see them.
	window() *signalWindow
	// reseed keys the unit's digests with the stored seed, before restore.
	reseed(seed window.Seed)
	// restore replays what storage holds for the unit (its journal, its
	// snapshot) into its window; the fields say what it restored.
	restore(ctx context.Context, client storage.Client, logger *zap.Logger) ([]zap.Field, error)
	// checkpoint trims the unit's journal to its window, or stores its
	// snapshot, logging what fails.
	checkpoint(ctx context.Context, now int64, logger *zap.Logger)
	// close ends the unit's use of storage, with a last checkpoint; the
	// fields say what it wrote.
	close(ctx context.Context, logger *zap.Logger) []zap.Field
}

// pending is what one request changed in its unit, settled once the next
// consumer has answered.
type pending interface {
	// commit journals what the delivered request stored, before the
	// sender is answered. A failure here costs a possible duplicate after a
	// crash, not data.
	commit(ctx context.Context)
	// rollback takes back what the refused request stored, so that the
	// sender's retry passes instead of being dropped as a duplicate.
	rollback(ctx context.Context, tel *telemetry)
}

// settle is the tail every consume path shares: err is the next
// consumer's answer to the request that changed p.
func settle(ctx context.Context, p pending, tel *telemetry, err error) error {
	if err != nil {
		p.rollback(ctx, tel)
		return err
	}
	p.commit(ctx)
	return nil
}

// maxSegments bounds each signal's journal: one segment per accepted
// request within the window. Past it the oldest segments go (counted), as
// if the window were full. Besides, a journal keeps no segment whose
// entries the window has evicted by capacity (journal.Options.MaxEntries).
const maxSegments = 200_000

// newSegmentBuf makes a pooled buffer for journal segments and snapshots.
func newSegmentBuf() any { b := make([]byte, 0, 64<<10); return &b }

func logSeed(s window.Seed) uint64    { return s[2] ^ s[3] }
func metricSeed(s window.Seed) uint64 { return s[0] ^ s[3] }

// journalStatus is a signal's journal as the status page shows it; false
// while storage is closed.
func journalStatus(signal string, j *journal.Journal) (statuspage.JournalStatus, bool) {
	if j == nil {
		return statuspage.JournalStatus{}, false
	}
	return statuspage.JournalStatus{Signal: signal, Segments: j.Len(), Limit: maxSegments}, true
}

// trimJournal drops j's segments older than cutoff; a failure is logged
// and retried at the next checkpoint.
func trimJournal(ctx context.Context, j *journal.Journal, cutoff int64, signal string, logger *zap.Logger) {
	if err := j.Trim(ctx, cutoff); err != nil {
		logger.Warn("trimming the stored "+signal+" window", zap.Error(err))
	}
}

// journalFields is what a signal's journal did, for the line that reports
// storage closing: segments written, trimmed as the window passed, dropped
// early (MaxSegments, or newer segments holding the window) and refused.
func journalFields(signal string, st journal.Stats) []zap.Field {
	return []zap.Field{
		zap.Uint64(signal+"_segments_written", st.Appended),
		zap.Uint64(signal+"_segments_trimmed", st.Trimmed),
		zap.Uint64(signal+"_segments_dropped", st.Dropped),
		zap.Uint64(signal+"_segments_failed", st.Failed),
	}
}

// unsettled orders one unit's journal around take-backs. A request's
// insert segment is written once the next consumer has accepted it
// (settle); a take-back's forget segment once a later component has lost
// some of its items. A take-back can come before the request that inserted
// those items is settled: a direct send the upstream refuses in part for
// good hands the refused items back from inside the next consumer, and a
// queue consumer can export (and lose) a request before settle. A forget
// segment journaled before its insert segment would be undone by it at
// replay, and after a restart the re-send of a lost item would be dropped
// as a duplicate. So every request with insertions is held here until it
// is settled; a take-back removes its keys from the requests held (which
// then never journal them) under order, held alone, while a commit holds
// order shared from taking its keys to writing its segment.
type unsettled[K comparable] struct {
	order sync.RWMutex
	mu    sync.Mutex
	reqs  map[strippable[K]]struct{}
}

// strippable is a request held in unsettled: strip removes the keys in
// gone from what it will journal.
type strippable[K comparable] interface {
	strip(gone map[K]struct{})
}

func (p *unsettled[K]) hold(r strippable[K]) {
	p.mu.Lock()
	if p.reqs == nil {
		p.reqs = make(map[strippable[K]]struct{})
	}
	p.reqs[r] = struct{}{}
	p.mu.Unlock()
}

func (p *unsettled[K]) release(r strippable[K]) {
	p.mu.Lock()
	delete(p.reqs, r)
	p.mu.Unlock()
}

// strip removes keys from every request held. Call with order held alone.
func (p *unsettled[K]) strip(keys []K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reqs) == 0 || len(keys) == 0 {
		return
	}
	gone := make(map[K]struct{}, len(keys))
	for _, k := range keys {
		gone[k] = struct{}{}
	}
	for r := range p.reqs {
		r.strip(gone)
	}
}
