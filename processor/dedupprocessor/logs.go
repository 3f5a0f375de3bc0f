package dedupprocessor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/pdataenc"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/journal"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// logUnit is the log signal: a window of 128-bit digests of log records,
// its services, and with storage its journal.
type logUnit struct {
	signalWindow
	records *window.Set[[16]byte, struct{}]
	max     int    // logs.max_records
	seed    uint64 // keys the digest, so that no client can aim a collision; guarded by mu
	svcs    *services
	journal atomic.Pointer[journal.Journal] // nil unless storage is open
	// unsettled holds the requests in the next consumer, so that a
	// take-back is never journaled before their insertions.
	unsettled unsettled[[16]byte]
	// flights are the same requests' insertions, that their copies wait
	// for (copies.go).
	flights  flights
	waitOpts waitOpts

	scratch sync.Pool // *logScratch
	bufs    sync.Pool // *[]byte, journal segments
}

// logScratch is one request's working memory and its pending change of
// the unit.
type logScratch struct {
	u        *logUnit
	now      int64
	enc      pdataenc.Encoder
	inserted [][16]byte
	counts   []counts
	held     bool // in u.unsettled, from hold to settle

	flight flight        // the request's insertions while the next consumer has them
	parked parkedFlights // the unsettled requests the parked copies wait for
	// wait holds the parked copies (copies.go), in their resources and
	// scopes, when parked.starts is not empty; waitRI and waitSI are the
	// request's resource and scope that waitRL and waitSL copy.
	wait           plog.Logs
	waitRL         plog.ResourceLogs
	waitSL         plog.ScopeLogs
	waitRI, waitSI int
	again          bool // judging parked copies again: counted when they arrived
}

func newLogUnit(cfg *Config, seed window.Seed, svcs *services) (*logUnit, error) {
	set, err := window.New[[16]byte, struct{}](cfg.Logs.MaxRecords, int64(cfg.Logs.Window), seed.Hash16)
	if err != nil {
		return nil, err
	}
	u := &logUnit{signalWindow: *newSignalWindow("logs", set, cfg.Logs.Window), records: set, seed: logSeed(seed), svcs: svcs,
		max: cfg.Logs.MaxRecords, waitOpts: newWaitOpts("logs"), flights: flights{maxWaiters: cfg.Copies.MaxWaitersPerOriginal}}
	u.scratch.New = func() any { return &logScratch{u: u, enc: pdataenc.Encoder{InOrder: true}} }
	u.bufs.New = newSegmentBuf
	return u, nil
}

// digest is the seeded XXH3-128 of prefix (the resource and scope digest)
// followed by the record's encoding (maps in stored order): timestamps, severity, body,
// attributes, event name and trace context.
func (u *logUnit) digest(e *pdataenc.Encoder, prefix [16]byte, r plog.LogRecord) [16]byte {
	e.Reset()
	e.B = append(e.B, prefix[:]...)
	e.U64(uint64(r.Timestamp()))
	e.U64(uint64(r.ObservedTimestamp()))
	e.U64(uint64(r.SeverityNumber()))
	e.Str(r.SeverityText())
	e.Value(r.Body())
	e.Attrs(r.Attributes())
	e.U64(uint64(r.DroppedAttributesCount()))
	e.U64(uint64(r.Flags()))
	tid, sid := r.TraceID(), r.SpanID()
	e.B = append(e.B, tid[:]...)
	e.B = append(e.B, sid[:]...)
	e.Str(r.EventName())
	return u.hash(e.B)
}

func (u *logUnit) hash(b []byte) [16]byte {
	return xxh3.Hash128Seed(b, u.seed).Bytes()
}

// begin takes a request's scratch; end gives it back.
func (u *logUnit) begin() *logScratch {
	sc := u.scratch.Get().(*logScratch)
	sc.inserted, sc.counts = sc.inserted[:0], sc.counts[:0]
	sc.again = false
	sc.now = u.now()
	return sc
}

// park sets record r aside, a copy whose original is unsettled, into
// sc.wait under a copy of its resource rl (the ri-th of the request) and
// scope sl (the si-th).
func (sc *logScratch) park(rl plog.ResourceLogs, ri int, sl plog.ScopeLogs, si int, r plog.LogRecord) {
	if sc.wait == (plog.Logs{}) {
		sc.wait, sc.waitRI = plog.NewLogs(), -1
	}
	if sc.waitRI != ri {
		sc.waitRL = sc.wait.ResourceLogs().AppendEmpty()
		rl.Resource().CopyTo(sc.waitRL.Resource())
		sc.waitRL.SetSchemaUrl(rl.SchemaUrl())
		sc.waitRI, sc.waitSI = ri, -1
	}
	if sc.waitSI != si {
		sc.waitSL = sc.waitRL.ScopeLogs().AppendEmpty()
		sl.Scope().CopyTo(sc.waitSL.Scope())
		sc.waitSL.SetSchemaUrl(sl.SchemaUrl())
		sc.waitSI = si
	}
	r.MoveTo(sc.waitSL.LogRecords().AppendEmpty())
}

// parkedCopies hands over the copies parked while judging and the
// flights they wait for, and clears them from sc.
func (sc *logScratch) parkedCopies() (plog.Logs, []uint64) {
	ld, starts := sc.wait, append([]uint64(nil), sc.parked.starts...)
	sc.wait, sc.waitRL, sc.waitSL = plog.Logs{}, plog.ResourceLogs{}, plog.ScopeLogs{}
	sc.parked.starts = sc.parked.starts[:0]
	return ld, starts
}

func (u *logUnit) end(sc *logScratch) { u.scratch.Put(sc) }

// resourceDigest and scopeDigest are what a resource's and a scope's
// records are keyed under (digest's prefix).
func (u *logUnit) resourceDigest(e *pdataenc.Encoder, rl plog.ResourceLogs) [16]byte {
	e.Reset()
	e.Resource(rl.Resource())
	e.Str(rl.SchemaUrl())
	return u.hash(e.B)
}

func (u *logUnit) scopeDigest(e *pdataenc.Encoder, res [16]byte, sl plog.ScopeLogs) [16]byte {
	e.Reset()
	e.B = append(e.B, res[:]...)
	e.Scope(sl.Scope())
	e.Str(sl.SchemaUrl())
	return u.hash(e.B)
}

// judge judges every record of ld into the window, counts them and, with
// drop, removes the duplicates. It says whether anything is left to
// forward.
func (u *logUnit) judge(ctx context.Context, ld plog.Logs, sc *logScratch, tel *telemetry, drop bool) bool {
	now := sc.now
	var total, kept int64
	rls := ld.ResourceLogs()
	u.mu.Lock()
	u.records.Expire(now)
	start := u.records.Written()
	sc.parked.reset(start)
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		sc.counts = append(sc.counts, counts{svc: u.svcs.get(rl.Resource())})
		c := &sc.counts[len(sc.counts)-1]
		resDigest := u.resourceDigest(&sc.enc, rl)
		var scopeDigest [16]byte
		var sl plog.ScopeLogs
		si := -1
		var cs copyScope
		keep := func(r plog.LogRecord) bool {
			c.received++
			k := u.digest(&sc.enc, scopeDigest, r)
			if _, seen, seq := u.records.ObserveSeq(&k, u.records.Hash(&k), struct{}{}, now); seen {
				c.duplicates++
				c.copyIn(&cs, u.svcs.releases, si, sl.Scope())
				if drop && sc.parked.waitsFor(&u.flights, seq) {
					sc.park(rl, i, sl, si, r)
					return false
				}
				return !drop
			}
			sc.inserted = append(sc.inserted, k)
			return true
		}
		if drop {
			rl.ScopeLogs().RemoveIf(func(scope plog.ScopeLogs) bool {
				sl = scope
				si++
				scopeDigest = u.scopeDigest(&sc.enc, resDigest, sl)
				sl.LogRecords().RemoveIf(func(r plog.LogRecord) bool { return !keep(r) })
				return sl.LogRecords().Len() == 0
			})
		} else {
			sls := rl.ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				sl, si = sls.At(j), j
				scopeDigest = u.scopeDigest(&sc.enc, resDigest, sl)
				recs := sl.LogRecords()
				for k := 0; k < recs.Len(); k++ {
					keep(recs.At(k))
				}
			}
		}
		total += c.received
		kept += c.received - c.duplicates
	}
	if drop {
		rls.RemoveIf(func(rl plog.ResourceLogs) bool { return rl.ScopeLogs().Len() == 0 })
	}
	if end := u.records.Written(); end > start {
		// Registered before the lock is let go: no copy finds these
		// records without finding them unsettled.
		u.flights.register(&sc.flight, start, end)
	}
	capEv, shrunk := u.evictionsLocked()
	u.mu.Unlock()

	u.reportEvictions(ctx, tel, capEv, shrunk)
	if !sc.again {
		u.svcs.record(sc.counts, drop, total > 0 && kept == 0, "log records")
	}
	return !drop || rls.Len() > 0
}

// hold keeps a request that inserted records in u.unsettled while the
// next consumer has it.
func (u *logUnit) hold(sc *logScratch) {
	if len(sc.inserted) > 0 {
		u.unsettled.hold(sc)
		sc.held = true
	}
}

// strip removes the digests in gone from what the request will journal.
func (sc *logScratch) strip(gone map[[16]byte]struct{}) {
	n := 0
	for _, k := range sc.inserted {
		if _, ok := gone[k]; !ok {
			sc.inserted[n] = k
			n++
		}
	}
	sc.inserted = sc.inserted[:n]
}

func (sc *logScratch) commit(ctx context.Context) {
	defer sc.u.flights.settle(&sc.flight)
	if !sc.held {
		return
	}
	u := sc.u
	u.unsettled.order.RLock()
	defer u.unsettled.order.RUnlock()
	u.unsettled.release(sc)
	sc.held = false
	if len(sc.inserted) == 0 {
		return
	}
	if j := u.journal.Load(); j != nil {
		_ = u.appendSegment(ctx, j, sc.now, sc.inserted, false)
	}
}

func (sc *logScratch) rollback(ctx context.Context, tel *telemetry) {
	// The insertions are forgotten before the flight is settled: a copy
	// woken by the settling finds them gone and passes as new.
	defer sc.u.flights.settle(&sc.flight)
	if sc.held {
		sc.u.unsettled.release(sc)
		sc.held = false
	}
	if len(sc.inserted) == 0 {
		return
	}
	tel.rolledBack.Add(ctx, forgetHeld(&sc.u.signalWindow, sc.u.records, sc.inserted), sc.u.signalOpt)
}

// takeBack forgets the records of ld that the window holds and returns
// their digests; the requests not settled yet will not journal any record
// of ld. Call with u.unsettled.order held alone.
func (u *logUnit) takeBack(ld plog.Logs) [][16]byte {
	sc := u.scratch.Get().(*logScratch)
	defer u.scratch.Put(sc)
	var keys, all [][16]byte
	defer func() { u.unsettled.strip(all) }()
	rls := ld.ResourceLogs()
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		resDigest := u.resourceDigest(&sc.enc, rl)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			scopeDigest := u.scopeDigest(&sc.enc, resDigest, sl)
			recs := sl.LogRecords()
			for k := 0; k < recs.Len(); k++ {
				key := u.digest(&sc.enc, scopeDigest, recs.At(k))
				all = append(all, key)
				if u.records.Forget(key) {
					keys = append(keys, key)
				}
			}
		}
	}
	return keys
}

// logRecord is one stored log record: its digest.
const logRecord = 16

// appendSegment journals digests: stored by a delivered request, or taken
// back (forget).
func (u *logUnit) appendSegment(ctx context.Context, j *journal.Journal, at int64, keys [][16]byte, forget bool) error {
	bp := u.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, k := range keys {
		b = append(b, k[:]...)
	}
	var err error
	if forget {
		err = j.AppendForget(ctx, at, b)
	} else {
		err = j.Append(ctx, at, b)
	}
	*bp = b
	u.bufs.Put(bp)
	return err
}

// forgetKeys journals that the given digests were taken back.
func (u *logUnit) forgetKeys(ctx context.Context, keys [][16]byte) error {
	j := u.journal.Load()
	if j == nil {
		return nil
	}
	return u.appendSegment(ctx, j, u.now(), keys, true)
}

// storedJournal is the unit's journal while storage is open.
func (u *logUnit) storedJournal() *journal.Journal { return u.journal.Load() }

// reseed keys the digests with the stored seed, so that this run's
// digests match the journal's.
func (u *logUnit) reseed(seed window.Seed) {
	u.mu.Lock()
	u.seed = logSeed(seed)
	u.mu.Unlock()
}

// restore opens the log journal and replays it into the window.
func (u *logUnit) restore(ctx context.Context, client storage.Client, _ *zap.Logger) ([]zap.Field, error) {
	logs := 0
	u.mu.Lock()
	defer u.mu.Unlock()
	j, err := journal.Open(ctx, client, journal.Options{
		Prefix: "logs/", MaxSegments: maxSegments, MaxEntries: u.max, RecordSize: logRecord,
		Insert: func(at int64, b []byte) {
			for ; len(b) >= logRecord; b = b[logRecord:] {
				u.records.Observe([16]byte(b[:16]), struct{}{}, at)
				logs++
			}
		},
		Forget: func(b []byte) {
			for ; len(b) >= logRecord; b = b[logRecord:] {
				u.records.Forget([16]byte(b[:16]))
			}
		},
	})
	if err != nil {
		return nil, err
	}
	u.journal.Store(j)
	return []zap.Field{zap.Int("log_digests", logs), zap.Int("log_segments", j.Len())}, nil
}

// checkpoint drops the journal's segments older than the window.
func (u *logUnit) checkpoint(ctx context.Context, now int64, logger *zap.Logger) {
	trimJournal(ctx, u.journal.Load(), now-int64(u.configured), "log", logger)
}

func (u *logUnit) close(context.Context, *zap.Logger) []zap.Field {
	return journalFields("log", u.journal.Swap(nil).Stats())
}
