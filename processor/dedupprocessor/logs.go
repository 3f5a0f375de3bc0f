package dedupprocessor

import (
	"context"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/doubletake/doubletake/internal/pdataenc"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// logWindow remembers 128-bit digests of log records.
type logWindow struct {
	signalWindow
	records *window.Set[[16]byte, struct{}]
	seed    uint64 // keys the digest, so that no client can aim a collision
	totals  atomicTotals

	now func() int64 // the clock, in Unix nanoseconds; tests replace it

	scratch sync.Pool // *logScratch
}

type logScratch struct {
	enc      pdataenc.Encoder
	inserted [][16]byte
	counts   []counts
}

func newLogWindow(cfg *Config, seed window.Seed) (*logWindow, error) {
	set, err := window.New[[16]byte, struct{}](cfg.Logs.MaxRecords, int64(cfg.Logs.Window), seed.Hash16)
	if err != nil {
		return nil, err
	}
	w := &logWindow{signalWindow: *newSignalWindow("logs", set), records: set, seed: logSeed(seed)}
	w.now = func() int64 { return time.Now().UnixNano() }
	w.scratch.New = func() any { return &logScratch{} }
	return w, nil
}

// digest is the seeded XXH3-128 of prefix (the resource and scope digest)
// followed by the record's canonical encoding: timestamps, severity, body,
// attributes, event name and trace context.
func (w *logWindow) digest(e *pdataenc.Encoder, prefix [16]byte, r plog.LogRecord) [16]byte {
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
	return w.hash(e.B)
}

func (w *logWindow) hash(b []byte) [16]byte {
	return xxh3.Hash128Seed(b, w.seed).Bytes()
}

type logsProcessor struct {
	component.StartFunc
	component.ShutdownFunc
	st           *state
	next         consumer.Logs
	drop         bool
	capabilities consumer.Capabilities
}

func (p *logsProcessor) Capabilities() consumer.Capabilities { return p.capabilities }

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	w := p.st.logs
	sc := w.scratch.Get().(*logScratch)
	sc.inserted, sc.counts = sc.inserted[:0], sc.counts[:0]
	defer w.scratch.Put(sc)

	now := w.now()
	var total, kept int64
	rls := ld.ResourceLogs()
	w.mu.Lock()
	w.records.Expire(now)
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		sc.counts = append(sc.counts, counts{svc: p.st.logSvcs.get(rl.Resource())})
		c := &sc.counts[len(sc.counts)-1]
		sc.enc.Reset()
		sc.enc.Resource(rl.Resource())
		sc.enc.Str(rl.SchemaUrl())
		resDigest := w.hash(sc.enc.B)
		var scopeDigest [16]byte
		keep := func(r plog.LogRecord) bool {
			c.received++
			k := w.digest(&sc.enc, scopeDigest, r)
			if _, seen := w.records.Observe(k, struct{}{}, now); seen {
				c.duplicates++
				return !p.drop
			}
			sc.inserted = append(sc.inserted, k)
			return true
		}
		scopeOf := func(sl plog.ScopeLogs) {
			sc.enc.Reset()
			sc.enc.B = append(sc.enc.B, resDigest[:]...)
			sc.enc.Scope(sl.Scope())
			sc.enc.Str(sl.SchemaUrl())
			scopeDigest = w.hash(sc.enc.B)
		}
		if p.drop {
			rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
				scopeOf(sl)
				sl.LogRecords().RemoveIf(func(r plog.LogRecord) bool { return !keep(r) })
				return sl.LogRecords().Len() == 0
			})
		} else {
			sls := rl.ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				scopeOf(sls.At(j))
				recs := sls.At(j).LogRecords()
				for k := 0; k < recs.Len(); k++ {
					keep(recs.At(k))
				}
			}
		}
		total += c.received
		kept += c.received - c.duplicates
	}
	if p.drop {
		rls.RemoveIf(func(rl plog.ResourceLogs) bool { return rl.ScopeLogs().Len() == 0 })
	}
	capEv, shrunk := w.evictionsLocked()
	w.mu.Unlock()

	w.reportEvictions(ctx, p.st.tel, capEv, shrunk)
	w.totals.add(sc.counts)
	p.st.logSvcs.record(ctx, p.st.tel, sc.counts, p.drop, false, total > 0 && kept == 0, "log records")

	if p.drop && rls.Len() == 0 {
		return nil
	}
	err := p.next.ConsumeLogs(ctx, ld)
	if err == nil && len(sc.inserted) > 0 && p.st.persist != nil {
		_ = p.st.persist.appendLogs(ctx, now, sc.inserted)
	}
	if err != nil && len(sc.inserted) > 0 {
		w.mu.Lock()
		var n int64
		for _, k := range sc.inserted {
			if w.records.Forget(k) {
				n++
			}
		}
		w.mu.Unlock()
		p.st.tel.rolledBack.Add(ctx, n, w.signalOpt)
	}
	return err
}
