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
// reserved ahead of its writes (reserveBytes, within segment_bytes) while
// its size stays what was written (the end of the log when a client
// opens); a segment left behind by a roll, and the newest at Close, give
// the reserve back; a reopened client reserves again at its first write
// and reads what was written.
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
		noReserve(t, "the filesystem of %s has no fallocate(FALLOC_FL_KEEP_SIZE)", dir)
	}
	const segBytes, ahead = 1 << 20, 256 << 10
	opt := options{segmentBytes: segBytes, reserveBytes: ahead}
	c := mustOpen(t, dir, opt)
	want := map[string][]byte{}
	// reserved checks that path holds size bytes and has at least want
	// bytes allocated, at most most.
	reserved := func(path string, size, least, most int64) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != size {
			t.Fatalf("%s: size %d, want the %d bytes written", path, fi.Size(), size)
		}
		if got := allocated(t, path); got < least || got > most {
			t.Fatalf("%s (%d bytes written): %d bytes allocated, want %d to %d", path, size, got, least, most)
		}
	}
	const slack = 64 << 10 // a filesystem's own rounding
	set(t, c, want, "a", val(1, 10_000))
	first, size := newestSegment(c)
	reserved(first, size, size+ahead, size+ahead+slack)
	// Past the reserve: reserved again.
	set(t, c, want, "b", val(2, 600_000))
	_, size = newestSegment(c)
	reserved(first, size, size+ahead, size+ahead+slack)
	// A value that does not fit in what is left rolls, with 400 KB of
	// the reserve unused: given back.
	set(t, c, want, "b", val(3, 600_000))
	if n := segmentCount(c); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	reserved(first, size, 0, size+slack)
	second, size2 := newestSegment(c)
	reserved(second, size2, size2+ahead, size2+ahead+slack)
	// Near its end, a segment is reserved up to segment_bytes, no further.
	set(t, c, want, "d", val(5, 300_000))
	if n := segmentCount(c); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	_, size2 = newestSegment(c)
	reserved(second, size2, segBytes, segBytes+slack)
	closeClient(t, c)
	reserved(second, size2, 0, size2+slack)
	c = mustOpen(t, dir, opt)
	defer closeClient(t, c)
	checkState(t, c, want)
	set(t, c, want, "c", val(4, 1000))
	_, size2 = newestSegment(c)
	reserved(second, size2, segBytes, segBytes+slack)
	checkState(t, c, want)
}

// BenchmarkSegmentAppend is the write under the queue's: 16 KiB appended
// to a segment file, into blocks reserved reserveAhead at a time (as
// log_storage does, the reservations timed too) and into a plain file
// (ext4 then allocates page by page at each write). A file of 64 MiB is
// written and replaced.
func BenchmarkSegmentAppend(b *testing.B) {
	for _, reserve := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "reserved"}[reserve], func(b *testing.B) {
			const segBytes, rec = 64 << 20, 16 << 10
			path := b.TempDir() + "/seg"
			v := val(1, rec)
			var f *os.File
			var off, reserved int64
			open := func() {
				if f != nil {
					f.Close()
				}
				var err error
				if f, err = os.Create(path); err != nil {
					b.Fatal(err)
				}
				off, reserved = 0, 0
			}
			b.StopTimer()
			open()
			b.SetBytes(rec)
			b.StartTimer()
			for range b.N {
				if off+rec > segBytes {
					b.StopTimer()
					open()
					b.StartTimer()
				}
				if reserve && off+rec > reserved {
					reserved = off + rec + reserveAhead
					_ = preallocate(f, off, reserved, true)
				}
				if _, err := f.WriteAt(v, off); err != nil {
					b.Fatal(err)
				}
				off += rec
			}
			b.StopTimer()
			f.Close()
		})
	}
}

// TestReserveLeftByACrash: a process killed while writing leaves its
// reserve (at most reserveBytes past what it wrote); the next process
// gives it back once it leaves that segment behind.
func TestReserveLeftByACrash(t *testing.T) {
	dir := t.TempDir()
	const segBytes, ahead, slack = 1 << 20, 256 << 10, 64 << 10
	opt := options{segmentBytes: segBytes, reserveBytes: ahead}
	c := mustOpen(t, dir, opt)
	want := map[string][]byte{}
	set(t, c, want, "a", val(1, 10_000))
	first, size := newestSegment(c)
	if got := allocated(t, first); got < size+ahead {
		noReserve(t, "no reserve on this filesystem (%d bytes allocated)", got)
	}
	// kill -9: no Close, the files are simply let go.
	c.mu.Lock()
	if c.markTimer != nil {
		c.markTimer.Stop()
	}
	c.closeFiles()
	c.mu.Unlock()
	c = mustOpen(t, dir, opt)
	defer closeClient(t, c)
	if got := allocated(t, first); got > size+ahead+slack {
		t.Fatalf("after the crash %d bytes allocated for %d written: more than the reserve", got, size)
	}
	set(t, c, want, "b", val(2, 600_000))
	set(t, c, want, "b", val(3, 600_000)) // rolls
	if n := segmentCount(c); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := allocated(t, first); got > fi.Size()+slack {
		t.Fatalf("the segment left behind (%d bytes) still takes %d bytes", fi.Size(), got)
	}
	checkState(t, c, want)
}

// noReserve skips a test of the reserve where the filesystem has none,
// and fails it under CI=true, where the machine is known to have one
// (ext4): there a missing reserve is a broken reserve, not a skip.
func noReserve(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
