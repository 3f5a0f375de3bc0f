package logstorageextension

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/doubletake/doubletake/internal/storagestate"
)

// The drain reserve. Every write appends, deletes and index updates too,
// so a client on a full filesystem could not even record that the queue
// on top took an entry or delivered it: exporterhelper's persistent queue
// then drops the entry it was taking (it advances its read index first,
// "so even if errors happen below, it always iterates"). Each client
// therefore holds a file of reserved blocks, reserveFile, as large as
// draining what it holds needs: reserveBase, and reservePerKey for each
// key held (the queue writes two records of about 60 bytes to take and
// deliver an entry). New data is written only once the reserve is whole
// (fillReserve): without room for it, or for the data, it is refused with
// errFull before anything is written. A write that only moves what is
// held along (writeDrain) takes blocks back from the reserve when the
// filesystem has none (giveBack); the segments it drains are then removed
// and the room comes back. So the queue's effective bound is the smaller
// of its own and the room on the filesystem, less the reserve.
const (
	reserveFile = "RESERVE"
	// reserveBase is reserved whatever a client holds: a new segment's
	// blocks and about 16,000 index updates.
	reserveBase = 1 << 20
	// reservePerKey is reserved for each key held.
	reservePerKey = 256
	// reserveStep is how much the reserve grows or gives back at a
	// time: one call per step, not per write.
	reserveStep = 256 << 10
)

// errFull is what a write of new data returns while the filesystem has no
// room for it and the drain reserve: retryable (the exporter's queue
// refuses the request, the receiver answers 503 / Unavailable), and taken
// again once the queue drains or room is freed.
type errFull struct {
	dir  string
	free int64 // -1: not known
	err  error
}

func (e *errFull) Error() string {
	free := "unknown"
	if e.free >= 0 {
		free = fmt.Sprintf("%d bytes", e.free)
	}
	return fmt.Sprintf("log_storage: the data dir is full (%s free on the filesystem of %s): new data is refused until the queue drains or room is freed: %v", free, e.dir, e.err)
}

func (e *errFull) Unwrap() error { return e.err }

// DataDirFull marks the error for storagestate.IsFull.
func (*errFull) DataDirFull() bool { return true }

// IsFull says whether err is a write refused because the data dir's
// filesystem has no room.
func IsFull(err error) bool { return storagestate.IsFull(err) }

// openReserve opens (creating it when absent) the client's reserve file;
// what it holds from an earlier run counts. Anything else in its place
// (a directory, a symlink, a FIFO) is moved aside: its blocks are not the
// client's to give back.
func (c *client) openReserve() error {
	path := filepath.Join(c.dir, reserveFile)
	if st, err := c.fs.Lstat(path); err == nil && !st.Mode().IsRegular() {
		if err := c.fs.Remove(path); err != nil {
			return fmt.Errorf("log_storage: %s is not a regular file (%s) and could not be removed: %w", path, st.Mode().Type(), err)
		}
	}
	f, err := c.fs.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("log_storage: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("log_storage: %w", err)
	}
	c.resF, c.resSize = f, st.Size()
	return nil
}

// reserveTarget is the drain reserve the client's keys need.
func (c *client) reserveTarget() int64 {
	if c.opt.reserveBase < 0 {
		return 0
	}
	base := c.opt.reserveBase
	if base == 0 {
		base = reserveBase
	}
	return base + reservePerKey*int64(len(c.idx)+1)
}

// fillReserve makes the drain reserve whole before new data is written.
func (c *client) fillReserve() error {
	target := c.reserveTarget()
	if c.resSize >= target || c.resF == nil {
		return nil
	}
	end := min(c.resSize+max(reserveStep, target-c.resSize), target+reserveStep)
	err := c.resF.Allocate(c.resSize, end, false)
	if errors.Is(err, errors.ErrUnsupported) {
		// Without fallocate, blocks written are blocks held.
		_, err = c.resF.WriteAt(make([]byte, end-c.resSize), c.resSize)
	}
	if err != nil {
		// Whatever part it took goes back: the reserve is what
		// resSize says.
		_ = c.resF.Truncate(c.resSize)
		return fmt.Errorf("log_storage: filling the drain reserve: %w", err)
	}
	c.resSize = end
	return nil
}

// giveBack gives blocks of the drain reserve back to the filesystem for a
// write of n bytes that found none, and says whether it could.
func (c *client) giveBack(n int64) bool {
	if c.resF == nil || c.resSize == 0 {
		return false
	}
	size := max(0, c.resSize-max(n+n/2, reserveStep))
	if err := c.resF.Truncate(size); err != nil {
		return false
	}
	c.gaveBack += c.resSize - size
	c.resSize = size
	if !c.full {
		c.setFull(true, syscall.ENOSPC)
	}
	return true
}

// refuse counts a write of new data refused for lack of room and returns
// its errFull.
func (c *client) refuse(err error) error {
	c.refused++
	if !c.full {
		c.setFull(true, err)
	}
	free := int64(-1)
	if f, ferr := c.fs.Free(c.dir); ferr == nil {
		free = f
	}
	return &errFull{dir: c.dir, free: free, err: err}
}

// setFull records that new data is refused (full) or taken again, and
// tells the extension (a warn line when it starts and one when it ends).
func (c *client) setFull(full bool, cause error) {
	c.full = full
	if c.opt.fullChanged != nil {
		free := int64(-1)
		if f, err := c.fs.Free(c.dir); err == nil {
			free = f
		}
		c.opt.fullChanged(full, free, cause)
	}
}

// FullState is what the status page and the gauges read of a client.
type FullState struct {
	Full     bool  // new data is refused for lack of room
	Refused  int64 // writes of new data refused since the client opened
	Reserve  int64 // the drain reserve's bytes
	GaveBack int64 // bytes the reserve gave back to draining writes
}

func (c *client) fullState() FullState {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recheckFull()
	return FullState{Full: c.full, Refused: c.refused, Reserve: c.resSize, GaveBack: c.gaveBack}
}

// roomAgain is the free space, beyond a whole drain reserve, that a full
// client must see before a read of its state says it takes new data
// again: room for an early roll's worth of writes, so that one small
// write does not flip the state back at once.
const roomAgain = 1 << 20

// recheckFull clears full when the filesystem has room again although no
// write of new data has come to show it (room freed by hand, or the queue
// drained while no sender writes): the status page and the gauges read
// it, and without this they would say full until the next request. The
// drain reserve is made whole first, as a write of new data would; a
// broken client stays as it is. c.mu is held.
func (c *client) recheckFull() {
	if !c.full || c.broken != nil || c.resF == nil {
		return
	}
	if err := c.fillReserve(); err != nil {
		return
	}
	if free, err := c.fs.Free(c.dir); err == nil && free >= roomAgain {
		c.setFull(false, nil)
	}
}
