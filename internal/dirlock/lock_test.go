//go:build unix

package dirlock

import (
	"errors"
	"os"
	"testing"
)

// TestLockHeldOnce: a second Lock on a held dir, in this process too,
// fails at once with the holder's PID; once the holder closes, it
// succeeds.
func TestLockHeldOnce(t *testing.T) {
	dir := t.TempDir()
	f, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.Dir != dir || held.PID != os.Getpid() {
		t.Fatalf("second lock: %v, want a HeldError naming %s and pid %d", err, dir, os.Getpid())
	}
	_ = f.Close()
	g, err := Lock(dir)
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	_ = g.Close()
}

// TestLockMissingDir: a directory that is not there is an error, not a
// lock.
func TestLockMissingDir(t *testing.T) {
	if f, err := Lock(t.TempDir() + "/missing"); err == nil {
		_ = f.Close()
		t.Fatal("locked a directory that does not exist")
	}
}
