//go:build !linux

package pdataenc

// threadCPU is not measured here: the benchmarks report wall time only.
func threadCPU() int64 { return 0 }
