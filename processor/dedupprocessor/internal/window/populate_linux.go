//go:build linux

package window

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// populateMemory makes the whole pages under s resident now, written (so
// private, not the shared zero page), in one madvise call where the kernel
// has MADV_POPULATE_WRITE (5.14 on), else by writing a zero into each page.
// A new set's ring and index are otherwise faulted in a page at a time by
// the insertions that first reach them, on the span path of a fresh
// process. s must hold nothing of value yet (it is all zeros).
func populateMemory[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	const page = 4096
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(zero))
	addr := uintptr(unsafe.Pointer(&b[0]))
	lo := int((page - addr%page) % page)
	hi := len(b) - int((addr+uintptr(len(b)))%page)
	if hi-lo < page {
		return
	}
	if unix.Madvise(b[lo:hi], unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	for i := lo; i < hi; i += page {
		b[i] = 0
	}
}
