package nested

import "golang.org/x/sys/unix"

// threadCPU is the CPU time the calling thread has used, in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
