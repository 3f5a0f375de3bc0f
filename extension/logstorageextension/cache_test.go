package logstorageextension

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// TestReadCache: a value written by this process is read from memory
// until the values written after it push it out of read_cache_bytes; then
// it is read from its segment, unchanged. A value deleted or overwritten
// leaves the cache with it, and the cache's references stay bounded while
// the queue's pattern (write, read, delete) runs.
func TestReadCache(t *testing.T) {
	ctx := context.Background()
	c, err := openClient(t.TempDir(), options{segmentBytes: 1 << 20, cacheBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000) }
	for i := range 3 {
		if err := c.Set(ctx, fmt.Sprint(i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		v, err := c.Get(ctx, fmt.Sprint(i))
		if err != nil || !bytes.Equal(v, val(i)) {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	if c.cacheHits != 3 || c.cacheMisses != 0 {
		t.Fatalf("hits %d misses %d, want 3 hits", c.cacheHits, c.cacheMisses)
	}
	for i := 3; i < 8; i++ { // 8000 bytes written: the first ones leave the cache
		if err := c.Set(ctx, fmt.Sprint(i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.cacheSize > 4096 {
		t.Fatalf("the cache holds %d bytes, more than 4096", c.cacheSize)
	}
	v, err := c.Get(ctx, "0")
	if err != nil || !bytes.Equal(v, val(0)) || c.cacheMisses != 1 {
		t.Fatalf("value 0 after eviction: %v, misses %d", err, c.cacheMisses)
	}
	// The returned value is a copy: changing it changes nothing stored.
	v, _ = c.Get(ctx, "7")
	v[0] = 99
	if v, _ = c.Get(ctx, "7"); v[0] != 7 {
		t.Fatal("a Get returned the cached bytes themselves")
	}
	for i := range 20000 {
		k := fmt.Sprint("q", i)
		if err := c.Set(ctx, k, val(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.cacheQ) > 1024+2*c.cached || c.cacheSize > 4096 {
		t.Fatalf("after the queue's pattern: %d references for %d values, %d bytes", len(c.cacheQ), c.cached, c.cacheSize)
	}
}

// TestReadCacheOffWithoutReads: a client that writes 1024 cached values
// and reads none back (dedup's journal) stops caching and holds nothing.
func TestReadCacheOffWithoutReads(t *testing.T) {
	ctx := context.Background()
	c, err := openClient(t.TempDir(), options{segmentBytes: 1 << 20, cacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for i := range 1023 {
		if err := c.Set(ctx, fmt.Sprint(i), bytes.Repeat([]byte{1}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if c.cacheOff || c.cached == 0 {
		t.Fatalf("off %v with %d cached, before 1024 values", c.cacheOff, c.cached)
	}
	if err := c.Set(ctx, "last", bytes.Repeat([]byte{1}, 100)); err != nil {
		t.Fatal(err)
	}
	if !c.cacheOff || c.cached != 0 || c.cacheSize != 0 || len(c.cacheQ) != 0 {
		t.Fatalf("off %v, %d cached, %d bytes, %d references: want none", c.cacheOff, c.cached, c.cacheSize, len(c.cacheQ))
	}
	for k, l := range c.idx {
		if l.n > inlineMax && l.val != nil {
			t.Fatalf("%s still held", k)
		}
	}
	if v, err := c.Get(ctx, "7"); err != nil || len(v) != 100 {
		t.Fatalf("a value after the cache went off: %v", err)
	}
}
