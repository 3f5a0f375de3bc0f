package dedupotlpexporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/trace"

	"github.com/doubletake/doubletake/extension/logstorageextension"
)

// keptRequests counts the queue entries taken without a decode and pushed
// out, from the exporter's own counters.
func (r *directRig) kept() (taken, pushedOut int64) {
	k := r.exp.up.kept
	if k == nil {
		return 0, 0
	}
	return k.takenCount.Load(), k.evicted.Load()
}

// TestKeptTakenWithoutDecode: through dedup and a dedup_otlp_grpc exporter
// whose requests all go through its persistent queue (log_storage, whose
// Take the queue's read goes through, and file_storage, read by a batch),
// every entry the consumer takes is the request stored, decoded from
// nothing, and the upstream gets every span once. With kept_bytes 0 every
// entry is decoded, as before.
func TestKeptTakenWithoutDecode(t *testing.T) {
	for _, sf := range []extension.Factory{logstorageextension.NewFactory(), filestorage.NewFactory()} {
		for _, limit := range []int{DefaultKeptBytes, 0} {
			t.Run(fmt.Sprintf("%s/kept_bytes=%d", sf.Type(), limit), func(t *testing.T) {
				r := startRig(t, sf, map[string]any{"direct": map[string]any{"enabled": false}, "kept_bytes": limit})
				const requests = 40
				var sent []ptrace.Traces
				for i := range requests {
					td := r.request(fmt.Sprintf("r%d", i), 1+i%5)
					sent = append(sent, cloneTraces(td))
					if err := r.proc.ConsumeTraces(context.Background(), td); err != nil {
						t.Fatal(err)
					}
					// One request at a time in the queue (a lone
					// sender): each is its own entry.
					waitUntil(t, "the request delivered", func() bool { ok, _ := r.up.has(sent[i]); return ok })
				}
				if c := r.up.copies(); c != 0 {
					t.Fatalf("%d spans arrived twice", c)
				}
				taken, out := r.kept()
				switch {
				case limit == 0 && r.exp.up.kept != nil:
					t.Fatal("kept_bytes 0 keeps requests")
				case limit > 0 && (taken != requests || out != 0):
					t.Fatalf("%d entries taken without a decode and %d pushed out, want %d and 0", taken, out, requests)
				}
			})
		}
	}
}

// TestKeptPushedOut: while the upstream holds the first send, entries pile
// up in the queue beyond kept_bytes; the oldest are pushed out (counted)
// and decoded when taken, the rest taken as stored, and every span
// arrives once.
func TestKeptPushedOut(t *testing.T) {
	r := startRig(t, logstorageextension.NewFactory(), map[string]any{"direct": map[string]any{"enabled": false}, "kept_bytes": 2000})
	hold := make(chan struct{})
	r.up.set(func(u *directUpstream) { u.hold = hold })
	var sent []ptrace.Traces
	for i := range 30 {
		td := r.request(fmt.Sprintf("p%d", i), 4)
		sent = append(sent, cloneTraces(td))
		if err := r.proc.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-r.up.entered // the first entry is being sent, and held
		}
	}
	r.up.set(func(u *directUpstream) { u.hold = nil })
	close(hold)
	waitUntil(t, "every request delivered", func() bool {
		for _, td := range sent {
			if ok, _ := r.up.has(td); !ok {
				return false
			}
		}
		return true
	})
	if c := r.up.copies(); c != 0 {
		t.Fatalf("%d spans arrived twice", c)
	}
	taken, out := r.kept()
	if out == 0 || taken == 0 || taken+out > 30 {
		t.Fatalf("%d entries taken as stored and %d pushed out of 30 written past a 2000-byte bound: want both, and no more than 30", taken, out)
	}
	k := r.exp.up.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.size > k.limit || len(k.byKey) != 0 {
		t.Fatalf("%d bytes in %d entries held once all were taken (bound %d)", k.size, len(k.byKey), k.limit)
	}
}

// countingRefs counts each request's references.
type countingRefs map[xexporterhelper.Request]int

func (c countingRefs) Ref(r xexporterhelper.Request)   { c[r]++ }
func (c countingRefs) Unref(r xexporterhelper.Request) { c[r]-- }

// held is the requests referenced now.
func (c countingRefs) held() int {
	n := 0
	for _, v := range c {
		if v < 0 {
			panic("a request released more often than referenced")
		}
		n += v
	}
	return n
}

// fakeRequest is a request of its own, told apart by its name.
type fakeRequest struct {
	xexporterhelper.Request
	name string
}

// TestKeptEntries: the bookkeeping, step by step. A request is kept from
// the write that stores it (not one that fails, nor the encoding of
// another), taken by the decode that follows its read when the bytes are
// the same memory the read gave, and released (its reference count back)
// when deleted unread, pushed out, read back as other bytes, or closed.
func TestKeptEntries(t *testing.T) {
	refs := countingRefs{}
	k := newKeptEntries(100, refs)
	enc := keptEncoding{inner: bytesEncoding{}, kept: k}
	ctx := context.Background()
	write := func(key string, req xexporterhelper.Request, fail error) []byte {
		b, err := enc.Marshal(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		k.wrote([]*storage.Operation{storage.SetOperation(queueMetadataKey, []byte("m")), storage.SetOperation(key, b)}, fail)
		return b
	}
	readAndDecode := func(key string, v []byte) xexporterhelper.Request {
		k.read(key, v)
		_, req, err := enc.Unmarshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	a, b, c, d := &fakeRequest{name: "a"}, &fakeRequest{name: "b"}, &fakeRequest{name: "c"}, &fakeRequest{name: "d"}

	// Stored, read back (a copy of the bytes, as storage gives), taken.
	stored := write("0", a, nil)
	if refs.held() != 1 {
		t.Fatalf("%d references after a write, want 1", refs.held())
	}
	if got := readAndDecode("0", append([]byte(nil), stored...)); got != a {
		t.Fatalf("entry 0 decoded to %v, want the request stored", got)
	}
	if k.takenCount.Load() != 1 {
		t.Fatal("entry 0 not counted taken")
	}
	refs.Unref(a) // the queue's consumer, once it is sent

	// A failed write keeps nothing.
	write("1", b, errors.New("full"))
	if refs.held() != 0 || len(k.byKey) != 0 {
		t.Fatal("a failed write kept its request")
	}

	// Read back as other bytes: decoded, the kept request released.
	write("2", b, nil)
	got := readAndDecode("2", []byte("other"))
	if f, ok := got.(*fakeRequest); !ok || f.name != "other" || refs.held() != 0 {
		t.Fatalf("other bytes decoded to %v with %d references, want a decode and none", got, refs.held())
	}

	// A read whose bytes are not decoded (the queue failed before):
	// released by the next read.
	write("3", c, nil)
	k.read("3", []byte("c"))
	if refs.held() != 1 {
		t.Fatal("a read not yet decoded released its request")
	}
	k.read("4", nil)
	if refs.held() != 0 {
		t.Fatal("a request read and never decoded still referenced")
	}

	// Deleted unread: released.
	write("5", c, nil)
	k.wrote([]*storage.Operation{storage.DeleteOperation("5")}, nil)
	if refs.held() != 0 {
		t.Fatal("a deleted entry still referenced")
	}

	// Past the bound (100 bytes): the oldest pushed out, counted.
	for i := range 5 {
		write(fmt.Sprint(10+i), &fakeRequest{name: fmt.Sprintf("%040d", i)}, nil)
	}
	if k.size > 100 || refs.held() != 2 || k.evicted.Load() != 4 {
		t.Fatalf("%d bytes held in %d requests, %d pushed out (counting the other bytes read back), want at most 100, 2, 4", k.size, refs.held(), k.evicted.Load())
	}
	if got := readAndDecode("10", []byte(fmt.Sprintf("%040d", 0))); got.(*fakeRequest).name != fmt.Sprintf("%040d", 0) {
		t.Fatal("an entry pushed out was not decoded")
	}

	// Larger than the bound: never kept, counted.
	write("20", &fakeRequest{name: string(make([]byte, 101))}, nil)
	if k.evicted.Load() != 5 || len(k.byKey) != 2 {
		t.Fatalf("an entry larger than the bound: %d pushed out, %d held", k.evicted.Load(), len(k.byKey))
	}

	// Close releases everything; later writes keep nothing.
	k.close()
	write("21", d, nil)
	if refs.held() != 0 {
		t.Fatalf("%d references after close", refs.held())
	}
}

// bytesEncoding encodes a fakeRequest as its name.
type bytesEncoding struct{}

func (bytesEncoding) Marshal(_ context.Context, r xexporterhelper.Request) ([]byte, error) {
	return []byte(r.(*fakeRequest).name), nil
}

func (bytesEncoding) Unmarshal(b []byte) (context.Context, xexporterhelper.Request, error) {
	return context.Background(), &fakeRequest{name: string(b)}, nil
}

// otherAddr is a net.Addr the queue's encoding does not know.
type otherAddr struct{}

func (otherAddr) Network() string { return "other" }
func (otherAddr) String() string  { return "other" }

// TestRestoredContext: the context a kept request is taken with is the one
// the queue's own decoding gives the same request stored with that
// context: its span context, and the client's metadata and address when
// it has either (a kind of address pdata does not store is dropped, as is
// the client's auth).
func TestRestoredContext(t *testing.T) {
	ts, err := trace.ParseTraceState("k=v")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: 1, TraceState: ts, Remote: true})
	md := client.NewMetadata(map[string][]string{"tenant": {"a"}, "many": {"x", "y"}})
	bg := context.Background()
	for name, ctx := range map[string]context.Context{
		"none":         bg,
		"span context": trace.ContextWithSpanContext(bg, sc),
		"tcp":          client.NewContext(bg, client.Info{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4317}}),
		"ip":           client.NewContext(bg, client.Info{Addr: &net.IPAddr{IP: net.IPv4(10, 0, 0, 2)}}),
		"unix":         client.NewContext(bg, client.Info{Addr: &net.UnixAddr{Name: "/run/otlp.sock", Net: "unix"}}),
		"udp":          client.NewContext(bg, client.Info{Addr: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 3), Port: 9}}),
		"other addr":   client.NewContext(bg, client.Info{Addr: otherAddr{}}),
		"metadata":     client.NewContext(bg, client.Info{Metadata: md}),
		"all": client.NewContext(trace.ContextWithSpanContext(bg, sc),
			client.Info{Metadata: md, Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}, Auth: fakeAuth{}}),
	} {
		t.Run(name, func(t *testing.T) {
			enc := xexporterhelper.NewTracesQueueBatchSettings().Encoding
			td := ptrace.NewTraces()
			td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("s")
			req := requestOf(t, td)
			b, err := enc.Marshal(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := enc.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			got := restoredContext(ctx)
			if !trace.SpanContextFromContext(got).Equal(trace.SpanContextFromContext(want)) {
				t.Errorf("span context %v, decoded %v", trace.SpanContextFromContext(got), trace.SpanContextFromContext(want))
			}
			gi, wi := client.FromContext(got), client.FromContext(want)
			if !reflect.DeepEqual(gi.Addr, wi.Addr) || gi.Auth != nil {
				t.Errorf("address %#v (auth %v), decoded %#v", gi.Addr, gi.Auth, wi.Addr)
			}
			if fmt.Sprint(metadataMap(gi.Metadata)) != fmt.Sprint(metadataMap(wi.Metadata)) {
				t.Errorf("metadata %v, decoded %v", metadataMap(gi.Metadata), metadataMap(wi.Metadata))
			}
		})
	}
}

func metadataMap(md client.Metadata) map[string][]string {
	m := map[string][]string{}
	for k := range md.Keys() {
		m[k] = md.Get(k)
	}
	return m
}

// requestOf is td as the traces exporter's queue holds it: the request its
// own encoding decodes from td's encoding.
func requestOf(t *testing.T, td ptrace.Traces) xexporterhelper.Request {
	t.Helper()
	enc := xexporterhelper.NewTracesQueueBatchSettings().Encoding
	// A request is only made by the exporterhelper: decode one.
	var m ptrace.ProtoMarshaler
	b, err := m.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	_, req, err := enc.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestKeptOnlyWhenOwned: an exporter that does not declare that it changes
// what it is handed (no batcher, no group commit, no direct sends) may be
// handed data other consumers read too: it keeps no request, and every
// entry is decoded. With any of the three it declares so, and keeps them.
func TestKeptOnlyWhenOwned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		owns  bool
	}{
		{"none", map[string]any{"direct": map[string]any{"enabled": false}, "group_commit": map[string]any{"max_items": 0}}, false},
		{"group commit", map[string]any{"direct": map[string]any{"enabled": false}}, true},
		{"direct", map[string]any{"group_commit": map[string]any{"max_items": 0}}, true},
		{"batcher", map[string]any{"direct": map[string]any{"enabled": false}, "group_commit": map[string]any{"max_items": 0},
			"sending_queue": map[string]any{"enabled": true, "storage": "log_storage", "num_consumers": 1, "sizer": "bytes", "queue_size": 64 << 20,
				"batch": map[string]any{"sizer": "bytes", "min_size": 1, "max_size": 1 << 20, "flush_timeout": "10ms"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRig(t, logstorageextension.NewFactory(), tc.extra)
			if mutates := r.exp.Capabilities().MutatesData; mutates != tc.owns {
				t.Fatalf("the exporter declares MutatesData %v, want %v", mutates, tc.owns)
			}
			if kept := r.exp.up.kept != nil; kept != tc.owns {
				t.Fatalf("requests kept: %v, want %v", kept, tc.owns)
			}
			td := r.request("o", 3)
			want := cloneTraces(td)
			if err := r.proc.ConsumeTraces(context.Background(), td); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the request delivered", func() bool { ok, _ := r.up.has(want); return ok })
		})
	}
}
