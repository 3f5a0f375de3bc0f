package journal

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// copyFixture copies testdata/v1, a journal written by format 1 (5 insert
// segments of 3000 entries of 8 bytes, numbered i*10000+k, arrival times
// 1000..1004, then a forget segment of entry 3), into a temporary dir.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "v1", "processor_dedup__traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "processor_dedup__traces"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFormat1JournalLoads: a journal written before segments carried
// checksums replays whole, and appends after it are checked.
func TestFormat1JournalLoads(t *testing.T) {
	dir := copyFixture(t)
	ctx := context.Background()
	c, closeFn := fileStorage(t, dir)
	inserted, forgot := 0, 0
	opt := Options{Prefix: "traces/", MaxSegments: 100, RecordSize: 8,
		Insert: func(at int64, p []byte) {
			if at != int64(1000+inserted) || len(p) != 8*3000 || binary.LittleEndian.Uint64(p) != uint64(inserted*10000) {
				t.Errorf("segment %d: at %d, %d bytes", inserted, at, len(p))
			}
			inserted++
		},
		Forget: func([]byte) { forgot++ },
	}
	j, err := Open(ctx, c, opt)
	if err != nil {
		t.Fatal(err)
	}
	if inserted != 5 || forgot != 1 || j.Stats().Corrupted != 0 {
		t.Fatalf("replayed %d inserts, %d forgets, %d corrupted; want 5, 1, 0", inserted, forgot, j.Stats().Corrupted)
	}
	if err := j.Append(ctx, 3000, payload(99)); err != nil {
		t.Fatal(err)
	}
	closeFn()
	c, closeFn = fileStorage(t, dir)
	defer closeFn()
	inserted, forgot = 0, 0
	got := 0
	opt.Insert = func(at int64, _ []byte) {
		if at == 3000 {
			got++
		}
		inserted++
	}
	j, err = Open(ctx, c, opt)
	if err != nil {
		t.Fatal(err)
	}
	if inserted != 6 || got != 1 || j.Stats().Corrupted != 0 {
		t.Fatalf("after an append: %d inserts (%d new), %d corrupted", inserted, got, j.Stats().Corrupted)
	}
}

// TestFlippedByteIsCounted: a byte flipped in a stored part is found by
// the segment's checksum: the segment is skipped and counted, not
// replayed as other entries.
func TestFlippedByteIsCounted(t *testing.T) {
	ctx := context.Background()
	c, closeFn := fileStorage(t, t.TempDir())
	defer closeFn()
	j, err := Open(ctx, c, Options{Prefix: "traces/", MaxSegments: 100, RecordSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Append(ctx, int64(10+i), payload(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	key := j.partKey(1, 0)
	v, err := c.Get(ctx, key)
	if err != nil || len(v) != 8 {
		t.Fatalf("part %s: %v %d", key, err, len(v))
	}
	v[3] ^= 0x10
	if err := c.Set(ctx, key, v); err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	j, err = Open(ctx, c, Options{Prefix: "traces/", MaxSegments: 100, RecordSize: 8,
		Insert: func(_ int64, p []byte) { seen = append(seen, binary.LittleEndian.Uint64(p)) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != 0 || seen[1] != 2 || j.Stats().Corrupted != 1 {
		t.Fatalf("replayed %v, %d corrupted; want [0 2], 1", seen, j.Stats().Corrupted)
	}
}

// TestMetaFormat: the meta record carries its version and checksum; a
// flipped byte makes it unreadable rather than a wrong range.
func TestMetaFormat(t *testing.T) {
	m := Meta{First: 3, Next: 9, PartsFrom: 1, SumsFrom: 5}
	b := m.Encode()
	if got, ok := DecodeMeta(b); !ok || got != m {
		t.Fatalf("decoded %+v %t", got, ok)
	}
	if binary.LittleEndian.Uint32(b[32:]) != Version {
		t.Fatal("no version")
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 1
		if _, ok := DecodeMeta(c); ok {
			t.Fatalf("byte %d flipped: still decoded", i)
		}
	}
}
