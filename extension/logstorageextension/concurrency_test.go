package logstorageextension

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// concValue is a value written by worker w as its write seq: a header
// (worker, seq, length) and bytes that follow from it, so that a value
// read whole can be told from a mix of two.
func concValue(w, seq uint32, n int) []byte {
	v := make([]byte, 12+n)
	binary.LittleEndian.PutUint32(v, w)
	binary.LittleEndian.PutUint32(v[4:], seq)
	binary.LittleEndian.PutUint32(v[8:], uint32(n))
	for i := range n {
		v[12+i] = byte(w*13 + seq*7 + uint32(i))
	}
	return v
}

func wellFormed(v []byte) bool {
	if len(v) < 12 {
		return false
	}
	w, seq, n := binary.LittleEndian.Uint32(v), binary.LittleEndian.Uint32(v[4:]), binary.LittleEndian.Uint32(v[8:])
	return int(n) == len(v)-12 && bytes.Equal(v, concValue(w, seq, int(n)))
}

// Many goroutines set, get and delete keys of their own and keys they
// share, values inlined and read from the segments, while segments roll
// and are compacted: no data race (run with -race), every value read is
// one that was written, whole, and at the end (and after a reopen) each
// key holds what was last written to it.
func TestConcurrentUse(t *testing.T) {
	const workers, shared, own = 8, 4, 4
	ops := 400
	if testing.Short() {
		ops = 100
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := mustOpen(t, dir, options{segmentBytes: 4096})
	// A shared key's writes are serialized by its lock here, so that the
	// last one is known; its reads are not.
	var sharedMu [shared]sync.Mutex
	var sharedLast [shared][]byte
	ownLast := make([]map[string][]byte, workers)
	var wg sync.WaitGroup
	for w := range workers {
		ownLast[w] = map[string][]byte{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			last := ownLast[w]
			size := func() int {
				if rng.IntN(2) == 0 {
					return rng.IntN(inlineMax - 12 + 1)
				}
				return rng.IntN(3000)
			}
			for seq := range uint32(ops) {
				var err error
				switch r := rng.IntN(10); {
				case r < 3: // own: set
					k := fmt.Sprintf("w%d-%d", w, rng.IntN(own))
					v := concValue(uint32(w), seq, size())
					if err = c.Set(ctx, k, v); err == nil {
						last[k] = v
					}
				case r == 3: // own: delete
					k := fmt.Sprintf("w%d-%d", w, rng.IntN(own))
					if err = c.Delete(ctx, k); err == nil {
						delete(last, k)
					}
				case r == 4: // own: a batch that sets and reads back
					k := fmt.Sprintf("w%d-%d", w, rng.IntN(own))
					v := concValue(uint32(w), seq, size())
					get := storage.GetOperation(k)
					if err = c.Batch(ctx, storage.SetOperation(k, v), get); err == nil {
						last[k] = v
						if !bytes.Equal(get.Value, v) {
							t.Errorf("worker %d: %q read back in its batch differs", w, k)
							return
						}
					}
				case r == 5: // own: get
					k := fmt.Sprintf("w%d-%d", w, rng.IntN(own))
					var v []byte
					if v, err = c.Get(ctx, k); err == nil && !bytes.Equal(v, last[k]) {
						t.Errorf("worker %d: %q holds %d bytes, not the %d last written", w, k, len(v), len(last[k]))
						return
					}
				case r < 8: // shared: set or delete, under its lock
					i := rng.IntN(shared)
					k := fmt.Sprintf("shared%d", i)
					sharedMu[i].Lock()
					if r == 6 {
						v := concValue(uint32(w), seq, size())
						if err = c.Set(ctx, k, v); err == nil {
							sharedLast[i] = v
						}
					} else if err = c.Delete(ctx, k); err == nil {
						sharedLast[i] = nil
					}
					sharedMu[i].Unlock()
				default: // shared: get, unlocked
					k := fmt.Sprintf("shared%d", rng.IntN(shared))
					var v []byte
					if v, err = c.Get(ctx, k); err == nil && v != nil && !wellFormed(v) {
						t.Errorf("worker %d: %q holds %d bytes no one wrote", w, k, len(v))
						return
					}
				}
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	want := map[string][]byte{}
	for w := range workers {
		for k, v := range ownLast[w] {
			want[k] = v
		}
	}
	for i, v := range sharedLast {
		if v != nil {
			want[fmt.Sprintf("shared%d", i)] = v
		}
	}
	checkState(t, c, want, "shared0", "shared1", "shared2", "shared3")
	closeClient(t, c)
	c = mustOpen(t, dir, options{segmentBytes: 4096})
	defer closeClient(t, c)
	checkState(t, c, want, "shared0", "shared1", "shared2", "shared3")
}

// Close while goroutines write: each write either succeeds or returns
// errClosed, and what each goroutine last had acknowledged is what a
// reopen finds.
func TestCloseWhileWriting(t *testing.T) {
	const workers = 4
	ctx := context.Background()
	dir := t.TempDir()
	c := mustOpen(t, dir, options{segmentBytes: 4096})
	acked := make([][]byte, workers)
	var started, wg sync.WaitGroup
	started.Add(workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprintf("g%d", w)
			for seq := uint32(0); ; seq++ {
				v := concValue(uint32(w), seq, int(seq%700))
				err := c.Set(ctx, k, v)
				if errors.Is(err, errClosed) {
					return
				}
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				acked[w] = v
				if seq == 20 {
					started.Done()
				}
			}
		}()
	}
	started.Wait()
	closeClient(t, c)
	wg.Wait()
	want := map[string][]byte{}
	for w, v := range acked {
		want[fmt.Sprintf("g%d", w)] = v
	}
	c = mustOpen(t, dir, options{segmentBytes: 4096})
	defer closeClient(t, c)
	checkState(t, c, want)
}
