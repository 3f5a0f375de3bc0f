package logstorageextension

import (
	"os"
	"syscall"
	"testing"
)

// allocated is the disk space f's blocks take.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestSegmentsArePreallocated: the segment written has its blocks
// reserved up to segment_bytes while its size stays what was written (the
// end of the log when a client opens); a segment left behind by a roll,
// and the newest at Close, give the reserve back; a reopened client
// reserves again and reads what was written.
func TestSegmentsArePreallocated(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.Create(dir + "/probe")
	if err != nil {
		t.Fatal(err)
	}
	supported := syscall.Fallocate(int(probe.Fd()), 1, 0, 1<<20) == nil
	probe.Close()
	os.Remove(dir + "/probe")
	if !supported {
		t.Skipf("the filesystem of %s has no fallocate(FALLOC_FL_KEEP_SIZE)", dir)
	}
	const segBytes = 1 << 20
	c := mustOpen(t, dir, options{segmentBytes: segBytes})
	want := map[string][]byte{}
	set(t, c, want, "a", val(1, 10_000))
	first, size := newestSegment(c)
	if fi, err := os.Stat(first); err != nil || fi.Size() != size {
		t.Fatalf("segment %s: size %v (%v), want the %d bytes written", first, fi.Size(), err, size)
	}
	if got := allocated(t, first); got < segBytes {
		t.Fatalf("segment written: %d bytes allocated, want the %d of segment_bytes reserved", got, segBytes)
	}
	// A value that does not fit in what is left rolls, with 400 KB of
	// the reserve unused.
	set(t, c, want, "b", val(2, 600_000))
	set(t, c, want, "b", val(3, 600_000))
	if n := segmentCount(c); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := allocated(t, first); got > fi.Size()+64<<10 {
		t.Fatalf("rolled segment of %d bytes still takes %d bytes", fi.Size(), got)
	}
	second, _ := newestSegment(c)
	if got := allocated(t, second); got < segBytes {
		t.Fatalf("new segment: %d bytes allocated, want %d reserved", got, segBytes)
	}
	closeClient(t, c)
	fi, err = os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if got := allocated(t, second); got > fi.Size()+64<<10 {
		t.Fatalf("after Close the newest segment of %d bytes takes %d bytes", fi.Size(), got)
	}
	c = mustOpen(t, dir, options{segmentBytes: segBytes})
	defer closeClient(t, c)
	checkState(t, c, want)
	if got := allocated(t, second); got < segBytes {
		t.Fatalf("reopened: %d bytes allocated, want %d reserved", got, segBytes)
	}
}
