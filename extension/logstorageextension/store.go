package logstorageextension

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

// listSegments lists the segments in dir by number, and the entries named
// as segments that are not regular files (foreign).
func listSegments(fsys fileSystem, dir string) (nums []uint64, foreign []os.DirEntry, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if len(name) != 20 || !strings.HasSuffix(name, ".log") {
			continue
		}
		n, err := strconv.ParseUint(name[:16], 16, 64)
		if err != nil {
			continue
		}
		if !e.Type().IsRegular() {
			foreign = append(foreign, e)
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, foreign, nil
}

// setAsideForeign moves each entry named as a segment that is not a
// regular file (a symlink, a FIFO, a directory) aside, unread: reading a
// FIFO blocks, a symlink points at what the client did not write, and left
// in place the entry would take the name of the next segment the client
// rolls to. What it held, if it was a segment, is lost uncounted: reported.
func (c *client) setAsideForeign(foreign []os.DirEntry) error {
	for _, e := range foreign {
		path := filepath.Join(c.dir, e.Name())
		kept := fmt.Sprintf("%s.foreign-%s", path, time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := c.fs.Rename(path, kept); err != nil {
			return fmt.Errorf("log_storage: %s is not a regular file (%s) and could not be moved aside: %w", path, e.Type(), err)
		}
		if c.opt.discarded != nil {
			c.opt.discarded(Discarded{Segment: path, Foreign: true, KeptAs: kept,
				Cause: fmt.Sprintf("named as a segment but not a regular file (%s): moved aside unread", e.Type())})
		}
	}
	return nil
}

// replay reads segment num into the index. A record that fails its
// checksum or framing is damage, unless it is the newest segment's last
// record, cut short (a write a crash interrupted): the damaged bytes are
// kept aside and cut, and reading resumes at the next offset where a
// whole record checks out (resync), so that damage costs the records it
// hit, not the rest of the segment. The file is then rewritten without
// the damaged bytes.
func (c *client) replay(num uint64, newest bool, hw mark) (int64, error) {
	path := filepath.Join(c.dir, segName(num))
	st, err := c.fs.Stat(path)
	if err != nil {
		return 0, err
	}
	if st.Size() > maxSegmentFile {
		return 0, fmt.Errorf("log_storage: %s is %d bytes, more than a segment can be (%d): not a segment of this store", path, st.Size(), maxSegmentFile)
	}
	data, err := c.fs.ReadFile(path)
	if err != nil {
		return 0, err
	}
	size := int64(len(data))
	if newest && size < int64(len(segMagic)) && strings.HasPrefix(segMagic, string(data)) {
		// Created, its magic not fully written: nothing in it (when the
		// mark names it, it had been written: checkMark reports that).
		if c.opt.discarded != nil && size > 0 && (!hw.ok || hw.num != num) {
			c.opt.discarded(Discarded{Segment: path, Offset: 0, Bytes: size, Torn: true, Cause: "the segment's header was cut short"})
		}
		if err := c.fs.Remove(path); err != nil {
			return 0, fmt.Errorf("log_storage: removing %s: %w", path, err)
		}
		return size, nil
	}
	var good []byte // the segment without its damage, once it has some
	var damaged []span
	off := int64(len(segMagic))
	if string(data[:min(size, off)]) != segMagic {
		// Its header damaged: a good one is written, and the records
		// after the damage are kept.
		next := resync(data, 1)
		damaged = append(damaged, span{0, next, "not a log_storage segment header (bad magic)"})
		good = []byte(segMagic)
		off = next
	}
	for off < size {
		n, cause := checkRecord(data, off)
		if cause == "" {
			at := off // where the record is once the segment is rewritten
			if good != nil {
				at = int64(len(good))
			}
			if err := c.apply(num, at+recHeader, data[off+recHeader:off+recHeader+n], false); err != nil {
				cause = err.Error()
			}
		}
		if cause == "" {
			if good != nil {
				good = append(good, data[off:off+recHeader+n]...)
			}
			off += recHeader + n
			continue
		}
		// Damage, or a torn last record: find the next whole record.
		next := resync(data, off+1)
		if good == nil {
			good = slices.Clone(data[:off])
		}
		if k := len(damaged) - 1; k >= 0 && damaged[k].to == off {
			damaged[k].to = next
		} else {
			damaged = append(damaged, span{off, next, cause})
		}
		off = next
	}
	shifted := false
	for _, d := range damaged {
		shifted = shifted || d.to < size
	}
	if len(damaged) > 0 {
		// Torn: the newest segment's last record cut short, past what
		// the mark says was written before (a write cut short by the
		// crash, not a truncation of what had been acknowledged).
		// A record cut short before the mark is a truncation: checkMark
		// reports it, from the last whole record on.
		tail := newest && len(damaged) == 1 && damaged[0].from > 0 && damaged[0].to == size && tornTail(data, damaged[0].from)
		torn := tail && (!hw.ok || hw.num != num || damaged[0].from >= hw.size)
		if tail && !torn {
			size = damaged[0].from
			damaged = nil
		}
		if err := c.cutDamage(path, data, good, damaged, torn); err != nil {
			return 0, err
		}
		if len(good) == len(segMagic) && damaged != nil && damaged[0].from == 0 {
			// Not a segment (junk, no whole record in it): kept aside
			// whole above; nothing of it is left to read.
			if err := c.fs.Remove(path); err != nil {
				return 0, fmt.Errorf("log_storage: removing %s: %w", path, err)
			}
			return size, nil
		}
		data = good
	}
	f, err := c.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	seg := &segment{num: num, f: f, size: int64(len(data)), shifted: shifted}
	c.addSegment(seg)
	return size, nil
}

// markFile holds where the client had written to, about a second after
// its writes and at Close: the newest segment's number and size, a format
// version and a CRC32C. Opening the client compares it with the segments:
// a segment shorter than the mark says, or missing, lost writes that had
// been acknowledged (a truncation, a copy cut short, a power loss without
// fsync), which a log's records alone cannot tell from writes that never
// happened. Writes of the last second before the process stopped are not
// covered.
const markFile = "WRITTEN"

// mark is a decoded markFile; ok is false without a valid one.
type mark struct {
	num  uint64
	size int64
	ok   bool
}

func readMark(fsys fileSystem, dir string) mark {
	path := filepath.Join(dir, markFile)
	// Only a regular file is the mark: reading a FIFO would block the
	// open, and writing through a symlink would write elsewhere. Anything
	// else in its place is removed, and the client writes a new one.
	if st, err := fsys.Lstat(path); err == nil && !st.Mode().IsRegular() {
		_ = fsys.Remove(path)
		return mark{}
	}
	b, err := fsys.ReadFile(path)
	if err != nil || len(b) != 24 || binary.LittleEndian.Uint32(b[16:]) != 1 || crc32.Checksum(b[:20], castagnoli) != binary.LittleEndian.Uint32(b[20:]) {
		return mark{}
	}
	return mark{num: binary.LittleEndian.Uint64(b), size: int64(binary.LittleEndian.Uint64(b[8:])), ok: true}
}

// checkMark reports the writes the segments lost against the mark: sizes
// are the segments' sizes as found (before damage was cut).
func (c *client) checkMark(hw mark, sizes map[uint64]int64, nums []uint64) {
	if !hw.ok || c.opt.discarded == nil {
		return
	}
	path := filepath.Join(c.dir, segName(hw.num))
	if size, ok := sizes[hw.num]; ok {
		if size < hw.size {
			c.opt.discarded(Discarded{Segment: path, Offset: size, Bytes: hw.size - size, Truncated: true,
				Cause: fmt.Sprintf("the segment is %d bytes, %d had been written: truncated", size, hw.size)})
		}
		return
	}
	if len(nums) > 0 && nums[len(nums)-1] > hw.num {
		return // rolled past it, and it was removed as dead
	}
	c.opt.discarded(Discarded{Segment: path, Bytes: hw.size, Truncated: true,
		Cause: fmt.Sprintf("the segment, %d bytes written, is missing", hw.size)})
}

// writeMark writes the mark of the newest segment.
func (c *client) writeMark() error {
	if len(c.segs) == 0 {
		return nil
	}
	seg := c.segs[len(c.segs)-1]
	var b [24]byte
	binary.LittleEndian.PutUint64(b[:], seg.num)
	binary.LittleEndian.PutUint64(b[8:], uint64(seg.size))
	binary.LittleEndian.PutUint32(b[16:], 1)
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
	if c.markF == nil {
		f, err := c.fs.OpenFile(filepath.Join(c.dir, markFile), os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		c.markF = f
	}
	_, err := c.markF.WriteAt(b[:], 0)
	return err
}

// markSoon writes the mark a second after a write, once per second.
func (c *client) markSoon() {
	if c.markTimer != nil {
		return
	}
	c.markTimer = time.AfterFunc(time.Second, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.markTimer = nil
		if !c.closed {
			_ = c.writeMark() // advisory: a mark not written checks less at the next open
		}
	})
}

// span is a damaged range of a segment.
type span struct {
	from, to int64
	cause    string
}

// checkRecord checks the record at off: its length and checksum. It
// returns the payload's length, or why the record is not whole.
func checkRecord(data []byte, off int64) (int64, string) {
	size := int64(len(data))
	if off+recHeader > size {
		return 0, "a record header cut short"
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	if n > maxRecord || off+recHeader+n > size {
		return 0, fmt.Sprintf("a record of %d bytes where %d remain", n, size-off-recHeader)
	}
	if n < 2 {
		return 0, "an empty record"
	}
	// The operations must parse to the record's end before the checksum
	// is computed: resync tries every offset of a damaged range, and most
	// random lengths that fit would otherwise cost a checksum of up to
	// the whole segment each.
	if !parses(data[off+recHeader : off+recHeader+n]) {
		return 0, "a record whose operations do not parse"
	}
	if crc32.Checksum(data[off+recHeader:off+recHeader+n], castagnoli) != binary.LittleEndian.Uint32(data[off+4:]) {
		return 0, "a record's checksum does not match"
	}
	return n, ""
}

// parses says whether p is a sequence of whole operations.
func parses(p []byte) bool {
	for i := 0; i < len(p); {
		next, ok := opEnd(p, i)
		if !ok {
			return false
		}
		i = next
	}
	return true
}

// opEnd returns where the operation at i ends, and whether it is whole.
func opEnd(p []byte, i int) (int, bool) {
	op := p[i]
	i++
	if op != opSet && op != opDelete && op != opRef {
		return 0, false
	}
	kl, n := binary.Uvarint(p[i:])
	if n <= 0 || kl > uint64(len(p)-i-n) {
		return 0, false
	}
	i += n + int(kl)
	switch op {
	case opSet:
		vl, n := binary.Uvarint(p[i:])
		if n <= 0 || vl > uint64(len(p)-i-n) {
			return 0, false
		}
		i += n + int(vl)
	case opRef:
		for range 3 {
			_, n := binary.Uvarint(p[i:])
			if n <= 0 {
				return 0, false
			}
			i += n
		}
	}
	return i, true
}

// resync returns the first offset from from on where a whole record
// starts (its length in bounds, its checksum matching), or the end.
func resync(data []byte, from int64) int64 {
	for off := from; off+recHeader < int64(len(data)); off++ {
		if _, cause := checkRecord(data, off); cause == "" {
			return off
		}
	}
	return int64(len(data))
}

// tornTail says whether the bytes from off on are one record cut short: a
// header claiming more bytes than the segment has (or a header itself cut
// short). A crash during a write leaves nothing else.
func tornTail(data []byte, off int64) bool {
	size := int64(len(data))
	if off+recHeader > size {
		return true
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	// Unless the bytes after the header hold a whole record: then its
	// length field is damaged, and the record was acknowledged.
	return n >= 2 && n <= maxRecord && off+recHeader+n > size &&
		!wholeRecord(data, off+recHeader, binary.LittleEndian.Uint32(data[off+4:]))
}

// cutDamage keeps a segment's damaged bytes aside (unless they are a torn
// tail), reports them, and rewrites the segment without them (a temporary
// file, synced, renamed over it).
func (c *client) cutDamage(path string, data, good []byte, damaged []span, torn bool) error {
	for _, d := range damaged {
		rep := Discarded{Segment: path, Offset: d.from, Bytes: d.to - d.from, Torn: torn, Cause: d.cause}
		if !torn && rep.Bytes > 0 {
			kept := fmt.Sprintf("%s.damaged-%d-%s", path, d.from, time.Now().UTC().Format("20060102T150405.000000000Z"))
			if err := writeSynced(c.fs, kept, data[d.from:d.to]); err != nil {
				return fmt.Errorf("log_storage: keeping the damaged bytes of %s aside: %w", path, err)
			}
			rep.KeptAs = kept
		}
		if c.opt.discarded != nil {
			c.opt.discarded(rep)
		}
	}
	tmp := path + ".rewrite"
	if err := writeSynced(c.fs, tmp, good); err != nil {
		return fmt.Errorf("log_storage: rewriting %s without its damage: %w", path, err)
	}
	if err := c.fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("log_storage: rewriting %s without its damage: %w", path, err)
	}
	return nil
}

func writeSynced(fsys fileSystem, path string, b []byte) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// wholeRecord reports whether data from off on begins with whole
// operations whose checksum is sum: a complete record behind a damaged
// length field. A write cut short holds part of its record, whose
// checksum matches at an operation's end only by chance (2^-32 each).
// One pass over the bytes, reading them as operations.
func wholeRecord(data []byte, off int64, sum uint32) bool {
	p := data[off:]
	c := uint32(0)
	for i := 0; i < len(p); {
		start := i
		next, ok := opEnd(p, i)
		if !ok {
			return false
		}
		i = next
		c = crc32.Update(c, castagnoli, p[start:i])
		if c == sum {
			return true
		}
	}
	return false
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

// apply applies one record's operations to the index; base is the
// payload's offset in segment num.
func (c *client) apply(num uint64, base int64, p []byte, cache bool) error {
	type change struct {
		key string
		l   loc
		del bool
		ref bool // the value is elsewhere (opRef): not in p to cache
		// dangling: a reference into a segment removed since.
		dangling bool
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
		case opRef:
			var v [3]uint64
			for j := range v {
				x, n := binary.Uvarint(p[i:])
				if n <= 0 {
					return errors.New("a record with a bad reference")
				}
				v[j], i = x, i+n
			}
			if !cache && v[0] < num && (len(c.segs) == 0 || v[0] < c.segs[0].num) {
				// Into a segment compacted away since: a later
				// record set the key again (compaction copies a
				// reference forward before it removes the
				// segment), or the key is lost (dangling).
				changes = append(changes, change{key: key, del: true, dangling: true})
				continue
			}
			if !c.holds(num, base, v[0], v[1], v[2]) {
				return fmt.Errorf("a record referring to %d bytes at %d of segment %d, which the client does not hold", v[2], v[1], v[0])
			}
			changes = append(changes, change{key: key, l: loc{seg: v[0], off: int64(v[1]), n: int(v[2])}, ref: true})
		default:
			return fmt.Errorf("a record with an unknown operation %d", op)
		}
	}
	// Whole or not at all.
	for _, ch := range changes {
		if old, ok := c.idx[ch.key]; ok && old.n > inlineMax && old.val != nil {
			c.cacheSize -= int64(old.n)
			c.cached--
		}
		if ch.dangling {
			if c.dangling == nil {
				c.dangling = map[string]struct{}{}
			}
			c.dangling[ch.key] = struct{}{}
		} else if c.dangling != nil {
			delete(c.dangling, ch.key)
		}
		if ch.del {
			delete(c.idx, ch.key)
			continue
		}
		if cache && !ch.ref && !c.cacheOff && ch.l.n > inlineMax && int64(ch.l.n) <= c.opt.cacheBytes/4 {
			off := ch.l.off - base
			ch.l.val = slices.Clone(p[off : off+int64(ch.l.n)])
			c.cacheSize += int64(ch.l.n)
			c.cached++
			c.cacheQ = append(c.cacheQ, cacheRef{ch.key, ch.l.seg, ch.l.off})
			c.cacheInserted++
		}
		c.idx[ch.key] = ch.l
	}
	if cache && !c.cacheOff {
		c.evict()
		// A client that never reads back what it wrote (dedup's
		// journal: only at open) would only copy into the cache.
		if c.cacheInserted >= 1024 && c.cacheHits == 0 {
			c.cacheOff = true
			for _, r := range c.cacheQ {
				if l, ok := c.current(r); ok {
					l.val = nil
					c.idx[r.key] = l
				}
			}
			c.cacheQ, c.cacheSize, c.cached = nil, 0, 0
		}
	}
	return nil
}

// cacheRef is a value held in the read cache, oldest first in cacheQ.
type cacheRef struct {
	key string
	seg uint64
	off int64
}

// current says whether r still names key's value, held in memory.
func (c *client) current(r cacheRef) (loc, bool) {
	l, ok := c.idx[r.key]
	return l, ok && l.seg == r.seg && l.off == r.off && l.n > inlineMax && l.val != nil
}

// evict drops the oldest cached values while the cache holds more than
// cache_bytes, and the references to values deleted or overwritten
// since (the queue deletes its entries in the order it wrote them, so
// they are at the front; elsewhere a pass filters them out once they
// outnumber the values held).
func (c *client) evict() {
	for len(c.cacheQ) > 0 {
		r := c.cacheQ[0]
		l, ok := c.current(r)
		if ok && c.cacheSize <= c.opt.cacheBytes {
			break
		}
		c.cacheQ = c.cacheQ[1:]
		if ok {
			l.val = nil
			c.idx[r.key] = l
			c.cacheSize -= int64(l.n)
			c.cached--
		}
	}
	if len(c.cacheQ) > 1024+2*c.cached {
		q := make([]cacheRef, 0, c.cached)
		for _, r := range c.cacheQ {
			if _, ok := c.current(r); ok {
				q = append(q, r)
			}
		}
		c.cacheQ = q
	}
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
	f, err := c.fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("log_storage: %w", err)
	}
	// A segment not started is removed again; left in place, it would
	// hold the name the next roll takes: then nothing more is written,
	// and a reopen cuts its torn header.
	abandon := func(err error) error {
		f.Close()
		if rerr := c.fs.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			c.broken = fmt.Errorf("log_storage: %s, not started (%w), could not be removed, nothing more is written: %w", path, err, rerr)
		}
		return fmt.Errorf("log_storage: %w", err)
	}
	if _, err := f.WriteAt([]byte(segMagic), 0); err != nil {
		return abandon(err)
	}
	if c.opt.fsync {
		if err := syncNew(c.fs, f, c.dir); err != nil {
			return abandon(err)
		}
	}
	seg := &segment{num: num, f: f, size: int64(len(segMagic))}
	if len(c.segs) > 0 {
		// The segment left holds what was written to it: the blocks
		// reserved past that go back.
		c.release(c.segs[len(c.segs)-1])
	}
	c.segs = append(c.segs, seg)
	c.total += seg.size
	return nil
}

// reserve reserves seg's blocks for a write of n bytes, and reserveAhead
// past it within the segment, when they are not yet. A filesystem without
// fallocate is written as before. Without room for the reserve ahead,
// only the write's own blocks are reserved: an error then is a filesystem
// without room for the write itself (or failing), so that new data is
// refused before any of it is written.
func (c *client) reserve(seg *segment, n int64) error {
	ahead := c.opt.reserveBytes
	if ahead == 0 {
		ahead = reserveAhead
	}
	if ahead < 0 || seg.size+n <= seg.reserved {
		return nil
	}
	end := min(seg.size+n+ahead, max(c.opt.segmentBytes, seg.size+n))
	err := seg.f.Allocate(seg.size, end, true)
	if err != nil && end > seg.size+n && !errors.Is(err, errors.ErrUnsupported) {
		end = seg.size + n
		err = seg.f.Allocate(seg.size, end, true)
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil
	case err != nil:
		// What a failed fallocate reserved (ext4 may keep part of it)
		// goes back with a cut to the size written.
		_ = seg.f.Truncate(seg.size)
		seg.reserved = seg.size
		return err
	}
	seg.reserved = end
	return nil
}

// release gives back the blocks reserved past what seg holds (truncating
// to its own size frees them; the size does not change). Best effort:
// they are freed with the file at the latest.
func (c *client) release(seg *segment) {
	if seg.reserved > seg.size {
		_ = seg.f.Truncate(seg.size)
		seg.reserved = seg.size
	}
}

func syncNew(fsys fileSystem, f storeFile, dir string) error {
	if err := f.Sync(); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
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

// writeKind is what a write does to the room the client takes.
type writeKind int

const (
	// writeDrain moves what is held along: the queue's index updates,
	// deletes, a value overwritten by one no larger.
	writeDrain writeKind = iota
	// writeNew stores new data.
	writeNew
	// writeCompact copies live values forward.
	writeCompact
)

// write appends record b to the newest segment (writeOnce) and syncs it.
// New data (growth) first has the drain reserve made whole and its own
// blocks reserved: without room for either it is refused (errFull),
// retryably, before anything is written. A write that only moves what is
// held along (the queue's index updates, deletes) takes room from the
// drain reserve when the filesystem has none left, so that a full disk
// still drains.
func (c *client) write(b []byte, kind writeKind) (*segment, error) {
	growth := kind == writeNew
	if growth {
		if err := c.fillReserve(); err != nil {
			return nil, c.refuse(err)
		}
	}
	for {
		seg, err := c.writeOnce(b, growth)
		switch {
		case err == nil:
			if growth && c.full {
				c.setFull(false, nil)
			}
			return seg, nil
		case c.broken != nil || !noSpace(err):
			return nil, err
		case growth:
			return nil, c.refuse(err)
		case kind == writeCompact:
			// Compacting takes no room from the drain reserve: it
			// is tried again after a later write.
			return nil, err
		case !c.giveBack(int64(len(b))):
			// The drain reserve is spent: the filesystem has no
			// room even to drain. Nothing more is written, so
			// that the queue on top cannot drop the entry it was
			// taking (it advances past an entry whose index
			// update failed); a restart reads it again.
			c.broken = fmt.Errorf("log_storage: the filesystem of %s is full and the drain reserve is spent, nothing more is written: %w", c.dir, err)
			return nil, err
		}
	}
}

// rollEarly says whether the newest segment, not yet full, is rolled
// all the same: while new data is refused for lack of room, once it
// holds more than rollEarlyDead bytes of values deleted or overwritten.
// Only a segment left behind is ever removed, so a filesystem smaller
// than a segment would otherwise keep a drained queue's bytes for good.
func (c *client) rollEarly(seg *segment) bool {
	return c.full && seg.size-seg.live > rollEarlyDead && 2*seg.live < seg.size
}

// rollEarlyDead is how many dead bytes the newest segment holds before a
// full client rolls it.
const rollEarlyDead = 1 << 20

// writeOnce appends record b to the newest segment, starting a new one
// when b does not fit, and syncs it with fsync. A failed write is cut off
// again; when that fails too, the client writes no more.
func (c *client) writeOnce(b []byte, growth bool) (*segment, error) {
	seg := c.segs[len(c.segs)-1]
	if seg.size > int64(len(segMagic)) && (seg.size+int64(len(b)) > c.opt.segmentBytes || c.rollEarly(seg)) {
		if err := c.roll(); err != nil {
			return nil, err
		}
		seg = c.segs[len(c.segs)-1]
	}
	if err := c.reserve(seg, int64(len(b))); err != nil && growth {
		return nil, fmt.Errorf("log_storage: reserving room in %s: %w", seg.f.Name(), err)
	}
	if _, err := seg.f.WriteAt(b, seg.size); err != nil {
		if terr := seg.f.Truncate(seg.size); terr != nil {
			c.broken = fmt.Errorf("log_storage: a failed write to %s could not be cut off (%w), nothing more is written: %w", seg.f.Name(), terr, err)
		} else {
			seg.reserved = seg.size // the cut gave the reserve back too
		}
		return nil, fmt.Errorf("log_storage: writing %s: %w", seg.f.Name(), err)
	}
	if c.opt.fsync {
		if err := seg.f.Sync(); err != nil {
			// What was written may or may not be on disk: the
			// caller is told it failed, and it is cut off again
			// (a reopen finds it, when the cut did not reach the
			// disk either: in doubt, whole or not at all). Nor is
			// what the segment held before certain: the kernel
			// may have dropped the pages it could not write and
			// report the next fsync a success, so a record
			// written now could be acknowledged behind a hole.
			// Nothing more is written; a reopen replays what the
			// disk holds.
			if terr := seg.f.Truncate(seg.size); terr != nil {
				seg.size += int64(len(b))
				c.total += int64(len(b))
			} else {
				seg.reserved = seg.size
			}
			c.broken = fmt.Errorf("log_storage: syncing %s failed, nothing more is written: %w", seg.f.Name(), err)
			return nil, fmt.Errorf("log_storage: syncing %s: %w", seg.f.Name(), err)
		}
	}
	seg.size += int64(len(b))
	c.total += int64(len(b))
	c.markSoon()
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
	if c.full {
		// No room to copy into: what draining frees comes first.
		return nil
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
		if err := c.fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
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
		seg, err := c.write(b, writeCompact)
		if err != nil {
			for _, k := range wk {
				c.addLive(c.idx[k], k, 1)
			}
			return err
		}
		if err := c.apply(seg.num, seg.size-int64(len(b))+recHeader, b[recHeader:], false); err != nil {
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
