package window

import "unsafe"

func sizeOf[T any](v T) int { return int(unsafe.Sizeof(v)) }

// firstByte loads the first byte of *p, to bring its cache line in.
func firstByte[T any](p *T) byte { return *(*byte)(unsafe.Pointer(p)) }
