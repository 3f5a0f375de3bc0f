package logstorageextension

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/extension/logstorageextension/internal/metadata"
	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/internal/storagestate"
)

type logStorage struct {
	cfg    Config
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	mover  FileStorageMover // nil: file_storage_directory is only checked for files (datadir.go)
	lock   *os.File         // DIRECTORY/LOCK, held from Start to Shutdown

	mu   sync.Mutex
	open map[string]*client
	// closedRefused: writes refused by clients since closed, by name.
	closedRefused map[string]int64
}

var (
	_ storage.Extension     = (*logStorage)(nil)
	_ storagestate.Reporter = (*logStorage)(nil)
)

func newExtension(set extension.Settings, cfg *Config, opts ...Option) (*logStorage, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	var o factoryOptions
	for _, opt := range opts {
		opt(&o)
	}
	e := &logStorage{cfg: *cfg, logger: set.Logger, tb: tb, mover: o.mover, open: map[string]*client{}, closedRefused: map[string]int64{}}
	if err := tb.RegisterLogStorageCacheReadsCallback(e.observeCache); err != nil {
		return nil, err
	}
	if err := tb.RegisterLogStorageFullCallback(e.observeFull); err != nil {
		return nil, err
	}
	if err := tb.RegisterLogStorageRefusedWritesCallback(e.observeRefused); err != nil {
		return nil, err
	}
	if err := tb.RegisterLogStorageFreeBytesCallback(e.observeFree); err != nil {
		return nil, err
	}
	return e, nil
}

// clientStates are the open clients' full states, by client name.
func (e *logStorage) clientStates() map[string]FullState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]FullState, len(e.open))
	for dir, c := range e.open {
		out[filepath.Base(dir)] = c.fullState()
	}
	return out
}

func (e *logStorage) observeFull(_ context.Context, o metric.Int64Observer) error {
	for name, st := range e.clientStates() {
		v := int64(0)
		if st.Full {
			v = 1
		}
		o.Observe(v, metric.WithAttributes(attribute.String("client", name)))
	}
	return nil
}

func (e *logStorage) observeRefused(_ context.Context, o metric.Int64Observer) error {
	for name, st := range e.clientStates() {
		o.Observe(st.Refused+e.refusedBefore(name), metric.WithAttributes(attribute.String("client", name)))
	}
	return nil
}

// refusedBefore is what the clients of name closed earlier refused, so
// that the counter does not fall when a client reopens.
func (e *logStorage) refusedBefore(name string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closedRefused[name]
}

func (e *logStorage) observeFree(_ context.Context, o metric.Int64Observer) error {
	if free, err := freeBytes(e.cfg.Directory); err == nil {
		o.Observe(free)
	}
	return nil
}

// StorageState is the data dir's state for the status page
// (internal/storagestate).
func (e *logStorage) StorageState() storagestate.State {
	st := storagestate.State{Directory: e.cfg.Directory, FreeBytes: -1}
	if free, err := freeBytes(e.cfg.Directory); err == nil {
		st.FreeBytes = free
	}
	for name, cs := range e.clientStates() {
		if cs.Full {
			st.FullClients = append(st.FullClients, name)
		}
		st.RefusedWrites += cs.Refused + e.refusedBefore(name)
	}
	slices.Sort(st.FullClients)
	return st
}

// fullChanged logs a client's data dir turning full (new data refused)
// and ending so: one line each, no line per refused request.
func (e *logStorage) fullChanged(cn string) func(bool, int64, error) {
	return func(full bool, free int64, cause error) {
		fields := []zap.Field{zap.String("client", cn), zap.String("directory", e.cfg.Directory), zap.Int64("free_bytes", free)}
		if full {
			e.logger.Warn("The data dir is full: new data is refused (retryably: HTTP 503, gRPC Unavailable) until the queue drains or room is freed; what was accepted is kept and delivered",
				append(fields, zap.NamedError("cause", cause))...)
			return
		}
		e.logger.Warn("The data dir has room again: new data is taken", fields...)
	}
}

// observeCache reports the open clients' read cache hits and misses.
func (e *logStorage) observeCache(_ context.Context, o metric.Int64Observer) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for dir, c := range e.open {
		c.mu.Lock()
		hits, misses := c.cacheHits, c.cacheMisses
		c.mu.Unlock()
		name := filepath.Base(dir)
		o.Observe(hits, metric.WithAttributes(attribute.String("client", name), attribute.String("outcome", "hit")))
		o.Observe(misses, metric.WithAttributes(attribute.String("client", name), attribute.String("outcome", "miss")))
	}
	return nil
}

// Start takes the directory and moves file_storage_directory's files into
// it (prepare, datadir.go).
func (e *logStorage) Start(ctx context.Context, host component.Host) error {
	if err := e.prepare(ctx, host); err != nil {
		e.release()
		return err
	}
	return nil
}

func (e *logStorage) Shutdown(context.Context) error {
	e.tb.Shutdown()
	e.release()
	return nil
}

// ClientName is the directory name of a client under the extension's
// directory; it is file_storage's file name for the same client, so that
// a file_storage file maps to the log_storage client that takes its data.
func ClientName(kind component.Kind, id component.ID, name string) string {
	raw := fmt.Sprintf("%s_%s_%s", kindString(kind), id.Type(), id.Name())
	if name != "" {
		raw += "_" + name
	}
	return sanitize(raw)
}

// ClientDir is the directory of a client, ClientName under dir, or its
// SHA-256 when that name is too long for a file name.
func ClientDir(dir, clientName string) string {
	if len(clientName) > 200 {
		sum := sha256.Sum256([]byte(clientName))
		clientName = hex.EncodeToString(sum[:])
	}
	return filepath.Join(dir, clientName)
}

func kindString(k component.Kind) string {
	switch k {
	case component.KindReceiver:
		return "receiver"
	case component.KindProcessor:
		return "processor"
	case component.KindExporter:
		return "exporter"
	case component.KindExtension:
		return "extension"
	case component.KindConnector:
		return "connector"
	}
	return "other"
}

// sanitize keeps [A-Za-z0-9._-] and writes every other character as ~
// and its code point in 4 hex digits (file_storage's scheme).
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "~%04X", r)
		}
	}
	return b.String()
}

// GetClient opens the client's directory and replays its segments.
func (e *logStorage) GetClient(_ context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	cn := ClientName(kind, id, name)
	dir := ClientDir(e.cfg.Directory, cn)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open[dir] != nil {
		return nil, fmt.Errorf("log_storage: client %s is already open", cn)
	}
	c, err := openClient(dir, options{
		fsync:        e.cfg.FSync,
		segmentBytes: e.cfg.SegmentBytes,
		cacheBytes:   e.cfg.ReadCacheBytes,
		discarded:    e.discarded(cn),
		fullChanged:  e.fullChanged(cn),
		compactFailed: func(err error) {
			e.logger.Error("Compacting failed: the write stands, compacting is tried again after the next one; meanwhile the segments may hold more than twice the data",
				zap.String("client", cn), zap.Error(err))
		},
		compacted: func(n int64) {
			e.tb.LogStorageCompactedBytes.Add(context.Background(), n, metric.WithAttributeSet(attribute.NewSet(attribute.String("client", cn))))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("log_storage: opening client %s: %w", cn, err)
	}
	e.open[dir] = c
	return &closer{client: c, done: func() {
		refused := c.fullState().Refused
		e.mu.Lock()
		delete(e.open, dir)
		e.closedRefused[cn] += refused
		e.mu.Unlock()
	}}, nil
}

// discarded logs and counts what opening a client cut or found missing,
// and has the status page and otelcol_processor_dedup_storage_recovered_items
// show a loss (internal/recovered) until the process exits.
func (e *logStorage) discarded(cn string) func(Discarded) {
	return func(d Discarded) {
		reason := "damaged"
		fields := []zap.Field{zap.String("client", cn), zap.String("segment", d.Segment), zap.Int64("offset", d.Offset), zap.Int64("bytes", d.Bytes), zap.String("cause", d.Cause)}
		switch {
		case d.Foreign:
			line := fmt.Sprintf("log_storage %s: %s, kept as %s (what it held, if it was a segment, is lost; it cannot be counted)", cn, d.Cause, d.KeptAs)
			e.logger.Error("An entry named as a segment was not a regular file: it was moved aside unread. If it was a segment (a symlink to one, say), what it stored is lost",
				append(fields, zap.String("kept_as", d.KeptAs))...)
			recovered.Add(recovered.File{Path: d.Segment, MovedTo: d.KeptAs, Store: storeOf(cn), LostUncounted: true, Line: line})
			return
		case d.Torn:
			reason = "torn"
			e.logger.Warn("A write cut short by a crash was cut from the end of the newest segment; it was never acknowledged", fields...)
		case d.Truncated:
			reason = "truncated"
			line := fmt.Sprintf("log_storage %s: %s (%d bytes of acknowledged writes lost; what they stored cannot be counted)", cn, d.Cause, d.Bytes)
			e.logger.Error("A segment lost writes that had been acknowledged (truncated, a copy cut short, or a power loss without fsync): what they stored is lost", fields...)
			recovered.Add(recovered.File{Path: d.Segment, Store: storeOf(cn), LostUncounted: true, Line: line})
		default:
			line := fmt.Sprintf("log_storage %s: %s at offset %d: %d bytes cut, kept as %s (what they stored is lost unless written again later; it cannot be counted)", cn, d.Cause, d.Offset, d.Bytes, d.KeptAs)
			e.logger.Error("A damaged range of a segment was cut; the records after it were kept. What the damaged records stored is lost unless a later write stored it again; the damaged bytes were kept aside",
				append(fields, zap.String("kept_as", d.KeptAs))...)
			recovered.Add(recovered.File{Path: d.Segment, MovedTo: d.KeptAs, Store: storeOf(cn), LostUncounted: true, Line: line})
		}
		e.tb.LogStorageDiscardedBytes.Add(context.Background(), d.Bytes, metric.WithAttributeSet(attribute.NewSet(attribute.String("client", cn), attribute.String("reason", reason))))
	}
}

// storeOf names what a client holds for internal/recovered: an
// exporter's persistent queue, dedup's journal, or another component's.
func storeOf(clientName string) string {
	switch {
	case strings.HasPrefix(clientName, "exporter_"):
		return "queue"
	case strings.HasPrefix(clientName, "processor_dedup_"):
		return "journal"
	}
	return "storage"
}

// closer frees the client's name when it is closed.
type closer struct {
	*client
	once sync.Once
	done func()
}

func (c *closer) Close(ctx context.Context) error {
	err := c.client.Close(ctx)
	c.once.Do(c.done)
	return err
}
