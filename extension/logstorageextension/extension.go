package logstorageextension

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/extension/logstorageextension/internal/metadata"
)

type logStorage struct {
	cfg    Config
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder

	mu   sync.Mutex
	open map[string]bool
}

var _ storage.Extension = (*logStorage)(nil)

func newExtension(set extension.Settings, cfg *Config) (*logStorage, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &logStorage{cfg: *cfg, logger: set.Logger, tb: tb, open: map[string]bool{}}, nil
}

func (e *logStorage) Start(context.Context, component.Host) error {
	if err := os.MkdirAll(e.cfg.Directory, 0o700); err != nil {
		return fmt.Errorf("log_storage: %w", err)
	}
	return nil
}

func (e *logStorage) Shutdown(context.Context) error {
	e.tb.Shutdown()
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
	if e.open[dir] {
		return nil, fmt.Errorf("log_storage: client %s is already open", cn)
	}
	c, err := openClient(dir, options{
		fsync:        e.cfg.FSync,
		segmentBytes: e.cfg.SegmentBytes,
		discarded:    e.discarded(cn),
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
	e.open[dir] = true
	return &closer{client: c, done: func() {
		e.mu.Lock()
		delete(e.open, dir)
		e.mu.Unlock()
	}}, nil
}

// discarded logs and counts what opening a client cut.
func (e *logStorage) discarded(cn string) func(Discarded) {
	return func(d Discarded) {
		reason := "damaged"
		if d.Torn {
			reason = "torn"
			e.logger.Warn("A write cut short by a crash was cut from the end of the newest segment; it was never acknowledged",
				zap.String("client", cn), zap.String("segment", d.Segment), zap.Int64("offset", d.Offset), zap.Int64("bytes", d.Bytes), zap.String("cause", d.Cause))
		} else {
			e.logger.Error("A damaged segment was cut where its records stopped checking out: what its writes stored from there on is lost, unless a later write stored it again; the damaged bytes were kept aside",
				zap.String("client", cn), zap.String("segment", d.Segment), zap.Int64("offset", d.Offset), zap.Int64("bytes", d.Bytes), zap.String("cause", d.Cause), zap.String("kept_as", d.KeptAs))
		}
		e.tb.LogStorageDiscardedBytes.Add(context.Background(), d.Bytes, metric.WithAttributeSet(attribute.NewSet(attribute.String("client", cn), attribute.String("reason", reason))))
	}
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
