package logstorageextension

import (
	"bytes"
	"context"
	"os"
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
	s.f = f
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
