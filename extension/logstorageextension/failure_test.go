package logstorageextension

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// swapFile replaces the newest segment's file, as the client sees it,
// with f, and returns a function that puts the real one back.
func swapFile(c *client, f *os.File) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.segs[len(c.segs)-1]
	orig := s.f
	s.f = osFile{f}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		s.f = orig
		f.Close()
	}
}

// A write that fails and is cut off again changes nothing: the client
// goes on writing, and its data after a reopen is what it acknowledged.
func TestWriteFailsAndIsCutOff(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := mustOpen(t, dir, options{segmentBytes: 1 << 20})
	want := map[string][]byte{}
	set(t, c, want, "a", val(1, 100))
	path, _ := newestSegment(c)
	// WriteAt fails on a file opened to append; Truncate works.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	restore := swapFile(c, f)
	if err := c.Set(ctx, "b", val(2, 100)); err == nil {
		t.Fatal("a failed write acknowledged")
	}
	if err := c.Delete(ctx, "a"); err == nil {
		t.Fatal("a failed write acknowledged")
	}
	restore()
	checkState(t, c, want, "b")
	set(t, c, want, "c", val(3, 100))
	closeClient(t, c)
	c = mustOpen(t, dir, options{segmentBytes: 1 << 20})
	defer closeClient(t, c)
	checkState(t, c, want, "b")
}

// A write that fails and cannot be cut off leaves the segment's end
// unknown: the client writes nothing more (reads go on), and a reopen
// finds what it acknowledged.
func TestWriteFailsBroken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := mustOpen(t, dir, options{segmentBytes: 1 << 20})
	want := map[string][]byte{}
	set(t, c, want, "a", val(1, 100))
	path, _ := newestSegment(c)
	// Neither WriteAt nor Truncate work on a read-only file.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	restore := swapFile(c, f)
	if err := c.Set(ctx, "b", val(2, 100)); err == nil {
		t.Fatal("a failed write acknowledged")
	}
	restore()
	err = c.Set(ctx, "c", val(3, 100))
	if err == nil || !strings.Contains(err.Error(), "nothing more is written") {
		t.Fatalf("a write after one that could not be cut off: %v", err)
	}
	if err := c.Batch(ctx, storage.SetOperation("c", nil), storage.GetOperation("a")); err == nil {
		t.Fatal("a batch with a write acknowledged")
	}
	checkState(t, c, want, "b", "c")
	closeClient(t, c)
	c = mustOpen(t, dir, options{segmentBytes: 1 << 20})
	defer closeClient(t, c)
	checkState(t, c, want, "b", "c")
}

// After a failed fsync the kernel may have dropped the pages it could not
// write, and a later fsync succeeds: a write after it would be
// acknowledged behind a hole. The client writes nothing more. (The
// segment is swapped for /dev/null, where a write succeeds and fsync
// fails, as when the disk lost it.)
func TestSyncFailsBroken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := mustOpen(t, dir, options{fsync: true, segmentBytes: 1 << 20})
	want := map[string][]byte{}
	set(t, c, want, "a", val(1, 100))
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if null.Sync() == nil {
		t.Skip("fsync works on", os.DevNull)
	}
	restore := swapFile(c, null)
	if err := c.Set(ctx, "lost", val(2, 100)); err == nil {
		t.Fatal("a write whose fsync failed acknowledged")
	}
	restore()
	err = c.Set(ctx, "after", val(3, 100))
	if err == nil || !strings.Contains(err.Error(), "nothing more is written") {
		t.Fatalf("a write after a failed fsync: %v", err)
	}
	get := storage.GetOperation("a")
	if err := c.Batch(ctx, get); err != nil || !bytes.Equal(get.Value, want["a"]) {
		t.Fatalf("reads stop too: %v", err)
	}
	closeClient(t, c)
	var r recorder
	c = mustOpen(t, dir, r.opts(1<<20))
	defer closeClient(t, c)
	checkState(t, c, want, "lost", "after")
}

// queueStep is a Batch and what the client holds after it.
type queueStep struct {
	ops   []*storage.Operation
	model map[string][]byte
}

// queueSteps are the persistent queue's writes for n items: put (the
// write index and the item), get (in a batch that also sets the
// metadata), delete (the read index and the item), after a value that
// stays.
func queueSteps(n, stays, itemSize int) []queueStep {
	var steps []queueStep
	m := map[string][]byte{}
	add := func(ops ...*storage.Operation) {
		for _, op := range ops {
			switch op.Type {
			case storage.Set:
				m[op.Key] = op.Value
			case storage.Delete:
				delete(m, op.Key)
			}
		}
		steps = append(steps, queueStep{ops, maps.Clone(m)})
	}
	add(storage.SetOperation("stays", val(0, stays)))
	for i := range n {
		item := fmt.Sprint(i)
		add(storage.SetOperation("wi", []byte{byte(i)}), storage.SetOperation(item, val(i, itemSize)))
		add(storage.SetOperation("meta", []byte{byte(i), 1}), storage.GetOperation(item))
		add(storage.SetOperation("ri", []byte{byte(i)}), storage.DeleteOperation(item))
	}
	return steps
}

// compactionSteps are the queue's steps and the first of them that fits
// in the newest segment and after which compacting (4 KiB segments)
// starts a new segment: a compaction that fails while the write works
// when the next segment's name is taken.
func compactionSteps(t *testing.T) ([]queueStep, int) {
	t.Helper()
	steps := queueSteps(60, 3000, 1000)
	var compacted int
	c := mustOpen(t, t.TempDir(), options{segmentBytes: 4096, compacted: func(int64) { compacted++ }})
	defer closeClient(t, c)
	for i, s := range steps {
		path, size := newestSegment(c)
		fits := size+recordSize(s.ops) <= 4096
		before := compacted
		if err := c.Batch(context.Background(), s.ops...); err != nil {
			t.Fatal(err)
		}
		if p, _ := newestSegment(c); fits && compacted > before && p != path {
			return steps, i
		}
	}
	t.Fatal("no write after which compacting starts a new segment")
	return nil, 0
}

// A write that succeeded stands when compacting after it fails: Batch
// returns no error (told that a Batch reading an item failed, the
// persistent queue deletes the item undelivered), the failure is
// reported once until a compaction succeeds, and compaction is tried
// again after every write.
func TestCompactionFailureKeepsTheWrite(t *testing.T) {
	ctx := context.Background()
	steps, at := compactionSteps(t)
	dir := t.TempDir()
	var failures []error
	c := mustOpen(t, dir, options{segmentBytes: 4096, compactFailed: func(err error) { failures = append(failures, err) }})
	for _, s := range steps[:at] {
		if err := c.Batch(ctx, s.ops...); err != nil {
			t.Fatal(err)
		}
	}
	// The next segment's name is taken: compacting cannot start it.
	c.mu.Lock()
	next := filepath.Join(dir, segName(c.segs[len(c.segs)-1].num+1))
	c.mu.Unlock()
	if err := os.Mkdir(next, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := c.Batch(ctx, steps[at].ops...); err != nil {
		t.Fatalf("a write that succeeded reported failed: %v", err)
	}
	if len(failures) != 1 || !errors.Is(failures[0], os.ErrExist) {
		t.Fatalf("compaction failures reported: %v", failures)
	}
	want := maps.Clone(steps[at].model)
	checkState(t, c, want)
	// The queue's read, compaction failing again: the value read, no
	// error, nothing more reported.
	get := storage.GetOperation("stays")
	if err := c.Batch(ctx, storage.SetOperation("meta", []byte{9}), get); err != nil {
		t.Fatalf("a read reported failed: %v", err)
	}
	if !bytes.Equal(get.Value, want["stays"]) {
		t.Fatalf("read %d bytes", len(get.Value))
	}
	want["meta"] = []byte{9}
	if len(failures) != 1 {
		t.Fatalf("compaction failures reported: %v", failures)
	}
	// Freed, the next write compacts: the disk is bounded again.
	if err := os.Remove(next); err != nil {
		t.Fatal(err)
	}
	set(t, c, want, "meta", []byte{10})
	c.mu.Lock()
	total, live := c.total, c.live
	c.mu.Unlock()
	if total > 2*live+4096 {
		t.Fatalf("%d bytes for %d live after compacting again", total, live)
	}
	checkState(t, c, want)
	closeClient(t, c)
	c = mustOpen(t, dir, options{segmentBytes: 4096})
	defer closeClient(t, c)
	checkState(t, c, want)
}
