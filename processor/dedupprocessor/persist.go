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

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// persistence keeps the span and log windows in a storage extension, so
// that a copy re-sent after a restart (kill -9 included) is still caught,
// and checkpoints the metric streams' elections, so that a restart of the
// gateway is not a new election. Each unit keeps its own part (its
// journal, its snapshot); persistence holds the client they share.
type persistence struct {
	client storage.Client
	gauges metric.Registration // the journals' segments in telemetry
}

// openPersistence opens the storage client, restores the seed and each
// unit's part. It runs before any data flows.
func (s *state) openPersistence(ctx context.Context, host component.Host) (*persistence, error) {
	ext, ok := host.GetExtensions()[*s.cfg.Storage]
	if !ok {
		return nil, fmt.Errorf("storage: no extension %q in this collector's service::extensions", s.cfg.Storage)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", s.cfg.Storage)
	}
	client, err := se.GetClient(ctx, component.KindProcessor, s.id, "")
	if err != nil {
		return nil, fmt.Errorf("storage: getting a client from %q: %w", s.cfg.Storage, err)
	}
	p := &persistence{client: client}
	units := s.units()
	restored := 0
	fail := func(err error) (*persistence, error) {
		for _, u := range units[:restored] {
			u.close(ctx, s.logger)
		}
		_ = client.Close(ctx)
		return nil, err
	}
	if err := s.restoreSeed(ctx, client); err != nil {
		return fail(err)
	}
	began := time.Now()
	fields := []zap.Field{zap.Stringer("storage", s.cfg.Storage)}
	for _, u := range units {
		f, err := u.restore(ctx, client, s.logger)
		if err != nil {
			return fail(err)
		}
		restored++
		fields = append(fields, f...)
	}
	if p.gauges, err = s.tel.observeJournals(s.traces.journal.Load(), s.logs.journal.Load()); err != nil {
		return fail(err)
	}
	s.logger.Info("dedup windows restored", append(fields, zap.Duration("took", time.Since(began)))...)
	return p, nil
}

// restoreSeed makes the log digests and stream ids of this run comparable
// with the stored ones: the first run stores its random seed, later runs
// take it back.
func (s *state) restoreSeed(ctx context.Context, client storage.Client) error {
	v, err := client.Get(ctx, "seed")
	if err != nil {
		return fmt.Errorf("storage: reading the seed: %w", err)
	}
	if len(v) != 32 {
		var b [32]byte
		seed := s.seed
		for i := range seed {
			binary.LittleEndian.PutUint64(b[8*i:], seed[i])
		}
		if err := client.Set(ctx, "seed", b[:]); err != nil {
			return fmt.Errorf("storage: writing the seed: %w", err)
		}
		return nil
	}
	var seed window.Seed
	for i := range seed {
		seed[i] = binary.LittleEndian.Uint64(v[8*i:])
	}
	s.seed = seed
	for _, u := range s.units() {
		u.reseed(seed)
	}
	return nil
}

// checkpointLoop checkpoints every unit every interval until ctx ends. A
// checkpoint under way when ctx ends runs to its own deadline.
func (s *state) checkpointLoop(ctx context.Context, every time.Duration) {
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
		for _, u := range s.units() {
			u.checkpoint(cctx, now, s.logger)
		}
		cancel()
	}
}

// close checkpoints and closes every unit's part, then the client. The
// checkpoint loop has stopped.
func (p *persistence) close(units [3]unit, logger *zap.Logger) {
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
