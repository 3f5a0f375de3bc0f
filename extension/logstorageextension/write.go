package logstorageextension

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Writing: a record appended to the newest segment, a new segment rolled,
// blocks reserved ahead, and the oldest segments compacted away.

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

// writeKind is what a write does to the room the client takes.
type writeKind int

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
