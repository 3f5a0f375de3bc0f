package logstorageextension

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// checkState checks that c holds want: its keys, and none of more.
func checkState(t *testing.T, c *client, want map[string][]byte, more ...string) {
	t.Helper()
	keys := slices.Concat(slices.Collect(mapKeys(want)), more)
	for _, k := range keys {
		got, err := c.Get(context.Background(), k)
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		w, ok := want[k]
		switch {
		case !ok && got != nil:
			t.Fatalf("%q: got %d bytes, want none", k, len(got))
		case ok && (got == nil || !bytes.Equal(got, w)):
			t.Fatalf("%q: got %d bytes %.16x, want %d bytes %.16x", k, len(got), got, len(w), w)
		}
	}
	c.mu.Lock()
	n := len(c.idx)
	c.mu.Unlock()
	if n != len(want) {
		t.Fatalf("%d keys, want %d", n, len(want))
	}
	checkBooks(t, c)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func val(seed, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(seed*31 + i*7 + 1)
	}
	return v
}

func set(t *testing.T, c *client, want map[string][]byte, k string, v []byte) {
	t.Helper()
	if err := c.Set(context.Background(), k, v); err != nil {
		t.Fatal(err)
	}
	want[k] = v
}

func closeClient(t *testing.T, c *client) {
	t.Helper()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// newestSegment is the path and size of the segment c writes.
func newestSegment(c *client) (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.segs[len(c.segs)-1]
	return s.f.Name(), s.size
}

func segmentCount(c *client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.segs)
}

// where is the segment and value offset of key's current value.
func where(t *testing.T, c *client, key string) loc {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.idx[key]
	if !ok {
		t.Fatalf("%q is not there", key)
	}
	return l
}

// records are the offsets of the records of a segment file, and its end.
func records(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(segMagic)) {
		t.Fatalf("%s: no magic", path)
	}
	var offs []int64
	off := int64(len(segMagic))
	for off < int64(len(b)) {
		offs = append(offs, off)
		off += recHeader + int64(binary.LittleEndian.Uint32(b[off:]))
	}
	if off != int64(len(b)) {
		t.Fatalf("%s: records end at %d, the file at %d", path, off, len(b))
	}
	return append(offs, off)
}

// A Get after a Set or a Delete of its key in the same Batch sees it, as
// a Get after the Batch does, an empty value too: Set(k, nil) stores an
// empty value, which is there (not nil), within the batch as after it.
func TestBatchGetSeesEarlierWrites(t *testing.T) {
	ctx := context.Background()
	c := mustOpen(t, t.TempDir(), options{segmentBytes: 4096})
	defer closeClient(t, c)
	if err := c.Set(ctx, "gone", []byte("old")); err != nil {
		t.Fatal(err)
	}
	before := storage.GetOperation("gone")
	ops := []*storage.Operation{
		before,
		storage.SetOperation("big", val(1, 1000)),
		storage.GetOperation("big"),
		storage.SetOperation("empty", nil),
		storage.GetOperation("empty"),
		storage.DeleteOperation("gone"),
		storage.GetOperation("gone"),
		storage.SetOperation("big", val(2, 10)),
		storage.GetOperation("big"),
	}
	if err := c.Batch(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if string(before.Value) != "old" {
		t.Fatalf("a Get before the Delete: %q", before.Value)
	}
	if !bytes.Equal(ops[2].Value, val(1, 1000)) || !bytes.Equal(ops[8].Value, val(2, 10)) {
		t.Fatal("a Get after a Set in the batch did not see it")
	}
	if ops[4].Value == nil {
		t.Fatal("a Get after Set(k, nil) in the batch: nil (absent)")
	}
	if ops[6].Value != nil {
		t.Fatalf("a Get after a Delete in the batch: %q", ops[6].Value)
	}
	v, err := c.Get(ctx, "empty")
	if err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get after Set(k, nil): %v, %v; want an empty value", v, err)
	}
	// Only the writes were appended, in one record.
	if got, want := where(t, c, "big").seg, uint64(1); got != want {
		t.Fatalf("segment %d", got)
	}
	path, _ := newestSegment(c)
	if n := len(records(t, path)) - 1; n != 2 {
		t.Fatalf("%d records, want 2 (the Set, the Batch)", n)
	}
}

// A closed client returns an error for every operation; closing it
// again is no error.
func TestClosedClient(t *testing.T) {
	ctx := context.Background()
	c := mustOpen(t, t.TempDir(), options{segmentBytes: 4096})
	closeClient(t, c)
	if _, err := c.Get(ctx, "a"); !errors.Is(err, errClosed) {
		t.Fatalf("Get: %v", err)
	}
	if err := c.Set(ctx, "a", nil); !errors.Is(err, errClosed) {
		t.Fatalf("Set: %v", err)
	}
	if err := c.Delete(ctx, "a"); !errors.Is(err, errClosed) {
		t.Fatalf("Delete: %v", err)
	}
	if err := c.Batch(ctx, storage.GetOperation("a")); !errors.Is(err, errClosed) {
		t.Fatalf("Batch: %v", err)
	}
	closeClient(t, c)
}

// Segments whose values are all overwritten are removed and the disk
// stays bounded under the queue's pattern; what is compacted is counted.
func TestCompactionBoundsTheDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var compacted int64
	c := mustOpen(t, dir, options{segmentBytes: 4096, compacted: func(n int64) { compacted += n }})
	want := map[string][]byte{}
	// A value that stays while the queue moves on: its segment is
	// compacted, not kept forever.
	set(t, c, want, "stays", val(1, 1000))
	var maxRec int64
	for i := range 500 {
		item := fmt.Sprintf("%d", i)
		put := []*storage.Operation{storage.SetOperation("wi", binary.LittleEndian.AppendUint64(nil, uint64(i))), storage.SetOperation(item, val(i, 600))}
		maxRec = max(maxRec, recordSize(put))
		if err := c.Batch(ctx, put...); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, item); err != nil {
			t.Fatal(err)
		}
		if err := c.Batch(ctx, storage.SetOperation("ri", binary.LittleEndian.AppendUint64(nil, uint64(i))), storage.DeleteOperation(item)); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		total, live := c.total, c.live
		c.mu.Unlock()
		if bound := 2*live + 4096 + int64(len(segMagic)) + maxRec; total > bound {
			t.Fatalf("after %d items: %d bytes on disk, more than %d", i, total, bound)
		}
	}
	want["wi"] = binary.LittleEndian.AppendUint64(nil, 499)
	want["ri"] = binary.LittleEndian.AppendUint64(nil, 499)
	if where(t, c, "stays").seg == 1 || compacted == 0 {
		t.Fatalf("the value that stays was not copied forward (compacted %d)", compacted)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The segments and the drain reserve.
	if len(ents) != segmentCount(c)+1 {
		t.Fatalf("%d files, %d segments and the drain reserve", len(ents), segmentCount(c))
	}
	checkState(t, c, want)
	closeClient(t, c)
	c = mustOpen(t, dir, options{segmentBytes: 4096})
	defer closeClient(t, c)
	checkState(t, c, want)
}

// TestLargeBatchGetSeesEarlierWrites: in a batch of more than 32
// operations (looked up through a map, not a scan), a Get sees the Set or
// Delete before it in the batch too.
func TestLargeBatchGetSeesEarlierWrites(t *testing.T) {
	ctx := context.Background()
	c := mustOpen(t, t.TempDir(), options{segmentBytes: 1 << 20})
	defer closeClient(t, c)
	if err := c.Set(ctx, "gone", []byte("before")); err != nil {
		t.Fatal(err)
	}
	var ops []*storage.Operation
	for i := range 40 {
		ops = append(ops, storage.SetOperation(fmt.Sprint("k", i), []byte(fmt.Sprint("v", i))))
	}
	ops = append(ops, storage.DeleteOperation("gone"), storage.SetOperation("k3", nil))
	gets := []*storage.Operation{storage.GetOperation("k5"), storage.GetOperation("gone"), storage.GetOperation("k3")}
	ops = append(ops, gets...)
	if err := c.Batch(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if string(gets[0].Value) != "v5" || gets[1].Value != nil || gets[2].Value == nil || len(gets[2].Value) != 0 {
		t.Fatalf("in-batch gets: %q %q %q", gets[0].Value, gets[1].Value, gets[2].Value)
	}
}

// TestTake: Take reads what Get reads (a value, nil for a key not held)
// without making it a value moved to a new key (a Set of the same bytes
// is written whole, not as a reference); it fails once the client writes
// nothing more, and on a closed client.
func TestTake(t *testing.T) {
	ctx := context.Background()
	c, err := openClient(t.TempDir(), options{segmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte{7}, 1000)
	if err := c.Set(ctx, "0", val); err != nil {
		t.Fatal(err)
	}
	v, err := c.Take(ctx, "0")
	if err != nil || !bytes.Equal(v, val) {
		t.Fatalf("Take: %d bytes, %v; want the value", len(v), err)
	}
	if v, err := c.Take(ctx, "1"); err != nil || v != nil {
		t.Fatalf("Take of a key not held: %q, %v; want nil", v, err)
	}
	if len(c.moves) != 0 {
		t.Fatalf("Take remembered %d values as moved", len(c.moves))
	}
	if _, err := c.Get(ctx, "0"); err != nil {
		t.Fatal(err)
	}
	if len(c.moves) != 1 {
		t.Fatalf("Get alone remembered %d values as moved, want 1 (moved.go)", len(c.moves))
	}
	c.broken = errors.New("broken")
	if _, err := c.Take(ctx, "0"); !errors.Is(err, c.broken) {
		t.Fatalf("Take on a client that writes nothing more: %v", err)
	}
	if v, err := c.Get(ctx, "0"); err != nil || !bytes.Equal(v, val) {
		t.Fatalf("Get on a client that writes nothing more: %v; it reads", err)
	}
	c.broken = nil
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(ctx, "0"); !errors.Is(err, errClosed) {
		t.Fatalf("Take on a closed client: %v", err)
	}
}
