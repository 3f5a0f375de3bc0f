package dedupprocessor

import (
	"context"
	"sync"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/doubletake/doubletake/internal/pdataenc"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// logUnit is the log signal: a window of 128-bit digests of log records
// (keyed.go), its services, and with storage its journal.
type logUnit struct {
	keyedUnit[[16]byte, struct{}]
	seed    uint64    // keys the digest, so that no client can aim a collision; guarded by mu
	scratch sync.Pool // *logScratch
}

// logScratch is one request's working memory and its pending change of
// the unit.
type logScratch struct {
	keyedChange[[16]byte, struct{}]
	enc  pdataenc.Encoder
	wait parkedItems[plog.Logs, plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord, logLayout]
}

// logRecord is one stored log record: its digest.
const logRecord = 16

// logFormat journals a log record as its digest.
var logFormat = keyFormat[[16]byte, struct{}]{
	signal: "logs", name: "log", restored: "log_digests", keySize: logRecord, record: logRecord,
	putKey: func(b []byte, k *[16]byte) []byte { return append(b, k[:]...) },
	key:    func(b []byte) [16]byte { return [16]byte(b[:16]) },
	value:  func([]byte) struct{} { return struct{}{} },
}

func newLogUnit(cfg *Config, seed window.Seed, svcs *services) (*logUnit, error) {
	set, err := window.New[[16]byte, struct{}](cfg.Logs.MaxRecords, int64(cfg.Logs.Window), seed.Hash16)
	if err != nil {
		return nil, err
	}
	u := &logUnit{seed: logSeed(seed)}
	u.init(&logFormat, set, cfg.Logs.MaxRecords, cfg.Logs.Window, cfg, svcs)
	u.scratch.New = func() any {
		sc := &logScratch{enc: pdataenc.Encoder{InOrder: true}}
		sc.u = &u.keyedUnit
		return sc
	}
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
	sc.reset(u.now())
	return sc
}

// logLayout is how parked log records are laid out (parkedItems).
type logLayout struct{}

func (logLayout) new() plog.Logs { return plog.NewLogs() }
func (logLayout) resource(ld plog.Logs) plog.ResourceLogs {
	return ld.ResourceLogs().AppendEmpty()
}
func (logLayout) scope(rl plog.ResourceLogs) plog.ScopeLogs {
	return rl.ScopeLogs().AppendEmpty()
}
func (logLayout) move(r plog.LogRecord, sl plog.ScopeLogs) { r.MoveTo(sl.LogRecords().AppendEmpty()) }

var _ layout[plog.Logs, plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord] = logLayout{}

// parkedCopies hands over the copies parked while judging and the
// flights they wait for, and clears them from sc.
func (sc *logScratch) parkedCopies() (plog.Logs, []uint64) {
	return sc.wait.take(), sc.parkedStarts()
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
	u.set.Expire(now)
	start := u.set.Written()
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
			if _, seen, seq := u.set.ObserveSeq(&k, u.set.Hash(&k), struct{}{}, now); seen {
				c.duplicates++
				c.copyIn(&cs, u.svcs.releases, si, sl.Scope())
				if drop && sc.parked.waitsFor(&u.flights, seq) {
					sc.wait.park(rl, i, sl, si, r)
					return false
				}
				return !drop
			}
			sc.insert(k, struct{}{})
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
	if end := u.set.Written(); end > start {
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

// takeBack forgets the records of ld that the window holds and returns
// their digests; the requests not settled yet will not journal any record
// of ld. Call with u.unsettled.order held alone.
func (u *logUnit) takeBack(ld plog.Logs) [][16]byte {
	sc := u.scratch.Get().(*logScratch)
	defer u.scratch.Put(sc)
	// The digests are taken under the window's lock, which guards the seed.
	return u.keyedUnit.takeBack(func(yield func([16]byte)) {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			rl := rls.At(i)
			resDigest := u.resourceDigest(&sc.enc, rl)
			sls := rl.ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				sl := sls.At(j)
				scopeDigest := u.scopeDigest(&sc.enc, resDigest, sl)
				recs := sl.LogRecords()
				for k := 0; k < recs.Len(); k++ {
					yield(u.digest(&sc.enc, scopeDigest, recs.At(k)))
				}
			}
		}
	})
}

// reseed keys the digests with the stored seed, so that this run's
// digests match the journal's.
func (u *logUnit) reseed(seed window.Seed) {
	u.mu.Lock()
	u.seed = logSeed(seed)
	u.mu.Unlock()
}
