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
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(zero))
	addr := uintptr(unsafe.Pointer(&b[0]))
	lo := int((page - addr%page) % page) // first page boundary inside b
	hi := len(b) - int((addr+uintptr(len(b)))%page)
	if hi-lo < page {
		return
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_DONTNEED)
}
