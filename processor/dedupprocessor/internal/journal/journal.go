// Package journal makes a dedup window survive a restart, kill -9 included.
//
// Every request whose data the next component accepted appends one segment:
// its arrival time and the entries it stored in the window. Segments live in
// a collector storage extension (file_storage), numbered in order, with a
// small meta record naming the first and the next number. Since a window
// only ever holds what arrived within its duration, and at most its
// capacity of the newest entries, the journal needs no snapshot: segments
// older than the window are deleted, so are the oldest segments once the
// newer ones alone hold the window's capacity, and a restart replays the
// rest, oldest first. The bytes stored are therefore bounded by the
// window's capacity (plus one segment), not by traffic times the window.
//
// A segment is written after the next component accepted the request and
// before the sender is answered. A crash between the two can make a re-sent
// request pass as new (a duplicate), never make new data be dropped.
//
// A forget segment takes entries back (the component after dedup lost them
// after accepting them): replayed, it removes them from the window again,
// so that the sender's re-send passes after a restart too.
//
// A segment is stored as a small header record and its payload cut into
// parts of partBytes. file_storage is a bbolt B+tree that keeps values in
// its leaf pages and rewrites a whole leaf, two to four values, whenever
// one key in it changes: a 32 KB segment (a request of 1000 spans) in one
// value made every append rewrite the neighbouring segments too (about
// 250 KB allocated and written per append); in parts of 8 KiB it rewrites
// a few parts. Smaller parts cost more in tree operations than they save
// (BenchmarkAppend). Segments written whole by earlier versions are still
// read and deleted.
package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/doubletake/doubletake/internal/groupcommit"
)

// Stats counts what the journal did since it was opened.
type Stats struct {
	Appended  uint64 // segments written
	Trimmed   uint64 // segments deleted because the window passed
	Dropped   uint64 // segments deleted early: MaxSegments reached, or newer segments hold MaxEntries
	Replayed  uint64 // segments read back at open
	Corrupted uint64 // segments that could not be read back and were skipped
	Failed    uint64 // appends the storage refused
}

// Options configure a journal.
type Options struct {
	Prefix      string // key prefix in the storage client
	MaxSegments int    // segments kept at most
	// MaxEntries is the window's capacity: once the segments after the
	// oldest hold this many entries, the oldest is deleted. 0: no bound.
	MaxEntries int
	// RecordSize is the size of one entry in a payload, to count entries.
	RecordSize int
	// Insert is called at open with every insert segment held, oldest
	// first: its arrival time and payload (valid only during the call).
	Insert func(at int64, payload []byte)
	// Forget is called at open, in order with Insert, with the payload of
	// every forget segment held.
	Forget func(payload []byte)
}

// forgetBit marks a forget segment in the stored arrival time (arrival
// times are positive Unix nanoseconds).
const forgetBit = uint64(1) << 63

const (
	// partBytes is the most payload bytes one stored part holds.
	partBytes = 8192
	// maxParts bounds the parts of one segment (128 MiB of payload, far
	// more than the entries of a 16 MiB request): a larger append is
	// refused, and a stored header claiming more is corrupt.
	maxParts = 1 << 14
	// headerLen is a segment header of format 1: the stamp and the
	// number of parts; sumHeaderLen adds the CRC32C (Castagnoli) of the
	// stamp, the number of parts and the payload (format 2).
	headerLen    = 12
	sumHeaderLen = 16
	// metaLen is the meta record of format 2: first, next, partsFrom,
	// sumsFrom, the format version and the CRC32C of what precedes it.
	// Format 1 wrote 16 or 24 bytes (first, next[, partsFrom]).
	metaLen = 40
	// Version is the format this code writes.
	Version = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentSum is the checksum a format 2 header carries.
func segmentSum(stamp uint64, parts int, payload ...[]byte) uint32 {
	var h [12]byte
	binary.LittleEndian.PutUint64(h[:], stamp)
	binary.LittleEndian.PutUint32(h[8:], uint32(parts))
	c := crc32.Update(0, castagnoli, h[:])
	for _, p := range payload {
		c = crc32.Update(c, castagnoli, p)
	}
	return c
}

// Meta is a journal's meta record, decoded.
type Meta struct {
	First, Next uint64
	// PartsFrom is the first segment stored in parts, SumsFrom the first
	// whose header carries a checksum.
	PartsFrom, SumsFrom uint64
}

// DecodeMeta reads a meta record of either format; ok is false for one
// that is neither (or whose checksum does not match).
func DecodeMeta(b []byte) (m Meta, ok bool) {
	switch len(b) {
	case 16, 24:
		m.First = binary.LittleEndian.Uint64(b[0:])
		m.Next = binary.LittleEndian.Uint64(b[8:])
		m.PartsFrom = m.Next // 16 bytes: every segment held is whole
		if len(b) == 24 {
			m.PartsFrom = binary.LittleEndian.Uint64(b[16:])
		}
		m.SumsFrom = m.Next // format 1: no segment held has a checksum
	case metaLen:
		if binary.LittleEndian.Uint32(b[32:]) != Version || crc32.Checksum(b[:36], castagnoli) != binary.LittleEndian.Uint32(b[36:]) {
			return Meta{}, false
		}
		m.First = binary.LittleEndian.Uint64(b[0:])
		m.Next = binary.LittleEndian.Uint64(b[8:])
		m.PartsFrom = binary.LittleEndian.Uint64(b[16:])
		m.SumsFrom = binary.LittleEndian.Uint64(b[24:])
	default:
		return Meta{}, false
	}
	if m.Next < m.First {
		return Meta{}, false
	}
	m.PartsFrom, m.SumsFrom = min(m.PartsFrom, m.Next), min(m.SumsFrom, m.Next)
	return m, true
}

// Encode writes m in format 2.
func (m Meta) Encode() []byte {
	b := make([]byte, metaLen)
	binary.LittleEndian.PutUint64(b[0:], m.First)
	binary.LittleEndian.PutUint64(b[8:], m.Next)
	binary.LittleEndian.PutUint64(b[16:], m.PartsFrom)
	binary.LittleEndian.PutUint64(b[24:], m.SumsFrom)
	binary.LittleEndian.PutUint32(b[32:], Version)
	binary.LittleEndian.PutUint32(b[36:], crc32.Checksum(b[:36], castagnoli))
	return b
}

// Journal is an append-only log of window segments in a storage client.
// It is safe for concurrent use.
type Journal struct {
	client storage.Client
	opt    Options

	mu    sync.Mutex
	first uint64 // oldest segment held
	next  uint64 // number the next segment gets
	// partsFrom is the first segment stored in parts; the ones before it
	// were written whole by an earlier version (one key each).
	partsFrom uint64
	// sumsFrom is the first segment whose header carries a checksum.
	sumsFrom uint64
	times    []int64 // arrival time of segments first..next-1
	counts   []int   // entries inserted by segments first..next-1 (0 for forget segments)
	parts    []int   // stored parts of segments first..next-1 (whole ones: 0)
	entries  int     // sum of counts
	stats    Stats

	// group writes concurrent appends in one transaction.
	group *groupcommit.Group[*segment]
}

// metaKey holds first, next and partsFrom, 24 bytes (earlier versions: 16,
// without partsFrom).
func (j *Journal) metaKey() string { return j.opt.Prefix + "meta" }

// segKey is where an earlier version stored segment n whole.
func (j *Journal) segKey(n uint64) string { return fmt.Sprintf("%sseg/%020d", j.opt.Prefix, n) }

// headKey is segment n's header; partKey its part i. They sort before
// metaKey and in segment order.
func (j *Journal) headKey(n uint64) string { return string(j.appendHeadKey(nil, n)) }

func (j *Journal) appendHeadKey(b []byte, n uint64) []byte {
	b = append(b, j.opt.Prefix...)
	b = append(b, "c/"...)
	return appendPadded(b, n, 20)
}

func (j *Journal) partKey(n uint64, i int) string {
	var buf [64]byte
	b := append(j.appendHeadKey(buf[:0], n), '/')
	return string(appendPadded(b, uint64(i), 6))
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(b []byte, v uint64, width int) []byte {
	var d [20]byte
	i := len(d)
	for v > 0 || i == len(d) {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
	}
	for k := len(d) - i; k < width; k++ {
		b = append(b, '0')
	}
	return append(b, d[i:]...)
}

// deleteOps appends the deletion of held segment idx (its number n).
func (j *Journal) deleteOps(ops []*storage.Operation, idx int, n uint64) []*storage.Operation {
	return j.deleteOpsOf(ops, n, j.parts[idx])
}

// deleteOpsOf appends the deletion of segment n, stored in parts parts.
func (j *Journal) deleteOpsOf(ops []*storage.Operation, n uint64, parts int) []*storage.Operation {
	if n < j.partsFrom {
		return append(ops, storage.DeleteOperation(j.segKey(n)))
	}
	ops = append(ops, storage.DeleteOperation(j.headKey(n)))
	for i := range parts {
		ops = append(ops, storage.DeleteOperation(j.partKey(n, i)))
	}
	return ops
}

// Open reads the journal under opt.Prefix and replays every segment still
// held, oldest first.
func Open(ctx context.Context, client storage.Client, opt Options) (*Journal, error) {
	if opt.MaxSegments < 1 {
		return nil, errors.New("journal: MaxSegments must be at least 1")
	}
	if opt.RecordSize < 1 {
		opt.RecordSize = 1
	}
	if opt.MaxEntries < 0 {
		return nil, errors.New("journal: MaxEntries must not be negative")
	}
	j := &Journal{client: client, opt: opt}
	j.group = newGroup(j)
	meta, err := client.Get(ctx, j.metaKey())
	if err != nil {
		return nil, fmt.Errorf("reading journal meta: %w", err)
	}
	if m, ok := DecodeMeta(meta); ok {
		j.first, j.next, j.partsFrom, j.sumsFrom = m.First, m.Next, m.PartsFrom, m.SumsFrom
	} else if len(meta) > 0 {
		j.stats.Corrupted++ // start afresh; old segments are unreachable
	}
	if j.next < j.first || j.next-j.first > uint64(opt.MaxSegments) {
		// A meta record from another configuration: keep the newest segments.
		if j.next > uint64(opt.MaxSegments) {
			j.first = j.next - uint64(opt.MaxSegments)
		}
	}
	j.partsFrom = min(j.partsFrom, j.next)
	j.sumsFrom = min(j.sumsFrom, j.next)
	var buf []byte
	for n := j.first; n < j.next; n++ {
		v, parts, err := j.read(ctx, n, buf[:0])
		if err != nil {
			return nil, err
		}
		buf = v[:0]
		j.parts = append(j.parts, parts)
		if len(v) < 8 {
			j.stats.Corrupted++
			j.times = append(j.times, 0)
			j.counts = append(j.counts, 0)
			continue
		}
		stamp := binary.LittleEndian.Uint64(v)
		at := int64(stamp &^ forgetBit)
		j.times = append(j.times, at)
		if stamp&forgetBit != 0 {
			j.counts = append(j.counts, 0)
			if opt.Forget != nil {
				opt.Forget(v[8:])
			}
		} else {
			c := (len(v) - 8) / opt.RecordSize
			j.counts = append(j.counts, c)
			j.entries += c
			if opt.Insert != nil {
				opt.Insert(at, v[8:])
			}
		}
		j.stats.Replayed++
	}
	return j, nil
}

// read returns segment n as the stamp followed by its payload, appended to
// buf (nil or short of 8 bytes when it is not readable), and the number of
// parts stored for it.
func (j *Journal) read(ctx context.Context, n uint64, buf []byte) ([]byte, int, error) {
	if n < j.partsFrom {
		v, err := j.client.Get(ctx, j.segKey(n))
		if err != nil {
			return nil, 0, fmt.Errorf("reading journal segment %d: %w", n, err)
		}
		return v, 0, nil
	}
	h, err := j.client.Get(ctx, j.headKey(n))
	if err != nil {
		return nil, 0, fmt.Errorf("reading journal segment %d: %w", n, err)
	}
	want := headerLen
	if n >= j.sumsFrom {
		want = sumHeaderLen
	}
	if len(h) != want {
		return nil, 0, nil
	}
	parts := int(binary.LittleEndian.Uint32(h[8:]))
	if parts > maxParts {
		return nil, 0, nil
	}
	ops := make([]*storage.Operation, parts)
	for i := range ops {
		ops[i] = storage.GetOperation(j.partKey(n, i))
	}
	if parts > 0 {
		if err := j.client.Batch(ctx, ops...); err != nil {
			return nil, parts, fmt.Errorf("reading journal segment %d: %w", n, err)
		}
	}
	buf = append(buf, h[:8]...)
	for _, op := range ops {
		if op.Value == nil {
			return nil, parts, nil
		}
		buf = append(buf, op.Value...)
	}
	if want == sumHeaderLen && segmentSum(binary.LittleEndian.Uint64(h), parts, buf[8:]) != binary.LittleEndian.Uint32(h[12:]) {
		return nil, parts, nil // a flipped byte: skipped and counted, not replayed as wrong entries
	}
	return buf, parts, nil
}

// Append writes one insert segment. The payload is not kept after Append
// returns.
func (j *Journal) Append(ctx context.Context, at int64, payload []byte) error {
	return j.append(ctx, uint64(at), at, payload, len(payload)/j.opt.RecordSize)
}

// AppendForget writes one forget segment: the entries in payload are taken
// back from the window when the journal is replayed.
func (j *Journal) AppendForget(ctx context.Context, at int64, payload []byte) error {
	return j.append(ctx, uint64(at)|forgetBit, at, payload, 0)
}

func (j *Journal) append(ctx context.Context, stamp uint64, at int64, payload []byte, count int) error {
	parts := (len(payload) + partBytes - 1) / partBytes
	if parts > maxParts {
		j.mu.Lock()
		j.stats.Failed++
		j.mu.Unlock()
		return fmt.Errorf("appending journal segment: %d bytes of entries, more than the %d a segment holds", len(payload), maxParts*partBytes)
	}
	// The payload stays the caller's until this returns: a waiting append
	// is written by the leader of its group before it is answered.
	return j.group.Do(ctx, &segment{stamp: stamp, at: at, payload: payload, count: count, parts: parts})
}

// segment is one append waiting to be written.
type segment struct {
	stamp   uint64
	at      int64
	payload []byte
	count   int
	parts   int
}

// Appends that arrive while another is being written are written together,
// in one storage transaction (up to maxGroupSegments segments, or
// maxGroupParts parts), each still its own segment.
const (
	maxGroupSegments = 256
	maxGroupParts    = 1024 // 8 MiB of payload
)

func newGroup(j *Journal) *groupcommit.Group[*segment] {
	return groupcommit.New(j.write, func(s *segment) int { return s.parts + 1 }, maxGroupParts, maxGroupSegments)
}

// write stores first and rest as consecutive segments, in one transaction.
func (j *Journal) write(ctx context.Context, first *segment, rest []*segment) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	segs := append([]*segment{first}, rest...)
	n0 := len(j.times)
	// Index i < n0 is a segment held, n0+k the k-th written here.
	countAt := func(i int) int {
		if i < n0 {
			return j.counts[i]
		}
		return segs[i-n0].count
	}
	partsAt := func(i int) int {
		if i < n0 {
			return j.parts[i]
		}
		return segs[i-n0].parts
	}
	size := 4
	for _, s := range segs {
		size += 2*s.parts + 2
	}
	ops := make([]*storage.Operation, 0, size)
	drop, entries := 0, j.entries
	for k, s := range segs {
		num := j.next + uint64(k)
		head := make([]byte, sumHeaderLen)
		binary.LittleEndian.PutUint64(head, s.stamp)
		binary.LittleEndian.PutUint32(head[8:], uint32(s.parts))
		binary.LittleEndian.PutUint32(head[12:], segmentSum(s.stamp, s.parts, s.payload))
		// The parts are slices of the payload: the storage writes them
		// before Batch returns and keeps no reference.
		ops = append(ops, storage.SetOperation(j.headKey(num), head))
		for i := range s.parts {
			ops = append(ops, storage.SetOperation(j.partKey(num, i), s.payload[i*partBytes:min(len(s.payload), (i+1)*partBytes)]))
		}
		// Drop the oldest segments while the MaxSegments bound is
		// reached, or while the newer segments (this one included) alone
		// hold MaxEntries: the window has evicted the oldest segment's
		// entries by then. One written here may go too.
		entries += s.count
		for drop < n0+k {
			full := n0+k-drop >= j.opt.MaxSegments
			covered := j.opt.MaxEntries > 0 && entries-countAt(drop) >= j.opt.MaxEntries
			if !full && !covered {
				break
			}
			ops = j.deleteOpsOf(ops, j.first+uint64(drop), partsAt(drop))
			entries -= countAt(drop)
			drop++
		}
	}
	first0 := j.first + uint64(drop)
	ops = append(ops, storage.SetOperation(j.metaKey(), j.meta(first0, j.next+uint64(len(segs)))))
	if err := j.client.Batch(ctx, ops...); err != nil {
		j.stats.Failed += uint64(len(segs))
		if len(segs) > 1 {
			return fmt.Errorf("appending %d journal segments: %w", len(segs), err)
		}
		return fmt.Errorf("appending journal segment: %w", err)
	}
	for _, s := range segs {
		j.times = append(j.times, s.at)
		j.counts = append(j.counts, s.count)
		j.parts = append(j.parts, s.parts)
	}
	j.times, j.counts, j.parts = j.times[drop:], j.counts[drop:], j.parts[drop:]
	j.first = first0
	j.entries = entries
	j.stats.Dropped += uint64(drop)
	j.next += uint64(len(segs))
	j.stats.Appended += uint64(len(segs))
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
		ops = j.deleteOps(ops, i, j.first+uint64(i))
	}
	ops = append(ops, storage.SetOperation(j.metaKey(), j.meta(j.first+uint64(n), j.next)))
	if err := j.client.Batch(ctx, ops...); err != nil {
		return fmt.Errorf("trimming the journal: %w", err)
	}
	for _, c := range j.counts[:n] {
		j.entries -= c
	}
	j.first += uint64(n)
	j.times = j.times[n:]
	j.counts = j.counts[n:]
	j.parts = j.parts[n:]
	j.stats.Trimmed += uint64(n)
	return nil
}

func (j *Journal) meta(first, next uint64) []byte {
	return Meta{First: first, Next: next, PartsFrom: j.partsFrom, SumsFrom: j.sumsFrom}.Encode()
}

// Len is the number of segments held.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.times)
}

// Entries is the number of entries the held insert segments stored.
func (j *Journal) Entries() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.entries
}

// Stats returns the journal's counters.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stats
}
