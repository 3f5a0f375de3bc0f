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
	advise(s, 4096, unix.MADV_DONTNEED)
}

// adviseHugePages asks the kernel to back the whole 2 MiB pages under s
// with transparent huge pages (when they are enabled, "always" or
// "madvise"). A set's index and ring are read at random: with 4 KiB pages
// nearly every lookup in a large set also misses the TLB. Best effort: an
// error leaves the pages as they were.
func adviseHugePages[T any](s []T) {
	advise(s, 2<<20, unix.MADV_HUGEPAGE)
}

// advise applies advice to the whole pages of the given size under s.
func advise[T any](s []T, page uintptr, advice int) {
	if len(s) == 0 {
		return
	}
	var zero T
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(zero))
	addr := uintptr(unsafe.Pointer(&b[0]))
	lo := int((page - addr%page) % page) // first page boundary inside b
	hi := len(b) - int((addr+uintptr(len(b)))%page)
	if hi-lo < int(page) {
		return
	}
	_ = unix.Madvise(b[lo:hi], advice)
}
