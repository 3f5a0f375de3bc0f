package logstorageextension

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	// maxRecord bounds one record's payload: a longer header is damage.
	maxRecord = 1 << 30
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
	f    *os.File
	size int64 // bytes written
	live int64 // cost of the values in it that are current
}

// Discarded says what opening a client cut from its segments.
type Discarded struct {
	Segment string // the file
	Offset  int64  // where the cut began
	Bytes   int64  // bytes cut
	// Torn: the last record of the newest segment was cut short (a
	// crash during its write: never acknowledged); else the bytes failed
	// their checksum or framing (damage) and were kept aside in KeptAs.
	Torn   bool
	KeptAs string
	Cause  string
}

// options configure a client.
type options struct {
	fsync        bool
	segmentBytes int64
	// discarded is called at open for every cut.
	discarded func(Discarded)
	// compacted counts the bytes of live values copied forward.
	compacted func(int64)
	// compactFailed is called when compacting after a write fails (the
	// write stands), once until compacting succeeds again.
	compactFailed func(error)
}

// client is one storage client: an append-only log with an in-memory
// index. It is safe for concurrent use.
type client struct {
	dir string
	opt options

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
}

func segName(num uint64) string { return fmt.Sprintf("%016x.log", num) }

// openClient opens (creating it when absent) the client in dir and
// replays its segments.
func openClient(dir string, opt options) (*client, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &client{dir: dir, opt: opt, idx: map[string]loc{}}
	nums, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	for i, num := range nums {
		if err := c.replay(num, i == len(nums)-1); err != nil {
			c.closeFiles()
			return nil, err
		}
	}
	c.countLive()
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

func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var nums []uint64
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || len(name) != 20 || !strings.HasSuffix(name, ".log") {
			continue
		}
		n, err := strconv.ParseUint(name[:16], 16, 64)
		if err != nil {
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, nil
}

// replay reads segment num into the index. A record that fails its
// checksum or framing ends what is read of the segment: the bytes from it
// on are cut (kept aside unless they are the newest segment's torn tail).
func (c *client) replay(num uint64, newest bool) error {
	path := filepath.Join(c.dir, segName(num))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	size := st.Size()
	seg := &segment{num: num, f: f}
	// A buffer no larger than the segment: a client of many small
	// segments is replayed without a megabyte allocated for each.
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), int(min(size, 1<<20)))
	var magic [len(segMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || string(magic[:]) != segMagic {
		if newest && size < int64(len(segMagic)) && strings.HasPrefix(segMagic, string(magic[:size])) {
			// Created, its magic not fully written: nothing in it.
			return c.cut(seg, 0, size, true, "the segment's header was cut short", true)
		}
		return c.cut(seg, 0, size, false, "not a log_storage segment (bad magic)", true)
	}
	off := int64(len(segMagic))
	var hdr [recHeader]byte
	var payload []byte
	for off < size {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return c.cut(seg, off, size-off, newest, "a record header cut short", false)
		}
		n := int64(binary.LittleEndian.Uint32(hdr[:4]))
		sum := binary.LittleEndian.Uint32(hdr[4:])
		switch {
		case n == 0:
			// No write appends an empty record, and zeros read as
			// one (their checksum is 0): zeros where records should
			// be, as a file system leaves a file it extended but whose
			// data it never wrote, would otherwise pass unnoticed.
			return c.cut(seg, off, size-off, false, "a record of no bytes (zeros where records should be)", false)
		case n > maxRecord:
			return c.cut(seg, off, size-off, false, fmt.Sprintf("a record of %d bytes, more than %d", n, maxRecord), false)
		case off+recHeader+n > size:
			// The newest segment's last write cut short, unless the
			// bytes after the header begin with a whole record: then
			// its length field is damaged, and what follows it was
			// acknowledged.
			torn := newest && !wholeRecord(f, off+recHeader, size, sum)
			return c.cut(seg, off, size-off, torn, fmt.Sprintf("a record of %d bytes where %d remain", n, size-off-recHeader), false)
		}
		payload = slices.Grow(payload[:0], int(n))[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return c.cut(seg, off, size-off, false, "reading a record: "+err.Error(), false)
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			return c.cut(seg, off, size-off, false, "a record's checksum does not match", false)
		}
		if err := c.apply(num, off+recHeader, payload); err != nil {
			return c.cut(seg, off, size-off, false, err.Error(), false)
		}
		off += recHeader + n
	}
	seg.size = off
	c.addSegment(seg)
	return nil
}

// wholeRecord reports whether the bytes of f from off to end begin with
// whole operations whose checksum is sum: a complete record behind a
// damaged length field. A write cut short holds part of its record, whose
// checksum matches at an operation's end only by chance (2^-32 each).
// One pass over the bytes, reading them as operations.
func wholeRecord(f *os.File, off, end int64, sum uint32) bool {
	r := &summing{r: bufio.NewReader(io.NewSectionReader(f, off, end-off)), h: crc32.New(castagnoli)}
	for {
		op, err := r.ReadByte()
		if err != nil || op != opSet && op != opDelete {
			return false
		}
		fields := 1 // the key
		if op == opSet {
			fields = 2 // and the value
		}
		for range fields {
			n, err := binary.ReadUvarint(r)
			if err != nil || n > uint64(end-off) {
				return false
			}
			if _, err := io.CopyN(r.h, r.r, int64(n)); err != nil {
				return false
			}
		}
		if r.h.Sum32() == sum {
			return true
		}
	}
}

// summing reads bytes and sums what it read.
type summing struct {
	r *bufio.Reader
	h hash.Hash32
}

func (s *summing) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	if err == nil {
		s.h.Write([]byte{b})
	}
	return b, err
}

// addSegment appends a replayed segment.
func (c *client) addSegment(seg *segment) {
	c.segs = append(c.segs, seg)
	c.total += seg.size
}

// countLive sums the cost of the current values per segment, after replay.
func (c *client) countLive() {
	for k, l := range c.idx {
		if s := c.segment(l.seg); s != nil {
			s.live += l.cost(k)
			c.live += l.cost(k)
		}
	}
}

// cut discards the bytes of seg from off on, keeping them aside when they
// are damage, and goes on with the segment before off (none when whole).
func (c *client) cut(seg *segment, off, n int64, torn bool, cause string, whole bool) error {
	d := Discarded{Segment: seg.f.Name(), Offset: off, Bytes: n, Torn: torn, Cause: cause}
	if !torn && n > 0 {
		kept := fmt.Sprintf("%s.damaged-%s", seg.f.Name(), time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := copyRange(seg.f, off, n, kept); err != nil {
			seg.f.Close()
			return fmt.Errorf("log_storage: keeping the damaged part of %s aside: %w", seg.f.Name(), err)
		}
		d.KeptAs = kept
	}
	if c.opt.discarded != nil {
		c.opt.discarded(d)
	}
	if whole {
		name := seg.f.Name()
		seg.f.Close()
		if err := os.Remove(name); err != nil {
			return fmt.Errorf("log_storage: removing %s: %w", name, err)
		}
		return nil
	}
	if err := seg.f.Truncate(off); err != nil {
		seg.f.Close()
		return fmt.Errorf("log_storage: cutting %s at %d: %w", seg.f.Name(), off, err)
	}
	seg.size = off
	c.addSegment(seg)
	return nil
}

func copyRange(f *os.File, off, n int64, to string) error {
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.NewSectionReader(f, off, n)); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// apply applies one record's operations to the index; base is the
// payload's offset in segment num.
func (c *client) apply(num uint64, base int64, p []byte) error {
	type change struct {
		key string
		l   loc
		del bool
	}
	var changes []change
	for i := 0; i < len(p); {
		op := p[i]
		i++
		kl, n := binary.Uvarint(p[i:])
		if n <= 0 || kl > uint64(len(p)-i-n) {
			return errors.New("a record with a bad key length")
		}
		i += n
		key := string(p[i : i+int(kl)])
		i += int(kl)
		switch op {
		case opSet:
			vl, n := binary.Uvarint(p[i:])
			if n <= 0 || vl > uint64(len(p)-i-n) {
				return errors.New("a record with a bad value length")
			}
			i += n
			l := loc{seg: num, off: base + int64(i), n: int(vl)}
			if l.n <= inlineMax {
				l.val = slices.Clone(p[i : i+int(vl)])
			}
			i += int(vl)
			changes = append(changes, change{key: key, l: l})
		case opDelete:
			changes = append(changes, change{key: key, del: true})
		default:
			return fmt.Errorf("a record with an unknown operation %d", op)
		}
	}
	// Whole or not at all.
	for _, ch := range changes {
		if ch.del {
			delete(c.idx, ch.key)
		} else {
			c.idx[ch.key] = ch.l
		}
	}
	return nil
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

// roll starts a new segment.
func (c *client) roll() error {
	num := uint64(1)
	if len(c.segs) > 0 {
		num = c.segs[len(c.segs)-1].num + 1
	}
	path := filepath.Join(c.dir, segName(num))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("log_storage: %w", err)
	}
	if _, err := f.WriteAt([]byte(segMagic), 0); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("log_storage: %w", err)
	}
	if c.opt.fsync {
		if err := syncNew(f, c.dir); err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("log_storage: %w", err)
		}
	}
	seg := &segment{num: num, f: f, size: int64(len(segMagic))}
	c.segs = append(c.segs, seg)
	c.total += seg.size
	return nil
}

func syncNew(f *os.File, dir string) error {
	if err := f.Sync(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (c *client) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	if err := c.Batch(ctx, op); err != nil {
		return nil, err
	}
	return op.Value, nil
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
	var pending map[string]*storage.Operation
	writes := 0
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			if p, ok := pending[op.Key]; ok {
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
		case storage.Set, storage.Delete:
			if writes > 0 || len(ops) > 1 {
				if pending == nil {
					pending = map[string]*storage.Operation{}
				}
				pending[op.Key] = op
			}
			writes++
			if op.Type == storage.Set {
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
	seg, err := c.write(b)
	if err != nil {
		for _, k := range keys {
			if l, ok := c.idx[k]; ok {
				c.addLive(l, k, 1)
			}
		}
		return err
	}
	// Pass 2: the index, in order.
	if err := c.apply(seg.num, seg.size-int64(len(b))+recHeader, b[recHeader:]); err != nil {
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
	s := c.segment(l.seg)
	if s == nil {
		return nil, fmt.Errorf("log_storage: %q is in segment %d, which is gone", key, l.seg)
	}
	v := make([]byte, l.n)
	if _, err := s.f.ReadAt(v, l.off); err != nil {
		return nil, fmt.Errorf("log_storage: reading %q: %w", key, err)
	}
	return v, nil
}

// write appends record b to the newest segment, starting a new one when
// b does not fit, and syncs it with fsync. A failed write is cut off
// again; when that fails too, the client writes no more.
func (c *client) write(b []byte) (*segment, error) {
	seg := c.segs[len(c.segs)-1]
	if seg.size > int64(len(segMagic)) && seg.size+int64(len(b)) > c.opt.segmentBytes {
		if err := c.roll(); err != nil {
			return nil, err
		}
		seg = c.segs[len(c.segs)-1]
	}
	if _, err := seg.f.WriteAt(b, seg.size); err != nil {
		if terr := seg.f.Truncate(seg.size); terr != nil {
			c.broken = fmt.Errorf("log_storage: a failed write to %s could not be cut off (%w), nothing more is written: %w", seg.f.Name(), terr, err)
		}
		return nil, fmt.Errorf("log_storage: writing %s: %w", seg.f.Name(), err)
	}
	if c.opt.fsync {
		if err := seg.f.Sync(); err != nil {
			// What was written may or may not be on disk: the
			// caller was not told it is, and it stays in the log.
			// Nor is what the segment held before: the kernel may
			// have dropped the pages it could not write and report
			// the next fsync a success, so a record written now
			// could be acknowledged behind a hole. Nothing more is
			// written; a reopen replays what the disk holds.
			seg.size += int64(len(b))
			c.total += int64(len(b))
			c.broken = fmt.Errorf("log_storage: syncing %s failed, nothing more is written: %w", seg.f.Name(), err)
			return nil, fmt.Errorf("log_storage: syncing %s: %w", seg.f.Name(), err)
		}
	}
	seg.size += int64(len(b))
	c.total += int64(len(b))
	return seg, nil
}

// compact removes the oldest segments while they hold no current value,
// and, while the segments hold more than twice the current values and a
// segment besides, copies the oldest one's current values to the newest
// segment and removes it. Only the oldest segment is ever removed: a
// Delete in a later one then never uncovers a Set left in an earlier one.
func (c *client) compact() error {
	if err := c.dropDead(); err != nil {
		return err
	}
	for len(c.segs) > 1 && c.total > 2*c.live+c.opt.segmentBytes {
		old := c.segs[0]
		if err := c.copyForward(old); err != nil {
			return err
		}
		if err := c.dropDead(); err != nil {
			return err
		}
		if c.segs[0] == old {
			return nil // still live: cannot be
		}
	}
	return nil
}

func (c *client) dropDead() error {
	for len(c.segs) > 1 && c.segs[0].live <= 0 {
		old := c.segs[0]
		name := old.f.Name()
		old.f.Close()
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.broken = fmt.Errorf("log_storage: removing %s: %w", name, err)
			return c.broken
		}
		c.segs = c.segs[1:]
		c.total -= old.size
	}
	return nil
}

// copyForward writes old's current values again, in records of up to a
// segment's size, so that old holds none.
func (c *client) copyForward(old *segment) error {
	var keys []string
	for k, l := range c.idx {
		if l.seg == old.num {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var ops []*storage.Operation
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		b := append(c.buf[:0], make([]byte, recHeader)...)
		for _, op := range ops {
			b = append(b, opSet)
			b = binary.AppendUvarint(b, uint64(len(op.Key)))
			b = append(b, op.Key...)
			b = binary.AppendUvarint(b, uint64(len(op.Value)))
			b = append(b, op.Value...)
		}
		binary.LittleEndian.PutUint32(b, uint32(len(b)-recHeader))
		binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[recHeader:], castagnoli))
		wk := writtenKeys(ops)
		for _, k := range wk {
			c.addLive(c.idx[k], k, -1)
		}
		seg, err := c.write(b)
		if err != nil {
			for _, k := range wk {
				c.addLive(c.idx[k], k, 1)
			}
			return err
		}
		if err := c.apply(seg.num, seg.size-int64(len(b))+recHeader, b[recHeader:]); err != nil {
			return err
		}
		for _, k := range wk {
			c.addLive(c.idx[k], k, 1)
		}
		if c.opt.compacted != nil {
			c.opt.compacted(int64(len(b)))
		}
		ops, size = ops[:0], 0
		return nil
	}
	for _, k := range keys {
		v, err := c.read(k)
		if err != nil {
			return err
		}
		if size > 0 && int64(size+len(k)+len(v)+2*binary.MaxVarintLen64) > c.opt.segmentBytes/2 {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, storage.SetOperation(k, v))
		size += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	return flush()
}

func (c *client) closeFiles() {
	for _, s := range c.segs {
		s.f.Close()
	}
	c.segs = nil
}

func (c *client) Close(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.opt.fsync && len(c.segs) > 0 {
		err = c.segs[len(c.segs)-1].f.Sync()
	}
	c.closeFiles()
	return err
}
