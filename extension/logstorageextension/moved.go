package logstorageextension

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// Values moved to a new key are not written again. When exporterhelper's
// persistent queue starts, it reads every entry that was being sent when
// the process stopped, deletes them, and stores each again under a new
// key: on a full filesystem, with the batcher holding most of a backlog
// as it does while the upstream is away, those writes of new data were
// refused and the entries lost with their queue. A value read by a batch
// that writes nothing is remembered (moveCandidates, by its checksum) for
// a minute; a Set of the same bytes is then written as a reference to
// where they already are (opRef): no room taken, and the bytes stay held
// for the new key (a reference counts in its segment's live bytes, and
// compaction copies it forward as a value).

const (
	// maxMoveCandidates bounds the values remembered.
	maxMoveCandidates = 1 << 16
	// moveCandidateTTL is how long they are remembered after the last
	// was read: the queue moves its entries right after reading them.
	moveCandidateTTL = time.Minute
)

// moveCandidate is a value read by a batch without writes.
type moveCandidate struct {
	seg uint64
	off int64
	n   int
}

// rememberRead records what a batch without writes read.
func (c *client) rememberRead(key string, v []byte) {
	if len(v) <= inlineMax {
		return
	}
	l, ok := c.idx[key]
	if !ok || l.n != len(v) {
		return
	}
	if c.moves == nil || len(c.moves) >= maxMoveCandidates {
		c.moves = map[uint32]moveCandidate{}
	}
	c.moves[crc32.Checksum(v, castagnoli)] = moveCandidate{seg: l.seg, off: l.off, n: l.n}
	c.movesAt = time.Now()
}

// movedFrom returns where v's bytes already are, when v is a value a
// batch without writes read lately and they are still held unchanged.
func (c *client) movedFrom(v []byte) (moveCandidate, bool) {
	if len(c.moves) == 0 || len(v) <= inlineMax {
		return moveCandidate{}, false
	}
	if time.Since(c.movesAt) > moveCandidateTTL {
		c.moves = nil
		return moveCandidate{}, false
	}
	m, ok := c.moves[crc32.Checksum(v, castagnoli)]
	if !ok || m.n != len(v) {
		return moveCandidate{}, false
	}
	s := c.segment(m.seg)
	if s == nil || s.shifted || m.off+int64(m.n) > s.size {
		return moveCandidate{}, false
	}
	got := make([]byte, m.n)
	if _, err := s.f.ReadAt(got, m.off); err != nil || !bytes.Equal(got, v) {
		return moveCandidate{}, false
	}
	return m, true
}

// appendRef encodes an opRef of key to m.
func appendRef(b []byte, key string, m moveCandidate) []byte {
	b = append(b, opRef)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, m.seg)
	b = binary.AppendUvarint(b, uint64(m.off))
	return binary.AppendUvarint(b, uint64(m.n))
}

// holds says whether a reference, in a record whose payload starts at
// base in segment num, names bytes the client holds: past a segment's
// header, within its size (before the record, in its own segment), in a
// segment whose bytes have not moved.
func (c *client) holds(num uint64, base int64, seg, off, n uint64) bool {
	if n <= inlineMax || n > maxRecord || off > uint64(maxSegmentFile) || off < uint64(len(segMagic)) {
		return false
	}
	end := int64(off + n)
	if seg == num {
		return end <= base-recHeader
	}
	s := c.segment(seg)
	return s != nil && !s.shifted && end <= s.size
}

// reportDangling reports the keys whose last record referred to bytes in
// a segment removed since: never written so (compaction copies a
// reference forward before it removes its segment), so damage.
func (c *client) reportDangling() {
	if len(c.dangling) > 0 && c.opt.discarded != nil {
		c.opt.discarded(Discarded{Segment: c.dir, Truncated: true,
			Cause: fmt.Sprintf("%d keys refer to bytes in a segment that is gone", len(c.dangling))})
	}
	c.dangling = nil
}
