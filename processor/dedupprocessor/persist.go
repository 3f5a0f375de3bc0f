package dedupprocessor

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/journal"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// maxSegments bounds each signal's journal: one segment per accepted
// request within the window. Past it the oldest segments go (counted), as
// if the window were full. Besides, a journal keeps no segment whose
// entries the window has evicted by capacity (journal.Options.MaxEntries).
const maxSegments = 200_000

const (
	spanRecord = 24 + 8 // trace id + span id, fingerprint
	logRecord  = 16     // digest
)

// persistence keeps the span and log windows in a storage extension, so
// that a copy re-sent after a restart (kill -9 included) is still caught,
// and checkpoints the metric streams' elections, so that a restart of the
// gateway is not a new election.
type persistence struct {
	client storage.Client
	spans  *journal.Journal
	logs   *journal.Journal
	stop   chan struct{}
	done   chan struct{}
	gauges metric.Registration // the journals' segments in telemetry

	metrics *metricWindow // its elections are checkpointed whole

	bufs sync.Pool // *[]byte, segment payloads and snapshots
}

// openPersistence opens the storage client, restores the seed and replays
// both journals into the windows. It runs before any data flows.
func (s *state) openPersistence(ctx context.Context, host component.Host) (*persistence, error) {
	ext, ok := host.GetExtensions()[*s.cfg.Storage]
	if !ok {
		return nil, fmt.Errorf("storage: no extension %q in this collector's service.extensions", s.cfg.Storage)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", s.cfg.Storage)
	}
	client, err := se.GetClient(ctx, component.KindProcessor, s.id, "")
	if err != nil {
		return nil, fmt.Errorf("storage: getting a client from %q: %w", s.cfg.Storage, err)
	}
	p := &persistence{client: client, stop: make(chan struct{}), done: make(chan struct{})}
	p.bufs.New = func() any { b := make([]byte, 0, 64<<10); return &b }
	fail := func(err error) (*persistence, error) {
		_ = client.Close(ctx)
		return nil, err
	}
	if err := s.restoreSeed(ctx, client); err != nil {
		return fail(err)
	}
	began := time.Now()
	var spans, logs int
	s.traces.mu.Lock()
	p.spans, err = journal.Open(ctx, client, journal.Options{
		Prefix: "traces/", MaxSegments: maxSegments, MaxEntries: s.cfg.Traces.MaxSpans, RecordSize: spanRecord,
		Insert: func(at int64, b []byte) {
			for ; len(b) >= spanRecord; b = b[spanRecord:] {
				s.traces.spans.Observe([24]byte(b[:24]), binary.LittleEndian.Uint64(b[24:]), at)
				spans++
			}
		},
		Forget: func(b []byte) {
			for ; len(b) >= 24; b = b[24:] {
				s.traces.spans.Forget([24]byte(b[:24]))
			}
		},
	})
	s.traces.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	s.logs.mu.Lock()
	p.logs, err = journal.Open(ctx, client, journal.Options{
		Prefix: "logs/", MaxSegments: maxSegments, MaxEntries: s.cfg.Logs.MaxRecords, RecordSize: logRecord,
		Insert: func(at int64, b []byte) {
			for ; len(b) >= logRecord; b = b[logRecord:] {
				s.logs.records.Observe([16]byte(b[:16]), struct{}{}, at)
				logs++
			}
		},
		Forget: func(b []byte) {
			for ; len(b) >= logRecord; b = b[logRecord:] {
				s.logs.records.Forget([16]byte(b[:16]))
			}
		},
	})
	s.logs.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	if p.gauges, err = s.tel.observeJournals(p.spans, p.logs); err != nil {
		return fail(err)
	}
	snap, err := client.Get(ctx, metricsSnapshotKey)
	if err != nil {
		_ = p.gauges.Unregister()
		return fail(fmt.Errorf("storage: reading the metric streams: %w", err))
	}
	streamsRestored := 0
	if snap != nil {
		s.metrics.mu.Lock()
		streamsRestored, err = s.metrics.tracker.Restore(snap)
		s.metrics.mu.Unlock()
		if err != nil {
			// A stale or foreign snapshot: elections start afresh.
			s.logger.Warn("ignoring the stored metric streams", zap.Error(err))
		}
	}
	p.metrics = s.metrics
	s.logger.Info("dedup windows restored",
		zap.Stringer("storage", s.cfg.Storage),
		zap.Int("span_ids", spans), zap.Int("span_segments", p.spans.Len()),
		zap.Int("log_digests", logs), zap.Int("log_segments", p.logs.Len()),
		zap.Int("metric_streams", streamsRestored),
		zap.Duration("took", time.Since(began)))
	go p.trimLoop(s.cfg.CheckpointInterval, s.cfg.Traces.Window, s.cfg.Logs.Window, s.logger)
	return p, nil
}

// metricsSnapshotKey holds the metric streams' elections, rewritten every
// checkpoint_interval and at shutdown.
const metricsSnapshotKey = "metrics/snapshot"

// checkpointMetrics stores the metric streams' state.
func (p *persistence) checkpointMetrics(ctx context.Context) error {
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	p.metrics.mu.Lock()
	*bp = p.metrics.tracker.AppendSnapshot((*bp)[:0])
	p.metrics.mu.Unlock()
	if err := p.client.Set(ctx, metricsSnapshotKey, *bp); err != nil {
		return fmt.Errorf("storing the metric streams: %w", err)
	}
	return nil
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
	s.logs.mu.Lock()
	s.logs.seed = logSeed(seed)
	s.logs.mu.Unlock()
	s.metrics.mu.Lock()
	s.metrics.hasher = streams.NewHasher(metricSeed(seed))
	s.metrics.mu.Unlock()
	return nil
}

func (p *persistence) trimLoop(every, spanWindow, logWindow time.Duration, logger *zap.Logger) {
	defer close(p.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := p.spans.Trim(ctx, now-int64(spanWindow)); err != nil {
			logger.Warn("trimming the stored span window", zap.Error(err))
		}
		if err := p.logs.Trim(ctx, now-int64(logWindow)); err != nil {
			logger.Warn("trimming the stored log window", zap.Error(err))
		}
		if err := p.checkpointMetrics(ctx); err != nil {
			logger.Warn("checkpointing the metric streams", zap.Error(err))
		}
		cancel()
	}
}

func (p *persistence) close(logger *zap.Logger) {
	close(p.stop)
	<-p.done
	_ = p.gauges.Unregister()
	if err := p.checkpointMetrics(context.Background()); err != nil {
		logger.Warn("checkpointing the metric streams", zap.Error(err))
	}
	st, lt := p.spans.Stats(), p.logs.Stats()
	logger.Info("dedup windows stored",
		zap.Uint64("span_segments_written", st.Appended), zap.Uint64("span_segments_failed", st.Failed),
		zap.Uint64("log_segments_written", lt.Appended), zap.Uint64("log_segments_failed", lt.Failed))
	if err := p.client.Close(context.Background()); err != nil {
		logger.Warn("closing the dedup storage client", zap.Error(err))
	}
}

// appendSpans journals the span ids a delivered request stored.
func (p *persistence) appendSpans(ctx context.Context, at int64, keys [][24]byte, fps []uint64) error {
	bp := p.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for i, k := range keys {
		b = append(b, k[:]...)
		b = binary.LittleEndian.AppendUint64(b, fps[i])
	}
	err := p.spans.Append(ctx, at, b)
	*bp = b
	p.bufs.Put(bp)
	return err
}

// appendLogs journals the log digests a delivered request stored.
func (p *persistence) appendLogs(ctx context.Context, at int64, keys [][16]byte) error {
	bp := p.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, k := range keys {
		b = append(b, k[:]...)
	}
	err := p.logs.Append(ctx, at, b)
	*bp = b
	p.bufs.Put(bp)
	return err
}

// forgetSpans journals that the given span ids were taken back.
func (p *persistence) forgetSpans(ctx context.Context, at int64, keys [][24]byte) error {
	bp := p.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, k := range keys {
		b = append(b, k[:]...)
	}
	err := p.spans.AppendForget(ctx, at, b)
	*bp = b
	p.bufs.Put(bp)
	return err
}

// forgetLogs journals that the given log digests were taken back.
func (p *persistence) forgetLogs(ctx context.Context, at int64, keys [][16]byte) error {
	bp := p.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, k := range keys {
		b = append(b, k[:]...)
	}
	err := p.logs.AppendForget(ctx, at, b)
	*bp = b
	p.bufs.Put(bp)
	return err
}

func logSeed(s window.Seed) uint64    { return s[2] ^ s[3] }
func metricSeed(s window.Seed) uint64 { return s[0] ^ s[3] }
