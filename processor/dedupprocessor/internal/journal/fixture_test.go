package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteDatadirFixture writes, with DOUBLETAKE_WRITE_FIXTURES=1, the
// journal file internal/datadir's damage tests salvage: the dedup
// processor's storage file as file_storage names it, with a seed and a
// span journal of 40 segments of 100 entries (record size 32, as spans).
func TestWriteDatadirFixture(t *testing.T) {
	if os.Getenv("DOUBLETAKE_WRITE_FIXTURES") == "" {
		t.Skip("writes a fixture; DOUBLETAKE_WRITE_FIXTURES=1 runs it")
	}
	dir := t.TempDir()
	ctx := context.Background()
	c, closeFn := fileStorageNamed(t, dir, "")
	if err := c.Set(ctx, "seed", make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	j, err := Open(ctx, c, Options{Prefix: "traces/", MaxSegments: 1000, RecordSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		p := make([]byte, 32*100)
		for k := range p {
			p[k] = byte(i*7 + k)
		}
		if err := j.Append(ctx, int64(1e18)+int64(i), p); err != nil {
			t.Fatal(err)
		}
	}
	closeFn()
	b, err := os.ReadFile(filepath.Join(dir, "processor_dedup_"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "..", "..", "internal", "datadir", "testdata", "processor_dedup_"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
