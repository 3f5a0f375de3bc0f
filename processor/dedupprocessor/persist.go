package dedupprocessor

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/journal"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// persistence keeps the span and log windows in a storage extension, so
// that a copy re-sent after a restart (kill -9 included) is still caught,
// and checkpoints the metric streams' elections, so that a restart of the
// gateway is not a new election. Each unit keeps its own part (its
// journal, its snapshot); persistence holds the client they share.
type persistence struct {
	client  storage.Client
	gauges  metric.Registration // the journals' segments in telemetry
	signals [3]unit
	logger  *zap.Logger
}

// journaled is a unit that keeps a journal in storage (spans, logs): the
// journal gauges read it.
type journaled interface {
	storedJournal() *journal.Journal
}

// openPersistence opens the client of the storage extension ext for the
// processor id, restores the seed (into seed) and each unit's part. It
// runs before any data flows.
func openPersistence(ctx context.Context, host component.Host, ext, id component.ID, units [3]unit, seed *window.Seed, tel *telemetry, logger *zap.Logger) (*persistence, error) {
	e, ok := host.GetExtensions()[ext]
	if !ok {
		return nil, fmt.Errorf("storage: no extension %q in this collector's service::extensions", ext)
	}
	se, ok := e.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", ext)
	}
	client, err := se.GetClient(ctx, component.KindProcessor, id, "")
	if err != nil {
		return nil, fmt.Errorf("storage: getting a client from %q: %w", ext, err)
	}
	p := &persistence{client: client, signals: units, logger: logger}
	restored := 0
	fail := func(err error) (*persistence, error) {
		for _, u := range units[:restored] {
			u.close(ctx, logger)
		}
		_ = client.Close(ctx)
		return nil, err
	}
	if err := restoreSeed(ctx, client, seed, units); err != nil {
		return fail(err)
	}
	began := time.Now()
	fields := []zap.Field{zap.Stringer("storage", ext)}
	var lens []interface{ Len() int }
	for _, u := range units {
		f, err := u.restore(ctx, client, logger)
		if err != nil {
			return fail(err)
		}
		restored++
		fields = append(fields, f...)
		if j, ok := u.(journaled); ok {
			lens = append(lens, j.storedJournal())
		}
	}
	if p.gauges, err = tel.observeJournals(lens[0], lens[1], maxSegments); err != nil {
		return fail(err)
	}
	logger.Info("dedup windows restored", append(fields, zap.Duration("took", time.Since(began)))...)
	return p, nil
}

// restoreSeed makes the log digests and stream ids of this run comparable
// with the stored ones: the first run stores its random seed, later runs
// take it back into seed and the units.
func restoreSeed(ctx context.Context, client storage.Client, seed *window.Seed, units [3]unit) error {
	v, err := client.Get(ctx, "seed")
	if err != nil {
		return fmt.Errorf("storage: reading the seed: %w", err)
	}
	if len(v) != 32 {
		var b [32]byte
		for i := range seed {
			binary.LittleEndian.PutUint64(b[8*i:], seed[i])
		}
		if err := client.Set(ctx, "seed", b[:]); err != nil {
			return fmt.Errorf("storage: writing the seed: %w", err)
		}
		return nil
	}
	for i := range seed {
		seed[i] = binary.LittleEndian.Uint64(v[8*i:])
	}
	for _, u := range units {
		u.reseed(*seed)
	}
	return nil
}

// checkpointLoop checkpoints every unit every interval until ctx ends. A
// checkpoint under way when ctx ends runs to its own deadline.
func (p *persistence) checkpointLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		for _, u := range p.signals {
			u.checkpoint(cctx, now, p.logger)
		}
		cancel()
	}
}

// close checkpoints and closes every unit's part, then the client. The
// checkpoint loop has stopped.
func (p *persistence) close() {
	units, logger := p.signals, p.logger
	_ = p.gauges.Unregister()
	var fields []zap.Field
	for _, u := range units {
		fields = append(fields, u.close(context.Background(), logger)...)
	}
	logger.Info("dedup windows stored", fields...)
	if err := p.client.Close(context.Background()); err != nil {
		logger.Warn("closing the dedup storage client", zap.Error(err))
	}
}
