package logstorageextension

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves the disk blocks of f from off to end without
// changing its size (FALLOC_FL_KEEP_SIZE), so that an append finds its
// blocks allocated: on ext4 a 16 KiB append then costs about a quarter
// less CPU (no delayed allocation page by page; BenchmarkSegmentAppend).
// The size stays what was written, which opening a client reads as the
// end of the log. Best effort: a filesystem without fallocate, or without
// room (the write then fails as it would have), is written as before.
func preallocate(f *os.File, off, end int64) {
	if end > off {
		_ = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, end-off)
	}
}
