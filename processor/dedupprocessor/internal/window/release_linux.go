//go:build linux

package window

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// releaseMemory tells the kernel the whole pages under s are not needed:
// they leave the resident set, and read as zeros when touched again. s
// must hold no pointers (ring entries never do) and nothing of value.
func releaseMemory[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	const page = 4096
	start := uintptr(unsafe.Pointer(&s[0]))
	end := start + uintptr(len(s))*unsafe.Sizeof(zero)
	start = (start + page - 1) &^ (page - 1)
	end &^= page - 1
	if end <= start {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(start)), end-start), unix.MADV_DONTNEED)
}
