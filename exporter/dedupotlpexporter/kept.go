package dedupotlpexporter

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/trace"
)

// The queue's consumer takes the request the queue stored, not a decode
// of it.
//
// exporterhelper's persistent queue (v0.161) encodes each request it
// stores, writes it, and, when its consumer takes the entry (most often
// within a millisecond: a lone sender's request is taken as soon as it is
// written), reads the bytes back and decodes them: a decode of every
// request the gateway forwards, which the stock collector's in-memory
// queue does not pay (about a tenth of the gateway's CPU at one sender of
// 64-span requests, docs/benchmarks.md). So the request the queue encoded
// is kept in memory (keptEntries) from the write that stores it until the
// consumer reads the entry back: when the bytes read are the bytes
// written, the queue's decoder (keptEncoding) hands the consumer the kept
// request, with the context a decode would give (restoredContext), and
// decodes nothing. The entry is stored as before, and read as before: a
// restart, or an entry the bound pushed out, is decoded from storage.
//
// The kept request is the one the exporter was handed, which is what the
// collector's in-memory queue keeps too. Requests are kept only by an
// exporter that declares that it changes what it is given (batcher, group
// commit or direct sends: factory.go), so that the collector hands it data
// nobody else reads. It is referenced (pdata's reference count, for pooled pdata) while
// kept, as the in-memory queue does, and released when it is pushed out
// unread, deleted unread or the client closes; one taken is released by
// the queue's consumer once sent, as for a decoded one.
//
// The bound: kept_bytes of encoded entries (the request in memory takes a
// few times that), the oldest pushed out first. Both outcomes are counted
// in otelcol_exporter_dedup_queue_kept_entries (outcome taken or
// pushed_out).
//
// This relies on the queue passing the slice its encoding returned to the
// storage's Set, and decoding the very slice its read returned;
// TestKeptTakenWithoutDecode fails (no entry taken) when a collector bump
// changes either.

// refCounter is the queue's reference count of a request (its
// QueueBatchSettings' ReferenceCounter).
type refCounter interface {
	Ref(xexporterhelper.Request)
	Unref(xexporterhelper.Request)
}

// queueEncoding is the persistent queue's encoding of a request.
type queueEncoding interface {
	Marshal(context.Context, xexporterhelper.Request) ([]byte, error)
	Unmarshal([]byte) (context.Context, xexporterhelper.Request, error)
}

// keptEntry is a request the queue stored, and what it stored.
type keptEntry struct {
	buf []byte // the encoding written
	ctx context.Context
	req xexporterhelper.Request
}

// keptEntries holds the requests one queue stored and has not read back.
// The queue makes one call at a time (under its own lock); the lock here
// orders them with Close.
type keptEntries struct {
	limit int64
	rc    refCounter

	mu sync.Mutex
	// pending is the last request encoded, until the write that stores
	// it.
	pending keptEntry
	byKey   map[string]*keptEntry
	order   []string // keys in the order written (some taken since)
	size    int64    // encoded bytes held
	// taken is the entry just read back, for the decode that follows.
	taken    *keptEntry
	takenBuf []byte
	closed   bool

	takenCount, evicted atomic.Int64
}

func newKeptEntries(limit int64, rc refCounter) *keptEntries {
	return &keptEntries{limit: limit, rc: rc, byKey: map[string]*keptEntry{}}
}

// keptEncoding is the queue's encoding with the kept requests in front.
type keptEncoding struct {
	inner queueEncoding
	kept  *keptEntries
}

func (e keptEncoding) Marshal(ctx context.Context, req xexporterhelper.Request) ([]byte, error) {
	b, err := e.inner.Marshal(ctx, req)
	if err == nil {
		e.kept.encoded(ctx, req, b)
	}
	return b, err
}

func (e keptEncoding) Unmarshal(b []byte) (context.Context, xexporterhelper.Request, error) {
	if ctx, req, ok := e.kept.decode(b); ok {
		return ctx, req, nil
	}
	return e.inner.Unmarshal(b)
}

// encoded remembers the request just encoded, until its write.
func (k *keptEntries) encoded(ctx context.Context, req xexporterhelper.Request, b []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = keptEntry{buf: b, ctx: ctx, req: req}
}

// sameBytes says whether a and b are the same memory.
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// wrote is told of every batch the queue wrote (err nil) or failed to
// write: the entry it stored from the pending request is kept, the
// entries it deleted are released.
func (k *keptEntries) wrote(ops []*storage.Operation, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.pending
	k.pending = keptEntry{}
	if err != nil || k.closed {
		return
	}
	for _, op := range ops {
		if !isEntryKey(op.Key) {
			continue
		}
		switch op.Type {
		case storage.Set:
			k.drop(op.Key)
			if p.req == nil || !sameBytes(op.Value, p.buf) {
				continue
			}
			if int64(len(p.buf)) > k.limit {
				k.evicted.Add(1) // larger than the bound: decoded when taken
			} else {
				k.keep(op.Key, p)
			}
			p = keptEntry{}
		case storage.Delete:
			k.drop(op.Key)
		}
	}
}

func (k *keptEntries) keep(key string, e keptEntry) {
	k.rc.Ref(e.req)
	e.ctx = restoredContext(e.ctx)
	k.byKey[key] = &e
	k.order = append(k.order, key)
	k.size += int64(len(e.buf))
	for k.size > k.limit && len(k.order) > 0 {
		oldest := k.order[0]
		k.order = k.order[1:]
		if _, ok := k.byKey[oldest]; ok {
			k.drop(oldest)
			k.evicted.Add(1)
		}
	}
	if len(k.order) > 2*len(k.byKey)+64 {
		// Keys taken since are dropped from the order.
		live := k.order[:0]
		for _, key := range k.order {
			if _, ok := k.byKey[key]; ok {
				live = append(live, key)
			}
		}
		clear(k.order[len(live):])
		k.order = live
	}
}

// drop releases key's entry, when held.
func (k *keptEntries) drop(key string) {
	e, ok := k.byKey[key]
	if !ok {
		return
	}
	delete(k.byKey, key)
	k.size -= int64(len(e.buf))
	k.rc.Unref(e.req)
}

// read is told of an entry the queue read back from storage (v, nil when
// absent): when v is what was written, the decode of v that follows
// takes the kept request.
func (k *keptEntries) read(key string, v []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.releaseTaken()
	e, ok := k.byKey[key]
	if !ok {
		return
	}
	delete(k.byKey, key)
	k.size -= int64(len(e.buf))
	if len(v) == 0 || !bytes.Equal(v, e.buf) {
		// Not what was written: the bytes read are decoded.
		k.rc.Unref(e.req)
		k.evicted.Add(1)
		return
	}
	k.taken, k.takenBuf = e, v
}

// releaseTaken releases an entry read back and not decoded.
func (k *keptEntries) releaseTaken() {
	if k.taken != nil {
		k.rc.Unref(k.taken.req)
		k.taken, k.takenBuf = nil, nil
	}
}

// decode returns the kept request of the entry just read, when b is its
// bytes.
func (k *keptEntries) decode(b []byte) (context.Context, xexporterhelper.Request, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.taken
	if e == nil || !sameBytes(b, k.takenBuf) {
		k.releaseTaken()
		return nil, nil, false
	}
	k.taken, k.takenBuf = nil, nil
	k.takenCount.Add(1)
	return e.ctx, e.req, true
}

// close releases every entry held; nothing is kept after.
func (k *keptEntries) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	k.releaseTaken()
	for key := range k.byKey {
		k.drop(key)
	}
	k.order = nil
	k.pending = keptEntry{}
}

// restoredContext is the context the queue's decoder gives a request
// stored with ctx (pdata's xpdata/request: the span context, and the
// client's metadata and address when it has either).
func restoredContext(ctx context.Context) context.Context {
	out := context.Background()
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		out = trace.ContextWithSpanContext(out, sc)
	}
	info := client.FromContext(ctx)
	hasMetadata := false
	for range info.Metadata.Keys() {
		hasMetadata = true
		break
	}
	var addr net.Addr
	switch info.Addr.(type) {
	case *net.IPAddr, *net.TCPAddr, *net.UDPAddr, *net.UnixAddr:
		addr = info.Addr
	}
	if hasMetadata || addr != nil {
		// Metadata is immutable: shared, not copied.
		out = client.NewContext(out, client.Info{Metadata: info.Metadata, Addr: addr})
	}
	return out
}
