package dedupprocessor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/journal"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// This file is what the span and log units share: a window of keys (span
// ids, log record digests) with a value each (a span's fingerprint,
// nothing for a log record), the requests' pending changes of it, held
// until settled, and its journal. traces.go and logs.go judge their
// signal's items into it; metrics.go keeps streams instead.

// keyedUnit is one keyed signal's window, its services and, with storage,
// its journal.
type keyedUnit[K comparable, V any] struct {
	signalWindow
	set     *window.Set[K, V]
	format  *keyFormat[K, V]
	max     int // traces.max_spans, logs.max_records
	svcs    *services
	journal atomic.Pointer[journal.Journal] // nil unless storage is open
	// unsettled holds the requests in the next consumer, so that a
	// take-back is never journaled before their insertions.
	unsettled unsettled[K]
	// flights are the same requests' insertions, that their copies wait
	// for (copies.go).
	flights  flights
	waitOpts waitOpts

	bufs sync.Pool // *[]byte, journal segments
}

// keyFormat is how a keyed unit's entries are stored: a journal record is
// the key then the value, a forget record the key alone.
type keyFormat[K comparable, V any] struct {
	signal   string // "traces", "logs": the window's and the journal's name
	name     string // "span", "log": what the log fields of its journal say
	restored string // the field counting the entries restored
	keySize  int
	// record is the size of one journal record: keySize and the value's.
	record   int
	putKey   func(b []byte, k *K) []byte
	putValue func(b []byte, v V) []byte // nil: the value is not stored
	key      func(b []byte) K
	value    func(b []byte) V // reads the value after the key
}

// init makes u the window set, of configured reach, for maxEntries
// (traces.max_spans, logs.max_records), stored in format f.
func (u *keyedUnit[K, V]) init(f *keyFormat[K, V], set *window.Set[K, V], maxEntries int, configured time.Duration, cfg *Config, svcs *services) {
	u.signalWindow = *newSignalWindow(f.signal, set, configured)
	u.set, u.format, u.max, u.svcs = set, f, maxEntries, svcs
	u.waitOpts, u.flights = newWaitOpts(f.signal), flights{maxWaiters: cfg.Copies.MaxWaitersPerOriginal}
	u.bufs.New = newSegmentBuf
}

// keyedChange is one request's pending change of a keyed unit: the keys it
// inserted, with their values, to journal once the next consumer accepts
// the request or to take back if it refuses it.
type keyedChange[K comparable, V any] struct {
	u        *keyedUnit[K, V]
	now      int64
	inserted []K      // keys this request stored, to take back on failure
	values   []V      // their values, to journal on success
	counts   []counts // per resource
	held     bool     // in u.unsettled, from hold to settle

	flight flight        // the request's insertions while the next consumer has them
	parked parkedFlights // the unsettled requests the parked copies wait for
	again  bool          // judging parked copies again: counted when they arrived
}

// reset readies c for a request that arrives at now.
func (c *keyedChange[K, V]) reset(now int64) {
	c.inserted, c.values, c.counts = c.inserted[:0], c.values[:0], c.counts[:0]
	c.again = false
	c.now = now
}

// insert records that the request stored k with v.
func (c *keyedChange[K, V]) insert(k K, v V) {
	c.inserted = append(c.inserted, k)
	c.values = append(c.values, v)
}

// hold keeps a request that inserted entries in its unit's unsettled
// while the next consumer has it.
func (c *keyedChange[K, V]) hold() {
	if len(c.inserted) > 0 {
		c.u.unsettled.hold(c)
		c.held = true
	}
}

// strip removes the keys in gone from what the request will journal: a
// later component lost them before the request was settled.
func (c *keyedChange[K, V]) strip(gone map[K]struct{}) {
	n := 0
	for i, k := range c.inserted {
		if _, ok := gone[k]; !ok {
			c.inserted[n], c.values[n] = k, c.values[i]
			n++
		}
	}
	c.inserted, c.values = c.inserted[:n], c.values[:n]
}

func (c *keyedChange[K, V]) commit(ctx context.Context) {
	defer c.u.flights.settle(&c.flight)
	if !c.held {
		return
	}
	u := c.u
	u.unsettled.order.RLock()
	defer u.unsettled.order.RUnlock()
	u.unsettled.release(c)
	c.held = false
	if len(c.inserted) == 0 {
		return
	}
	if j := u.journal.Load(); j != nil {
		_ = u.appendSegment(ctx, j, c.now, c.inserted, c.values)
	}
}

func (c *keyedChange[K, V]) rollback(ctx context.Context, tel *telemetry) {
	// The insertions are forgotten before the flight is settled: a copy
	// woken by the settling finds them gone and passes as new.
	defer c.u.flights.settle(&c.flight)
	if c.held {
		c.u.unsettled.release(c)
		c.held = false
	}
	if len(c.inserted) == 0 {
		return
	}
	tel.rolledBack.Add(ctx, c.u.forgetHeld(c.inserted), c.u.signalOpt)
}

// forgetHeld forgets keys under the window's lock and returns how many of
// them it held: a request's insertions taken back when the next consumer
// refused it.
func (u *keyedUnit[K, V]) forgetHeld(keys []K) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	var n int64
	for _, k := range keys {
		if u.set.Forget(k) {
			n++
		}
	}
	return n
}

// takeBack forgets the entries whose keys walk yields (under the window's
// lock) that the window holds and returns their keys; the requests not
// settled yet will not journal any key walk yields. Call with
// u.unsettled.order held alone.
func (u *keyedUnit[K, V]) takeBack(walk func(yield func(K))) []K {
	var keys, all []K
	defer func() { u.unsettled.strip(all) }()
	u.mu.Lock()
	defer u.mu.Unlock()
	walk(func(k K) {
		all = append(all, k)
		if u.set.Forget(k) {
			keys = append(keys, k)
		}
	})
	return keys
}

// appendSegment journals the entries a delivered request stored.
func (u *keyedUnit[K, V]) appendSegment(ctx context.Context, j *journal.Journal, at int64, keys []K, values []V) error {
	bp := u.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	f := u.format
	for i := range keys {
		b = f.putKey(b, &keys[i])
		if f.putValue != nil {
			b = f.putValue(b, values[i])
		}
	}
	err := j.Append(ctx, at, b)
	*bp = b
	u.bufs.Put(bp)
	return err
}

// forgetKeys journals that the given keys were taken back.
func (u *keyedUnit[K, V]) forgetKeys(ctx context.Context, keys []K) error {
	j := u.journal.Load()
	if j == nil {
		return nil
	}
	bp := u.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for i := range keys {
		b = u.format.putKey(b, &keys[i])
	}
	err := j.AppendForget(ctx, u.now(), b)
	*bp = b
	u.bufs.Put(bp)
	return err
}

// storedJournal is the unit's journal while storage is open.
func (u *keyedUnit[K, V]) storedJournal() *journal.Journal { return u.journal.Load() }

// restore opens the unit's journal and replays it into the window.
func (u *keyedUnit[K, V]) restore(ctx context.Context, client storage.Client, _ *zap.Logger) ([]zap.Field, error) {
	f := u.format
	n := 0
	u.mu.Lock()
	defer u.mu.Unlock()
	j, err := journal.Open(ctx, client, journal.Options{
		Prefix: f.signal + "/", MaxSegments: maxSegments, MaxEntries: u.max, RecordSize: f.record,
		Insert: func(at int64, b []byte) {
			for ; len(b) >= f.record; b = b[f.record:] {
				u.set.Observe(f.key(b), f.value(b), at)
				n++
			}
		},
		Forget: func(b []byte) {
			for ; len(b) >= f.keySize; b = b[f.keySize:] {
				u.set.Forget(f.key(b))
			}
		},
	})
	if err != nil {
		return nil, err
	}
	u.journal.Store(j)
	return []zap.Field{zap.Int(f.restored, n), zap.Int(f.name+"_segments", j.Len())}, nil
}

// checkpoint drops the journal's segments older than the window.
func (u *keyedUnit[K, V]) checkpoint(ctx context.Context, now int64, logger *zap.Logger) {
	trimJournal(ctx, u.journal.Load(), now-int64(u.configured), u.format.name, logger)
}

func (u *keyedUnit[K, V]) close(context.Context, *zap.Logger) []zap.Field {
	return journalFields(u.format.name, u.journal.Swap(nil).Stats())
}

// parking says whether the request parked copies while judged.
func (c *keyedChange[K, V]) parking() bool { return len(c.parked.starts) > 0 }

// judgeAgain marks the request as parked copies judged again: they were
// counted when they arrived.
func (c *keyedChange[K, V]) judgeAgain() { c.again = true }

// parkedStarts hands over the flights the parked copies wait for.
func (c *keyedChange[K, V]) parkedStarts() []uint64 {
	starts := append([]uint64(nil), c.parked.starts...)
	c.parked.starts = c.parked.starts[:0]
	return starts
}
