package logstorageextension

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Opening a client: its segments listed, each replayed into the index,
// damage cut and kept aside, the mark checked against what was written.

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
