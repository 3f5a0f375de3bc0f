//go:build !linux

package window

func populateMemory[T any]([]T) {}
