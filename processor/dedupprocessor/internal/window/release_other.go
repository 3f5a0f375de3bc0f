//go:build !linux

package window

func releaseMemory[T any]([]T) {}
