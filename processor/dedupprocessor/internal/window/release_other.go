//go:build !linux

package window

func releaseMemory[T any]([]T) {}

func adviseHugePages[T any]([]T) {}
