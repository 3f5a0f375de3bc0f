//go:build unix

package datadir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLockHeldOnce: a second Lock on a held dir fails at once naming the
// dir and the holder's PID; once the holder closes, it succeeds.
func TestLockHeldOnce(t *testing.T) {
	dir := t.TempDir()
	f, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	_ = f.Close()
	g, err := Lock(dir)
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	_ = g.Close()
}

// TestCheckWritable names a path that cannot be opened for writing.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := CheckWritable(filepath.Join(dir, "a", "traces.jsonl")); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "d")
	if err := os.Mkdir(bad, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := CheckWritable(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a directory as the file: %v", err)
	}
}
