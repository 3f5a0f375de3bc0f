package dedupprocessor

import (
	"context"
	"fmt"
	"hash/maphash"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// sweepBase is how many stream slots every request looks at for quiet
// streams, on top of one per point it carries: a full pass over
// metrics.max_streams slots takes at most max_streams points of traffic.
const sweepBase = 64

func newMetricUnit(cfg *Config, seed window.Seed, svcs *services) (*metricUnit, error) {
	tr, err := streams.NewTracker(cfg.Metrics.policy())
	if err != nil {
		return nil, err
	}
	u := &metricUnit{
		signalWindow: *newSignalWindow("metrics", trackerSet{tr}, cfg.Metrics.MaxStale),
		tracker:      tr,
		// Keyed per process like the other windows: no client can aim a
		// collision of stream IDs.
		hasher: streams.NewHasher(metricSeed(seed)),
		svcs:   svcs,
		rec:    metricRecorder{svcs: svcs, maxStreams: cfg.Metrics.MaxStreams},
		auto:   cfg.Metrics.Overlap == OverlapAuto,
		copies: metricFlights{flights: flights{maxWaiters: cfg.Copies.MaxWaitersPerOriginal}, waitOpts: newWaitOpts("metrics")},
		// Per process: a sender cannot aim its connection's name at another's.
		connSeed: maphash.MakeSeed(),
	}
	u.scratch.New = func() any { return &metricScratch{u: u} }
	u.bufs.New = newSegmentBuf
	return u, nil
}

// begin takes a request's scratch; end gives it back.
func (u *metricUnit) begin() *metricScratch {
	sc := u.scratch.Get().(*metricScratch)
	sc.counts = sc.counts[:0]
	sc.released = sc.released[:0]
	sc.restarted = sc.restarted[:0]
	sc.journal.Reset()
	sc.park.reset(sc)
	sc.again = false
	return sc
}

func (u *metricUnit) end(sc *metricScratch) { u.scratch.Put(sc) }

// judge judges every point of md, which came on connection conn (connOf),
// under one lock, recording what it changes in sc.journal, and, with drop, removes what is to be dropped
// (and the metrics, scopes and resources left empty). It says whether
// anything is left to forward.
func (u *metricUnit) judge(md pmetric.Metrics, sc *metricScratch, drop bool, splitAttr string, conn uint64) bool {
	j := &sc.j
	*j = judging{tracker: u.tracker, now: u.now(), mutate: drop, splitAttr: splitAttr, auto: u.auto, releases: u.svcs.releases, park: &sc.park, copies: &u.copies, conn: conn}
	points := md.DataPointCount()
	rms := md.ResourceMetrics()
	u.mu.Lock()
	j.hasher = u.hasher // reseed replaces it under mu
	u.tracker.Sweep(j.now, sweepBase+points)
	u.tracker.Record(&sc.journal)
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		sc.counts = append(sc.counts, metricCounts{svc: u.svcs.get(rm.Resource())})
		j.c = &sc.counts[len(sc.counts)-1]
		j.hasher.Resource(rm.Resource())
		j.rm = rm
		if drop {
			rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
				j.sm = sm
				j.hasher.Scope(sm.Scope())
				u.tracker.NewScope(j.hasher.Identity())
				j.origin = j.hasher.Origin()
				sm.Metrics().RemoveIf(func(m pmetric.Metric) bool { return !j.keepMetric(m) })
				return sm.Metrics().Len() == 0
			})
			continue
		}
		sms := rm.ScopeMetrics()
		for k := 0; k < sms.Len(); k++ {
			sm := sms.At(k)
			j.sm = sm
			j.hasher.Scope(sm.Scope())
			u.tracker.NewScope(j.hasher.Identity())
			j.origin = j.hasher.Origin()
			ms := sm.Metrics()
			for n := 0; n < ms.Len(); n++ {
				j.keepMetric(ms.At(n))
			}
		}
	}
	if drop {
		rms.RemoveIf(func(rm pmetric.ResourceMetrics) bool { return rm.ScopeMetrics().Len() == 0 })
		// The held points of writers this request decided peers: sent with
		// it (a copy kept to hold again if it fails downstream).
		u.tracker.TakeReleased(func(id streams.ID, writer uint64, h pmetric.Metrics, size int) {
			c := pmetric.NewMetrics()
			h.CopyTo(c)
			sc.released = append(sc.released, releasedPoint{id: id, writer: writer, md: c, size: size})
			h.ResourceMetrics().MoveAndAppendTo(rms)
		})
	}
	u.tracker.Record(nil)
	if drop {
		u.takeRestarts(rms, sc, j.now) // metrics_restart.go
	}
	expired := u.tracker.HeldExpired()
	sc.forgotten = 0
	if f := u.tracker.ExportTimesForgotten(); f != u.exportsReported {
		sc.forgotten, u.exportsReported = int64(f-u.exportsReported), f
	}
	if drop && rms.Len() > 0 && sc.journal.Len() > 0 {
		u.copies.register(sc)
	}
	u.mu.Unlock()
	*j = judging{}

	if sc.again {
		sc.counts = sc.counts[:0]
	}
	u.rec.record(sc.counts, expired)
	// Nothing left: every point was a repeat or another writer's.
	return !drop || rms.Len() > 0
}

// commit keeps the judgements: the streams are checkpointed whole, every
// checkpoint_interval, not per request.
func (sc *metricScratch) commit(context.Context) {
	if !sc.mflight.flight.on {
		return
	}
	u := sc.u
	u.mu.Lock()
	u.copies.unlist(sc)
	u.mu.Unlock()
	u.copies.flights.settle(&sc.mflight.flight)
}

// rollback takes the judgements back, so that the sender's retry is judged
// afresh instead of as an exact repeat, and an election the backend never
// saw is not kept.
func (sc *metricScratch) rollback(ctx context.Context, tel *telemetry) {
	if sc.journal.Len() == 0 && len(sc.released) == 0 && len(sc.restarted) == 0 && !sc.mflight.flight.on {
		return
	}
	u := sc.u
	u.mu.Lock()
	if sc.mflight.flight.on {
		u.copies.refusals++
	}
	u.copies.unlist(sc)
	n := u.tracker.Undo(&sc.journal)
	for _, r := range sc.released {
		u.tracker.Rehold(r.id, r.writer, r.md, r.size)
	}
	for _, r := range sc.restarted {
		u.tracker.RestartRehold(r.md, r.size)
	}
	u.mu.Unlock()
	// The copies that waited for it are judged again after the undo.
	u.copies.flights.settle(&sc.mflight.flight)
	if n > 0 {
		tel.rolledBack.Add(ctx, int64(n), u.signalOpt)
	}
}

// judgeStats is the classifier's count of writers, for observeWriters.
func (u *metricUnit) judgeStats() streams.JudgeStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tracker.JudgeStats()
}

// reseed keys the stream ids with the stored seed, so that this run's ids
// match the snapshot's.
func (u *metricUnit) reseed(seed window.Seed) {
	u.mu.Lock()
	u.hasher = streams.NewHasher(metricSeed(seed))
	u.mu.Unlock()
}

// restore reads the streams' snapshot into the tracker. A stale or foreign
// snapshot is ignored: elections start afresh.
func (u *metricUnit) restore(ctx context.Context, client storage.Client, logger *zap.Logger) ([]zap.Field, error) {
	snap, err := client.Get(ctx, metricsSnapshotKey)
	if err != nil {
		return nil, fmt.Errorf("storage: reading the metric streams: %w", err)
	}
	restored := 0
	if snap != nil {
		u.mu.Lock()
		restored, err = u.tracker.Restore(snap)
		u.mu.Unlock()
		if err != nil {
			logger.Warn("ignoring the stored metric streams", zap.Error(err))
		}
	}
	u.store = client
	return []zap.Field{zap.Int("metric_streams", restored)}, nil
}

// checkpoint stores the streams' state, once the requests in flight when
// it was taken are settled (copies_metrics.go).
func (u *metricUnit) checkpoint(ctx context.Context, _ int64, logger *zap.Logger) {
	if err := u.storeSettled(ctx, u.store); err != nil {
		logger.Warn("checkpointing the metric streams", zap.Error(err))
	}
}

func (u *metricUnit) close(ctx context.Context, logger *zap.Logger) []zap.Field {
	if err := u.storeSnapshot(ctx, u.store); err != nil { // the pipeline has stopped: nothing in flight
		logger.Warn("checkpointing the metric streams", zap.Error(err))
	}
	u.store = nil
	return nil
}

func (u *metricUnit) storeSnapshot(ctx context.Context, client storage.Client) error {
	bp := u.bufs.Get().(*[]byte)
	defer u.bufs.Put(bp)
	u.mu.Lock()
	*bp = u.tracker.AppendSnapshot((*bp)[:0])
	u.mu.Unlock()
	if err := client.Set(ctx, metricsSnapshotKey, *bp); err != nil {
		return fmt.Errorf("storing the metric streams: %w", err)
	}
	return nil
}
