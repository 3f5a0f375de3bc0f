package journal

import (
	"context"
	"testing"
)

// BenchmarkAppend: one segment per request as the span window writes it
// (1000 spans of 32 bytes) into a real file_storage, in the steady state
// where every append also deletes the oldest segment (the newer ones hold
// MaxEntries).
//
//	go test -run '^$' -bench Append -benchmem ./processor/dedupprocessor/internal/journal
//
// BenchmarkAppend/fsync is the same with file_storage's fsync on
// (--fsync): every append waits for the disk.
func BenchmarkAppend(b *testing.B) {
	b.Run("nosync", func(b *testing.B) { benchAppend(b, false) })
	b.Run("fsync", func(b *testing.B) { benchAppend(b, true) })
}

func benchAppend(b *testing.B, fsync bool) {
	const spans, record = 1000, 32
	client, done := fileStorageOpts(b, b.TempDir(), "traces", fsync)
	defer done()
	j, err := Open(context.Background(), client, Options{Prefix: "traces/", MaxSegments: 200_000, MaxEntries: 200 * spans, RecordSize: record})
	if err != nil {
		b.Fatal(err)
	}
	seg := make([]byte, spans*record)
	for i := range seg {
		seg[i] = byte(i * 7)
	}
	ctx := context.Background()
	for i := range 300 { // past MaxEntries: every append now drops one
		if err := j.Append(ctx, int64(i+1), seg); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(seg)))
	at := int64(1000)
	for b.Loop() {
		at++
		if err := j.Append(ctx, at, seg); err != nil {
			b.Fatal(err)
		}
	}
	if j.Len() > 201 {
		b.Fatalf("%d segments held, want at most 201", j.Len())
	}
}
