package dedupotlpexporter

import (
	"context"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/internal/storagestate"
)

// TestPinnedPersistentQueueLayout fails, naming the change, when a
// collector bump changes this layout.
//
// The persistent queue (exporterhelper v0.161) keeps entry N under the
// key "N" of its storage client and reads only entries it stored. An
// entry the storage does not have is lost: log_storage cut its record as
// damaged, or a file was truncated. The queue decodes the nil it then
// reads as an empty request when it takes the entry to send, and sends
// nothing, without a word; when, at start, it puts back the entries that
// were being sent as the process stopped (under load, or while the
// upstream is away, most of the queue), it logs a warning ("Failed
// retrieving item") that nobody counts. The queue's storage client is
// therefore wrapped (missingEntries): each entry it reads and does not
// find is one warning (undecodableLine) and counted as undecodable
// (otelcol_processor_dedup_storage_recovered_items and dedup's status
// page). An entry that is there and does not decode is counted from the
// queue's own line (undecodable.go).
//
// A queue whose storage failed a write after delivering an entry (a
// logged error) may still list it as being sent; at the next start it is
// counted missing though it was delivered.

// storageHost is host with the sending queue's storage extension wrapped
// (missingStorage), for the exporterhelper's Start; host as it is
// without a persistent queue, or when the extension is not a storage
// extension (the queue then reports that).
func (up *upstream) storageHost(host component.Host) component.Host {
	if up.storageID == nil {
		return host
	}
	exts := host.GetExtensions()
	se, ok := exts[*up.storageID].(storage.Extension)
	if !ok {
		return host
	}
	exts = maps.Clone(exts)
	exts[*up.storageID] = missingStorage{Extension: se, logger: up.logger, up: up}
	return queueHost{Host: host, exts: exts}
}

// queueHost is the host the exporterhelper starts with: the storage
// extension of its queue wrapped.
type queueHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h queueHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// baseHost is the host storageHost was given: the inner exporter starts
// with it, the interfaces it implements beyond component.Host included.
func baseHost(host component.Host) component.Host {
	if h, ok := host.(queueHost); ok {
		return h.Host
	}
	return host
}

// missingStorage is a storage extension whose clients report missing
// queue entries.
type missingStorage struct {
	storage.Extension
	logger *zap.Logger
	up     *upstream
}

func (s missingStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := s.Extension.GetClient(ctx, kind, id, name)
	if err != nil {
		return nil, err
	}
	var kept *keptEntries
	if s.up != nil {
		kept = s.up.kept
	}
	return &missingEntries{Client: c, logger: s.logger.With(zap.String("storage_client", name)), up: s.up, kept: kept}, nil
}

// missingEntries reports each queue entry read and not found, except the
// entries whose write the storage refused: the queue numbers an entry
// before it writes it, and reads that number back as an entry when the
// write failed (a full data dir refuses new data so). Those were never
// acknowledged: nothing is lost. It also tells the upstream when the
// storage refuses new data for lack of room (storageFull), so that the
// receivers' servers refuse requests before decoding them.
type missingEntries struct {
	storage.Client
	logger *zap.Logger
	up     *upstream // nil in tests of the wrapper alone

	mu sync.Mutex
	// neverStored are entry keys whose write failed, up to
	// maxNeverStored; more are reported as missing when read.
	neverStored map[string]struct{}

	// wmu orders the queue's batches with the read mark they carry
	// (readmark.go).
	wmu sync.Mutex
	// pendingMark is the queue's metadata from the last entry it took,
	// not yet written: its next write carries it, or newer.
	pendingMark []byte
	// kept is told of the entries written and read (kept.go); nil: none
	// kept.
	kept *keptEntries
}

// maxNeverStored bounds the entry keys remembered as never stored: a
// write refused a second once a millisecond for 65 s. Past it a refused
// entry read back counts as undecodable (a false loss, logged), never
// the other way round.
const maxNeverStored = 1 << 16

func (c *missingEntries) Get(ctx context.Context, key string) ([]byte, error) {
	if key == queueMetadataKey {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.pendingMark != nil {
			return slices.Clone(c.pendingMark), nil
		}
	}
	v, err := c.Client.Get(ctx, key)
	if err == nil && isEntryKey(key) {
		c.readBack(key, v)
		if v == nil && !c.wasRefused(key) {
			c.missing(key)
		}
	}
	return v, err
}

// readBack tells kept of an entry read.
func (c *missingEntries) readBack(key string, v []byte) {
	if c.kept != nil {
		c.kept.read(key, v)
	}
}

// wasRefused says whether key's write had failed (and forgets it: the
// queue reads an entry once).
func (c *missingEntries) wasRefused(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.neverStored[key]; ok {
		delete(c.neverStored, key)
		return true
	}
	return false
}

// failed remembers the entries a failed batch would have stored.
func (c *missingEntries) failed(ops []*storage.Operation, err error) {
	full := storagestate.IsFull(err)
	if full && c.up != nil {
		c.up.storageFullAt.Store(c.up.room.clock())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		if op.Type != storage.Set || !isEntryKey(op.Key) {
			continue
		}
		if c.neverStored == nil {
			c.neverStored = map[string]struct{}{}
		}
		if len(c.neverStored) < maxNeverStored {
			c.neverStored[op.Key] = struct{}{}
		}
	}
}

func (c *missingEntries) Batch(ctx context.Context, ops ...*storage.Operation) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if mark, get, ok := readMark(ops); ok {
		taken, err := c.takeEntry(ctx, mark, get)
		if err != nil {
			return err
		}
		if taken {
			c.readBack(get.Key, get.Value)
			if get.Value == nil && !c.wasRefused(get.Key) {
				c.missing(get.Key)
			}
			return nil
		}
	}
	err := c.Client.Batch(ctx, c.withPendingMark(ops)...)
	if c.kept != nil {
		c.kept.wrote(ops, err)
	}
	if err != nil {
		c.failed(ops, err)
		return err
	}
	c.pendingMark = nil
	var written map[string]bool
	for _, op := range ops {
		switch {
		case op.Type != storage.Get:
			if written == nil {
				written = map[string]bool{}
			}
			written[op.Key] = true
		case !isEntryKey(op.Key) || written[op.Key]:
		case op.Value != nil:
			c.readBack(op.Key, op.Value)
		default:
			c.readBack(op.Key, nil)
			if c.wasRefused(op.Key) {
				continue
			}
			// Not deleted by this batch: missing.
			c.missing(op.Key)
		}
	}
	return nil
}

func (c *missingEntries) missing(key string) {
	recovered.AddUndecodable(1)
	c.logger.Warn(undecodableLine, zap.String("key", key), zap.String("cause", "the queue entry is not in its storage (a damaged or truncated storage file)"))
}

// isEntryKey says whether key names a queue entry: its index in decimal.
func isEntryKey(key string) bool {
	if key == "" || len(key) > 20 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return false
		}
	}
	return true
}
