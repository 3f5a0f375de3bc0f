package datadir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// FuzzParseBolt: the page parser reads any bytes without a panic, in
// bounded time, and never returns a key or value from outside the input.
func FuzzParseBolt(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "processor_dedup_")); err == nil {
		f.Add(b[:16384])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ps := range []int{512, 4096} {
			bf := parseBolt(data, ps)
			for k, v := range bf.tree {
				if len(k)+len(v) > len(data) {
					t.Fatalf("a record of %d bytes from %d bytes", len(k)+len(v), len(data))
				}
			}
			Salvage("exporter_x_traces", data, dedupprocessor.SalvageJournal)
			Salvage("processor_dedup_", data, dedupprocessor.SalvageJournal)
		}
	})
}
