package dedupotlpexporter

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// The queue's read marks are written with its next write.
//
// exporterhelper's persistent queue (v0.161) writes its metadata (read
// and write indices, the entries being sent, its size) under one key,
// queueMetadataKey, with every change: with each entry it stores (the
// metadata and the entry, one batch), with each entry it takes to send
// (the metadata, read index one further and the entry listed as being
// sent, and a read of the entry: the read mark) and with each entry
// delivered (the metadata and the entry's delete). With a lone sender of
// small requests that is three writes to storage per request, where a
// stock collector's batch processor merges requests before its queue.
//
// The read mark protects nothing acknowledged: what it records is that an
// entry, still stored, is being sent. Without it a restart finds the
// entry at the read index and sends it; with it, finds it listed as being
// sent and sends it again (the queue puts those back first). Either way
// the entry is sent after the restart, and what can arrive twice is the
// same. So the read mark is not written on its own: the entry is read,
// and the metadata kept (pendingMark) until the queue's next write, which
// carries a newer copy of the same metadata (each of the queue's writes
// sets queueMetadataKey to all of its state), or is written before a
// write that would not (a fallback of the queue's after a failed write)
// and when the queue closes its client. Only with a storage that has a
// read for it (log_storage: Take); with others the queue writes as it
// does. A lone sender's request then
// costs two writes (its entry, its delivery) instead of three.
//
// TestPinnedReadMark fails, naming the change, when a collector bump
// changes the batches this relies on: were the queue's next write not to
// set its metadata, the mark would be written before it (withPendingMark),
// and a lone sender's request would cost three writes again.

// queueMetadataKey is the key exporterhelper's persistent queue keeps its
// metadata under.
const queueMetadataKey = "qmv0"

// taker is a storage client with a read for a value taken to be
// delivered (log_storage: Take), which fails as a write would when the
// client writes no more, and is not remembered as a value about to be
// stored again.
type taker interface {
	Take(ctx context.Context, key string) ([]byte, error)
}

// readMark says whether ops is the queue taking an entry: a Set of its
// metadata and a Get of one entry, in that order.
func readMark(ops []*storage.Operation) (mark, get *storage.Operation, ok bool) {
	if len(ops) != 2 {
		return nil, nil, false
	}
	mark, get = ops[0], ops[1]
	if mark.Type != storage.Set || mark.Key != queueMetadataKey || get.Type != storage.Get || !isEntryKey(get.Key) {
		return nil, nil, false
	}
	return mark, get, true
}

// setsMetadata says whether ops write the queue's metadata.
func setsMetadata(ops []*storage.Operation) bool {
	for _, op := range ops {
		if op.Type == storage.Set && op.Key == queueMetadataKey {
			return true
		}
	}
	return false
}

// takeEntry reads the entry a read mark takes, and keeps the mark's
// metadata for the next write; ok false when the storage has no Take
// (taker): the mark is then written as the queue wrote it. Called with
// wmu held.
func (c *missingEntries) takeEntry(ctx context.Context, mark, get *storage.Operation) (ok bool, err error) {
	t, ok := c.Client.(taker)
	if !ok {
		return false, nil
	}
	if get.Value, err = t.Take(ctx, get.Key); err != nil {
		return true, err
	}
	c.pendingMark = mark.Value
	return true, nil
}

// withPendingMark is ops with the pending read mark's metadata before
// them, when they do not write newer metadata themselves. Called with wmu
// held.
func (c *missingEntries) withPendingMark(ops []*storage.Operation) []*storage.Operation {
	if c.pendingMark == nil || setsMetadata(ops) {
		return ops
	}
	return append([]*storage.Operation{storage.SetOperation(queueMetadataKey, c.pendingMark)}, ops...)
}

// Set and Delete go through Batch, so that a pending read mark is never
// written after metadata newer than it.
func (c *missingEntries) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *missingEntries) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

// Close writes a pending read mark, then closes the client: a stop leaves
// the metadata as the queue had it.
func (c *missingEntries) Close(ctx context.Context) error {
	c.wmu.Lock()
	mark := c.pendingMark
	c.pendingMark = nil
	c.wmu.Unlock()
	var err error
	if mark != nil {
		err = c.Client.Batch(ctx, storage.SetOperation(queueMetadataKey, mark))
	}
	if c.kept != nil {
		c.kept.close()
	}
	return errors.Join(err, c.Client.Close(ctx))
}
