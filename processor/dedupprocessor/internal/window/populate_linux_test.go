//go:build linux

package window

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentShare is the share of the whole pages under s that are resident
// (mincore).
func residentShare[T any](t *testing.T, s []T) float64 {
	t.Helper()
	var zero T
	const page = 4096
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(zero))
	addr := uintptr(unsafe.Pointer(&b[0]))
	lo := int((page - addr%page) % page)
	hi := len(b) - int((addr+uintptr(len(b)))%page)
	vec := make([]byte, (hi-lo)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[lo])), uintptr(hi-lo), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}

// TestPopulateMakesTheMemoryResident: after Populate a new set's ring and
// index are resident before the first insertion, so that a fresh
// process's first keys do not fault them in a page at a time; before it
// they are not (New touches nothing).
func TestPopulateMakesTheMemoryResident(t *testing.T) {
	s, err := New[[24]byte, uint64](1<<20, 1e9, func(k *[24]byte) uint64 { return uint64(k[0]) })
	if err != nil {
		t.Fatal(err)
	}
	if r := residentShare(t, s.ring); r > 0.5 {
		t.Errorf("ring: %.3f of its pages resident before Populate, want few", r)
	}
	s.Populate()
	if r := residentShare(t, s.ring); r < 1 {
		t.Errorf("ring: %.3f of its pages resident, want all", r)
	}
	if r := residentShare(t, s.buckets); r < 1 {
		t.Errorf("index: %.3f of its pages resident, want all", r)
	}
}
