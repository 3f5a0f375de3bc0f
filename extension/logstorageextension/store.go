package logstorageextension

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// A client's data is a directory of segment files, NUMBER.log (16 hex
// digits), written in order. A segment starts with segMagic; then come
// records, one per write (Set, Delete or Batch): an 8-byte header, the
// payload's length and its CRC32C (Castagnoli), and the payload, the
// operations in order: opSet, the key and the value, or opDelete and the
// key, each length an unsigned varint. Replaying the records in order
// gives the data; a record is applied whole or, when its checksum does not
// match, not at all.
const (
	segMagic  = "DTLOG\x00\x01\n"
	recHeader = 8
	opSet     = 1
	opDelete  = 2
	// opRef sets a key to bytes already in a segment (moved.go): the
	// key, then the segment's number, the offset and the length, each an
	// unsigned varint.
	opRef = 3
	// maxRecord bounds one record's payload: a longer header is damage.
	maxRecord = 1 << 30
	// maxSegmentFile bounds a segment file read at open: a segment holds
	// records up to segment_bytes (at most 1 GiB) or one larger record.
	maxSegmentFile = maxSegmentBytes + maxRecord + recHeader + int64(len(segMagic))
	// inlineMax: values up to this size are also held in memory (the
	// queue's indexes, the journal's meta and headers), larger ones are
	// read from their segment.
	inlineMax = 64
	// opCost approximates a value's framing, for the live bytes.
	opCost = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errClosed is returned by a closed client.
var errClosed = errors.New("log_storage: the client is closed")

// loc is where a key's current value is.
type loc struct {
	seg uint64 // segment number
	off int64  // the value's offset in it
	n   int    // the value's length
	val []byte // the value, when n <= inlineMax
}

func (l loc) cost(key string) int64 { return int64(len(key) + l.n + opCost) }

type segment struct {
	num  uint64
	f    storeFile
	size int64 // bytes written
	live int64 // cost of the values in it that are current
	// reserved is how far its blocks are reserved (preallocate): past
	// size while it is written.
	reserved int64
	// shifted: opening the client cut damage from its middle, so its
	// bytes are no longer where references written before found them.
	shifted bool
}

// Discarded says what opening a client cut from its segments.
type Discarded struct {
	Segment string // the file
	Offset  int64  // where the cut began
	Bytes   int64  // bytes cut
	// Torn: the last record of the newest segment was cut short (a
	// crash during its write: never acknowledged); else the bytes failed
	// their checksum or framing (damage) and were kept aside in KeptAs.
	Torn bool
	// Truncated: the segment is shorter than the client had written
	// (markFile), or missing: acknowledged writes are lost.
	Truncated bool
	// Foreign: an entry named as a segment was not a regular file (a
	// symlink, a FIFO, a directory); it was moved aside to KeptAs unread,
	// and Bytes is 0: what it held, if anything, is not known.
	Foreign bool
	KeptAs  string
	Cause   string
}

// options configure a client.
type options struct {
	fsync        bool
	segmentBytes int64
	// discarded is called at open for every cut.
	discarded func(Discarded)
	// compacted counts the bytes of live values copied forward.
	compacted func(int64)
	// cacheBytes bounds the read cache (0: none).
	cacheBytes int64
	// compactFailed is called when compacting after a write fails (the
	// write stands), once until compacting succeeds again.
	compactFailed func(error)
	// reserveBytes is how far ahead of the writes the newest segment's
	// blocks are reserved (0: reserveAhead; negative: none).
	reserveBytes int64
	// fs is the filesystem (nil: the operating system's).
	fs fileSystem
	// reserveBase is the drain reserve held whatever the client holds
	// (0: reserveBase; negative: no drain reserve at all).
	reserveBase int64
	// fullChanged is called when new data starts to be refused for
	// lack of room (full) and when it is taken again, with the bytes
	// free (-1: not known).
	fullChanged func(full bool, free int64, cause error)
}

// reserveAhead is how far ahead of its writes the newest segment has its
// blocks reserved: a reservation per 4 MiB written, and no more than
// that idle on disk per client.
const reserveAhead = 4 << 20

// client is one storage client: an append-only log with an in-memory
// index. It is safe for concurrent use.
type client struct {
	dir string
	opt options
	fs  fileSystem

	mu     sync.Mutex
	idx    map[string]loc
	segs   []*segment // oldest first; the last one is written
	live   int64
	total  int64
	buf    []byte
	closed bool
	// compactErr is the last compaction's failure, reported once.
	compactErr error
	// broken is set when what the newest segment holds is unknown (a
	// failed write that could not be cut off, a failed fsync) or the
	// oldest segment could not be removed: nothing more is written.
	broken error
	// The read cache: values written by this process, larger than
	// inlineMax, held in memory (loc.val) up to cacheBytes, oldest
	// dropped first, so that the queue reads an entry it just wrote
	// without a pread.
	cacheQ                 []cacheRef
	cacheSize              int64
	cached                 int
	cacheHits, cacheMisses int64
	// cacheInserted counts the values cached; cacheOff is set once 1024
	// were and none was read back.
	cacheInserted int64
	cacheOff      bool
	// markF is the mark file, markTimer its write pending (markSoon).
	markF     storeFile
	markTimer *time.Timer
	// The drain reserve (reserve.go): its file and size; full while
	// new data is refused for lack of room; refused, the writes so
	// refused; gaveBack, the bytes given to draining writes.
	resF     storeFile
	resSize  int64
	full     bool
	refused  int64
	gaveBack int64
	// moves: values lately read by batches without writes, by their
	// checksum (moved.go).
	moves   map[uint32]moveCandidate
	movesAt time.Time
	// dangling: keys whose last record, at open, referred to bytes in
	// a segment removed since (reported: lost).
	dangling map[string]struct{}
}

func segName(num uint64) string { return fmt.Sprintf("%016x.log", num) }

// openClient opens (creating it when absent) the client in dir and
// replays its segments.
func openClient(dir string, opt options) (*client, error) {
	if opt.fs == nil {
		opt.fs = osFS{}
	}
	if err := opt.fs.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &client{dir: dir, opt: opt, fs: opt.fs, idx: map[string]loc{}}
	nums, foreign, err := listSegments(c.fs, dir)
	if err != nil {
		return nil, err
	}
	if err := c.setAsideForeign(foreign); err != nil {
		return nil, err
	}
	hw := readMark(c.fs, dir)
	sizes := map[uint64]int64{}
	for i, num := range nums {
		size, err := c.replay(num, i == len(nums)-1, hw)
		if err != nil {
			c.closeFiles()
			return nil, err
		}
		sizes[num] = size
	}
	c.checkMark(hw, sizes, nums)
	c.reportDangling()
	c.countLive()
	if err := c.openReserve(); err != nil {
		c.closeFiles()
		return nil, err
	}
	if len(c.segs) == 0 || c.segs[len(c.segs)-1].size >= c.opt.segmentBytes {
		if err := c.roll(); err != nil {
			c.closeFiles()
			return nil, err
		}
	}
	if err := c.dropDead(); err != nil {
		c.closeFiles()
		return nil, err
	}
	return c, nil
}

func (c *client) segment(num uint64) *segment {
	i, ok := slices.BinarySearchFunc(c.segs, num, func(s *segment, n uint64) int {
		switch {
		case s.num < n:
			return -1
		case s.num > n:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return c.segs[i]
}

func (c *client) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	if err := c.Batch(ctx, op); err != nil {
		return nil, err
	}
	return op.Value, nil
}

// Take reads key's value for a reader that takes it to deliver it and
// will record that it did (the queue taking an entry to send: see
// dedup_otlp_grpc's read marks). Unlike Get it does not remember the
// value as one about to be stored again under a new key (moved.go: a
// Get alone is a batch without writes, whose values are remembered, and
// each Set of the next minute is checked against them, a checksum of its
// value); and, as a write would, it fails once the client writes nothing
// more, so that nothing is taken that could not be recorded as delivered.
func (c *client) Take(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.broken != nil {
		return nil, c.broken
	}
	return c.read(key)
}

func (c *client) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *client) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

// Batch runs ops in order, a Get seeing the Sets and Deletes before it;
// its writes are one record, appended with one write.
func (c *client) Batch(_ context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosed
	}
	// Pass 1: encode the writes; Gets after a write of the same batch see
	// it (pending).
	b := append(c.buf[:0], make([]byte, recHeader)...)
	writes := 0
	var growth int64
	readOnly := !slices.ContainsFunc(ops, func(op *storage.Operation) bool { return op.Type != storage.Get })
	var pending map[string]*storage.Operation // for a large batch only
	for i, op := range ops {
		switch op.Type {
		case storage.Get:
			var p *storage.Operation
			if len(ops) <= 32 {
				p = lastWrite(ops[:i], op.Key)
			} else {
				p = pending[op.Key]
			}
			if p != nil {
				if p.Type == storage.Set {
					// Never nil, which is absent: Set(k, nil) stores
					// an empty value, as a Get after the batch reads.
					op.Value = append([]byte{}, p.Value...)
				} else {
					op.Value = nil
				}
				continue
			}
			v, err := c.read(op.Key)
			if err != nil {
				return err
			}
			op.Value = v
			if readOnly {
				c.rememberRead(op.Key, v)
			}
		case storage.Set, storage.Delete:
			writes++
			if len(ops) > 32 {
				if pending == nil {
					pending = map[string]*storage.Operation{}
				}
				pending[op.Key] = op
			}
			// growth: what the write adds to the values held
			// (keys written twice in a batch are counted twice:
			// the queue's batches write each key once).
			old, held := c.idx[op.Key]
			if held {
				growth -= old.cost(op.Key)
			}
			if m, ok := c.movedFrom(op.Value); op.Type == storage.Set && ok {
				// Held already: a reference takes no room.
				growth += int64(len(op.Key) + opCost)
				b = appendRef(b, op.Key, m)
			} else if op.Type == storage.Set {
				growth += int64(len(op.Key) + len(op.Value) + opCost)
				b = append(b, opSet)
				b = binary.AppendUvarint(b, uint64(len(op.Key)))
				b = append(b, op.Key...)
				b = binary.AppendUvarint(b, uint64(len(op.Value)))
				b = append(b, op.Value...)
			} else {
				b = append(b, opDelete)
				b = binary.AppendUvarint(b, uint64(len(op.Key)))
				b = append(b, op.Key...)
			}
		default:
			return fmt.Errorf("log_storage: unknown operation type %d", op.Type)
		}
	}
	if cap(b) <= 1<<20 {
		c.buf = b
	}
	if writes == 0 {
		return nil
	}
	if c.broken != nil {
		return c.broken
	}
	if len(b)-recHeader > maxRecord {
		return fmt.Errorf("log_storage: a write of %d bytes, more than %d", len(b)-recHeader, maxRecord)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)-recHeader))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[recHeader:], castagnoli))
	keys := writtenKeys(ops)
	for _, k := range keys {
		if l, ok := c.idx[k]; ok {
			c.addLive(l, k, -1)
		}
	}
	kind := writeDrain
	if growth > inlineMax {
		kind = writeNew
	}
	seg, err := c.write(b, kind)
	if err != nil {
		for _, k := range keys {
			if l, ok := c.idx[k]; ok {
				c.addLive(l, k, 1)
			}
		}
		return err
	}
	// Pass 2: the index, in order.
	if err := c.apply(seg.num, seg.size-int64(len(b))+recHeader, b[recHeader:], true); err != nil {
		return err // cannot happen: b was encoded above
	}
	for _, k := range keys {
		if l, ok := c.idx[k]; ok {
			c.addLive(l, k, 1)
		}
	}
	// The write stands, in the log and the index, whether compacting
	// after it works or not: an error here would tell the caller it
	// failed (the persistent queue then deletes the item it read). A
	// failed compaction is tried again after the next write.
	if err := c.compact(); err != nil {
		if c.compactErr == nil && c.opt.compactFailed != nil {
			c.opt.compactFailed(err)
		}
		c.compactErr = err
	} else {
		c.compactErr = nil
	}
	return nil
}

// lastWrite is the last Set or Delete of key in ops, nil when none. A
// scan: the batches written are a few operations (the queue's are two),
// and a map per batch cost more than it saved.
func lastWrite(ops []*storage.Operation, key string) *storage.Operation {
	for i := len(ops) - 1; i >= 0; i-- {
		if op := ops[i]; op.Type != storage.Get && op.Key == key {
			return op
		}
	}
	return nil
}

// writtenKeys are the distinct keys ops set or delete.
func writtenKeys(ops []*storage.Operation) []string {
	keys := make([]string, 0, len(ops))
	for _, op := range ops {
		if op.Type == storage.Get || (len(ops) > 1 && slices.Contains(keys, op.Key)) {
			continue
		}
		keys = append(keys, op.Key)
	}
	return keys
}

func (c *client) addLive(l loc, key string, sign int64) {
	if s := c.segment(l.seg); s != nil {
		s.live += sign * l.cost(key)
		c.live += sign * l.cost(key)
	}
}

// read returns a copy of key's value, nil when absent.
func (c *client) read(key string) ([]byte, error) {
	l, ok := c.idx[key]
	if !ok {
		return nil, nil
	}
	if l.n <= inlineMax {
		return slices.Clone(l.val), nil
	}
	if l.val != nil {
		c.cacheHits++
		return slices.Clone(l.val), nil
	}
	c.cacheMisses++
	s := c.segment(l.seg)
	if s == nil {
		return nil, fmt.Errorf("log_storage: %q is in segment %d, which is gone", key, l.seg)
	}
	v := make([]byte, l.n)
	if _, err := s.f.ReadAt(v, l.off); err != nil {
		// Nothing more is written: the queue on top drops an
		// entry it could not read (it writes that it took it and
		// then deletes it), and a reopen reads it again.
		c.broken = fmt.Errorf("log_storage: reading %q from %s failed, nothing more is written: %w", key, s.f.Name(), err)
		return nil, fmt.Errorf("log_storage: reading %q: %w", key, err)
	}
	return v, nil
}

const (
	// writeDrain moves what is held along: the queue's index updates,
	// deletes, a value overwritten by one no larger.
	writeDrain writeKind = iota
	// writeNew stores new data.
	writeNew
	// writeCompact copies live values forward.
	writeCompact
)

func (c *client) closeFiles() {
	for _, s := range c.segs {
		s.f.Close()
	}
	c.segs = nil
	if c.resF != nil {
		c.resF.Close()
		c.resF = nil
	}
}

func (c *client) Close(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.markTimer != nil {
		c.markTimer.Stop()
		c.markTimer = nil
	}
	var err error
	if c.opt.fsync && len(c.segs) > 0 {
		err = c.segs[len(c.segs)-1].f.Sync()
	}
	if c.broken == nil {
		err = errors.Join(err, c.writeMark())
		if len(c.segs) > 0 {
			c.release(c.segs[len(c.segs)-1])
		}
	}
	if c.markF != nil {
		err = errors.Join(err, c.markF.Close())
		c.markF = nil
	}
	c.closeFiles()
	return err
}
