// Package journal makes a dedup window survive a restart, kill -9 included.
//
// Every request whose data the next component accepted appends one segment:
// its arrival time and the entries it stored in the window. Segments live in
// a collector storage extension (file_storage), numbered in order, with a
// small meta record naming the first and the next number. Since a window
// only ever holds what arrived within its duration, the journal needs no
// snapshot: segments older than the window are deleted, and a restart
// replays the rest, oldest first.
//
// A segment is written after the next component accepted the request and
// before the sender is answered. A crash between the two can make a re-sent
// request pass as new (a duplicate), never make new data be dropped.
package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Stats counts what the journal did since it was opened.
type Stats struct {
	Appended  uint64 // segments written
	Trimmed   uint64 // segments deleted because the window passed
	Dropped   uint64 // segments deleted early because MaxSegments was reached
	Replayed  uint64 // segments read back at open
	Corrupted uint64 // segments that could not be read back and were skipped
	Failed    uint64 // appends the storage refused
}

// Journal is an append-only log of window segments in a storage client.
// It is safe for concurrent use.
type Journal struct {
	client      storage.Client
	prefix      string
	maxSegments int

	mu    sync.Mutex
	first uint64  // oldest segment held
	next  uint64  // number the next segment gets
	times []int64 // arrival time of segments first..next-1
	stats Stats
}

// metaKey holds first and next, 16 bytes.
func (j *Journal) metaKey() string { return j.prefix + "meta" }

func (j *Journal) segKey(n uint64) string { return fmt.Sprintf("%sseg/%020d", j.prefix, n) }

// Open reads the journal under prefix and calls replay with every segment
// still held, oldest first: its arrival time and its payload (valid only
// during the call). maxSegments bounds how many segments are kept.
func Open(ctx context.Context, client storage.Client, prefix string, maxSegments int, replay func(at int64, payload []byte)) (*Journal, error) {
	if maxSegments < 1 {
		return nil, errors.New("journal: maxSegments must be at least 1")
	}
	j := &Journal{client: client, prefix: prefix, maxSegments: maxSegments}
	meta, err := client.Get(ctx, j.metaKey())
	if err != nil {
		return nil, fmt.Errorf("reading journal meta: %w", err)
	}
	if len(meta) == 16 {
		j.first = binary.LittleEndian.Uint64(meta[0:])
		j.next = binary.LittleEndian.Uint64(meta[8:])
	} else if meta != nil {
		j.stats.Corrupted++ // start afresh; old segments are unreachable
	}
	if j.next < j.first || j.next-j.first > uint64(maxSegments) {
		// A meta record from another configuration: keep the newest segments.
		if j.next > uint64(maxSegments) {
			j.first = j.next - uint64(maxSegments)
		}
	}
	for n := j.first; n < j.next; n++ {
		v, err := client.Get(ctx, j.segKey(n))
		if err != nil {
			return nil, fmt.Errorf("reading journal segment %d: %w", n, err)
		}
		if len(v) < 8 {
			j.stats.Corrupted++
			j.times = append(j.times, 0)
			continue
		}
		at := int64(binary.LittleEndian.Uint64(v))
		j.times = append(j.times, at)
		replay(at, v[8:])
		j.stats.Replayed++
	}
	return j, nil
}

// Append writes one segment. The payload is copied.
func (j *Journal) Append(ctx context.Context, at int64, payload []byte) error {
	buf := make([]byte, 8+len(payload))
	binary.LittleEndian.PutUint64(buf, uint64(at))
	copy(buf[8:], payload)
	j.mu.Lock()
	defer j.mu.Unlock()
	ops := []*storage.Operation{storage.SetOperation(j.segKey(j.next), buf)}
	first := j.first
	for uint64(len(j.times)) >= uint64(j.maxSegments) {
		ops = append(ops, storage.DeleteOperation(j.segKey(first)))
		first++
		j.times = j.times[1:]
		j.stats.Dropped++
	}
	ops = append(ops, storage.SetOperation(j.metaKey(), j.meta(first, j.next+1)))
	if err := j.client.Batch(ctx, ops...); err != nil {
		j.stats.Failed++
		return fmt.Errorf("appending journal segment: %w", err)
	}
	j.first = first
	j.next++
	j.times = append(j.times, at)
	j.stats.Appended++
	return nil
}

// Trim deletes the segments that arrived before cutoff.
func (j *Journal) Trim(ctx context.Context, cutoff int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for n < len(j.times) && j.times[n] < cutoff {
		n++
	}
	if n == 0 {
		return nil
	}
	ops := make([]*storage.Operation, 0, n+1)
	for i := range n {
		ops = append(ops, storage.DeleteOperation(j.segKey(j.first+uint64(i))))
	}
	ops = append(ops, storage.SetOperation(j.metaKey(), j.meta(j.first+uint64(n), j.next)))
	if err := j.client.Batch(ctx, ops...); err != nil {
		return fmt.Errorf("trimming the journal: %w", err)
	}
	j.first += uint64(n)
	j.times = j.times[n:]
	j.stats.Trimmed += uint64(n)
	return nil
}

func (j *Journal) meta(first, next uint64) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b[0:], first)
	binary.LittleEndian.PutUint64(b[8:], next)
	return b
}

// Len is the number of segments held.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.times)
}

// Stats returns the journal's counters.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stats
}
