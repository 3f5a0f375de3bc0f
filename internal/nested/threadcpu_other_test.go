//go:build !linux

package nested

// threadCPU is not measured here: the benchmarks report wall time only.
func threadCPU() int64 { return 0 }
