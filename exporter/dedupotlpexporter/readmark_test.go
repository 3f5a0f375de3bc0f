package dedupotlpexporter

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

// recordingClient is a storage client that records the batches written
// through it (writes only: a batch of Gets is not recorded); with take,
// it has a Take (log_storage's), which fails with takeErr when set.
type recordingClient struct {
	storage.Client
	mu      sync.Mutex
	batches [][]storage.Operation
	mixed   [][]*storage.Operation // batches of writes and Gets
	takeErr error
}

func (c *recordingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	var b []storage.Operation
	for _, op := range ops {
		if op.Type != storage.Get {
			b = append(b, *op)
		}
	}
	if len(b) > 0 {
		c.mu.Lock()
		c.batches = append(c.batches, b)
		if len(b) < len(ops) {
			c.mixed = append(c.mixed, ops)
		}
		c.mu.Unlock()
	}
	return c.Client.Batch(ctx, ops...)
}

// reads are the batches that wrote and read.
func (c *recordingClient) reads() [][]*storage.Operation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]*storage.Operation(nil), c.mixed...)
}

// slicesContainsDelete says whether a batch of w deletes key.
func slicesContainsDelete(w [][]storage.Operation, key string) bool {
	for _, b := range w {
		for _, op := range b {
			if op.Type == storage.Delete && op.Key == key {
				return true
			}
		}
	}
	return false
}

func (c *recordingClient) written() [][]storage.Operation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]storage.Operation(nil), c.batches...)
}

type takingClient struct{ *recordingClient }

func (c takingClient) Take(ctx context.Context, key string) ([]byte, error) {
	if c.takeErr != nil {
		return nil, c.takeErr
	}
	return c.Get(ctx, key)
}

// storedMetadata is the queue's metadata as c reads it.
func storedMetadata(t *testing.T, c storage.Client) string {
	t.Helper()
	v, err := c.Get(context.Background(), queueMetadataKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestReadMarkWrittenWithNextWrite: with a storage that has Take, the
// queue taking an entry reads it and writes nothing; its metadata is
// what a Get of the metadata reads, and is written with the next write
// that does not write newer metadata itself, or at Close; a Take that
// fails leaves nothing pending.
func TestReadMarkWrittenWithNextWrite(t *testing.T) {
	ctx := context.Background()
	rec := &recordingClient{Client: storagetest.NewInMemoryClient(component.KindExporter, component.MustNewID("x"), "traces")}
	c := &missingEntries{Client: takingClient{rec}, logger: zap.NewNop()}

	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m1")), storage.SetOperation("0", []byte("entry0"))); err != nil {
		t.Fatal(err)
	}
	get := storage.GetOperation("0")
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m2")), get); err != nil {
		t.Fatal(err)
	}
	if string(get.Value) != "entry0" {
		t.Fatalf("the entry taken read %q, want entry0", get.Value)
	}
	if n := len(rec.written()); n != 1 {
		t.Fatalf("%d writes after an entry stored and taken, want 1 (the read mark waits)", n)
	}
	if got := storedMetadata(t, rec); got != "m1" {
		t.Fatalf("stored metadata %q, want m1: the read mark is not written yet", got)
	}
	if got := storedMetadata(t, c); got != "m2" {
		t.Fatalf("the queue's client reads metadata %q, want the pending m2", got)
	}

	// A write with newer metadata replaces the pending mark.
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m3")), storage.SetOperation("1", []byte("entry1"))); err != nil {
		t.Fatal(err)
	}
	if got := storedMetadata(t, rec); got != "m3" {
		t.Fatalf("stored metadata %q, want m3", got)
	}
	if w := rec.written(); len(w) != 2 || len(w[1]) != 2 {
		t.Fatalf("writes %+v, want the second to be the queue's own two operations", w)
	}

	// A write without metadata (the queue's fallback delete) carries the
	// pending mark before it.
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m4")), storage.GetOperation("1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Batch(ctx, storage.DeleteOperation("0")); err != nil {
		t.Fatal(err)
	}
	w := rec.written()
	last := w[len(w)-1]
	if len(w) != 3 || len(last) != 2 || last[0].Key != queueMetadataKey || string(last[0].Value) != "m4" || last[1].Type != storage.Delete {
		t.Fatalf("writes %+v, want the third to set m4, then delete entry 0", w)
	}

	// A failed Take: an error, nothing pending.
	rec.takeErr = errors.New("the client writes nothing more")
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m5")), storage.GetOperation("1")); !errors.Is(err, rec.takeErr) {
		t.Fatalf("a failed Take returned %v", err)
	}
	rec.takeErr = nil
	if got := storedMetadata(t, c); got != "m4" {
		t.Fatalf("metadata %q after a failed Take, want m4", got)
	}

	// Close writes the pending mark.
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m6")), storage.GetOperation("1")); err != nil {
		t.Fatal(err)
	}
	if got := storedMetadata(t, rec); got != "m4" {
		t.Fatalf("stored metadata %q, want m4 until Close", got)
	}
	inner := rec.Client
	rec.Client = readableAfterClose{inner}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storedMetadata(t, inner); got != "m6" {
		t.Fatalf("stored metadata %q after Close, want m6", got)
	}
}

// readableAfterClose is a client whose Close does nothing, so that a test
// reads what was written before it.
type readableAfterClose struct{ storage.Client }

func (readableAfterClose) Close(context.Context) error { return nil }

// TestReadMarkWrittenWithoutTake: with a storage without Take, the queue's
// batches go through as they are.
func TestReadMarkWrittenWithoutTake(t *testing.T) {
	ctx := context.Background()
	rec := &recordingClient{Client: storagetest.NewInMemoryClient(component.KindExporter, component.MustNewID("x"), "traces")}
	c := &missingEntries{Client: rec, logger: zap.NewNop()}
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m1")), storage.SetOperation("0", []byte("entry0"))); err != nil {
		t.Fatal(err)
	}
	get := storage.GetOperation("0")
	if err := c.Batch(ctx, storage.SetOperation(queueMetadataKey, []byte("m2")), get); err != nil {
		t.Fatal(err)
	}
	if string(get.Value) != "entry0" || len(rec.written()) != 2 || storedMetadata(t, rec) != "m2" {
		t.Fatalf("read %q, writes %+v: want the read mark written as the queue wrote it", get.Value, rec.written())
	}
}

// recordingStorage hands out recordingClients.
type recordingStorage struct {
	storage.Extension
	mu      sync.Mutex
	clients []*recordingClient
}

func (s *recordingStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := s.Extension.GetClient(ctx, kind, id, name)
	if err != nil {
		return nil, err
	}
	rc := &recordingClient{Client: c}
	s.mu.Lock()
	s.clients = append(s.clients, rc)
	s.mu.Unlock()
	return rc, nil
}

// TestPinnedReadMark pins readmark.go: exporterhelper's persistent queue
// takes an entry with one batch of a Set of its metadata (the key
// queueMetadataKey) and a Get of the entry, and each of its other writes
// (storing an entry, deleting one delivered) sets all of its metadata
// again, so that a read mark left for the next write is superseded by
// it. It runs the real queue, with nothing of this package around it.
func TestPinnedReadMark(t *testing.T) {
	ctx := context.Background()
	storeID := storagetest.NewStorageID("pinned")
	store := &recordingStorage{Extension: storagetest.NewFileBackedStorageExtension("pinned", t.TempDir())}
	host := storagetest.NewStorageHost().WithExtension(storeID, store)
	set := exportertest.NewNopSettings(component.MustNewType("otlp_grpc"))

	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	q := plainQueue(t, set, &storeID, 100, func(context.Context, ptrace.Traces) error {
		entered <- struct{}{}
		<-release
		return nil
	})
	if err := q.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := q.ConsumeTraces(ctx, spansOf(2, func(int) string { return "op" })); err != nil {
		t.Fatal(err)
	}
	<-entered // entry 0 taken
	store.mu.Lock()
	if len(store.clients) != 1 {
		t.Fatalf("the queue opened %d storage clients, want 1", len(store.clients))
	}
	rec := store.clients[0]
	store.mu.Unlock()
	close(release)
	// Entry 0 delivered: its delete is the queue's next write.
	deadline := time.Now().Add(30 * time.Second)
	for !slicesContainsDelete(rec.written(), "0") {
		if time.Now().After(deadline) {
			t.Fatalf("entry 0 delivered, not deleted within 30 s; writes: %+v", rec.written())
		}
		time.Sleep(10 * time.Millisecond) // polling the writes, bounded by the deadline
	}
	if err := q.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	w := rec.written()
	var marks, entries int
	for i, b := range w {
		if len(b) == 1 && b[0].Type == storage.Set && b[0].Key == queueMetadataKey {
			marks++ // the read mark: its Get is not recorded
			if i+1 < len(w) && !slices.ContainsFunc(w[i+1], func(op storage.Operation) bool {
				return op.Type == storage.Set && op.Key == queueMetadataKey
			}) {
				t.Errorf("exporterhelper's persistent queue wrote %+v after a read mark, without its metadata under %q: readmark.go relies on "+
					"the queue's next write setting its metadata again (else the deferred mark costs a write of its own); adapt it", w[i+1], queueMetadataKey)
			}
		}
		if len(b) == 2 && b[1].Type == storage.Set && b[1].Key == "0" {
			entries++
		}
	}
	if marks != 1 || entries != 1 || !slicesContainsDelete(w[len(w)-1:], "0") {
		t.Fatalf("exporterhelper's persistent queue wrote %+v for one entry stored, taken and delivered: want the entry with its metadata, "+
			"a read mark of its metadata alone, and last a delete with its metadata; readmark.go relies on that shape", w)
	}
	// The read mark's batch, as the queue sends it: a Set of the
	// metadata, then the Get of the entry (readMark's shape).
	got := rec.reads()
	if len(got) != 1 {
		t.Fatalf("the queue took entry 0 with batches %+v; readmark.go expects one Set of %q and one Get of the entry", got, queueMetadataKey)
	}
	if _, _, ok := readMark(got[0]); !ok {
		t.Fatalf("the queue took entry 0 with %+v, not the shape readmark.go defers (a Set of %q, then a Get of the entry)", got[0], queueMetadataKey)
	}
	if got[0][1].Key != "0" {
		t.Fatalf("the queue took %q, want entry 0", got[0][1].Key)
	}
}
