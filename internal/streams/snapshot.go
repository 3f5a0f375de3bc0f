package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// snapshotMagic starts a snapshot: a format name and version. Version 1
// had no change-over shift; it is still read.
// Version 2 had no classifier section (Policy.Auto); it is still read.
const (
	snapshotMagic   = "dtstreams3"
	snapshotMagicV2 = "dtstreams2"
	snapshotMagicV1 = "dtstreams1"
)

// writerBytes and streamBytes are the encoded sizes.
const (
	writerBytes   = 6 * 8
	streamBytesV1 = 16 + 2*writerBytes + 8 + 1 + 1
	streamBytes   = streamBytesV1 + 16
)

var errSnapshot = errors.New("not a stream tracker snapshot")

func appendWriter(b []byte, w *writer) []byte {
	b = binary.LittleEndian.AppendUint64(b, w.start)
	b = binary.LittleEndian.AppendUint64(b, w.time)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w.value))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w.sum))
	b = binary.LittleEndian.AppendUint64(b, w.fp)
	return binary.LittleEndian.AppendUint64(b, w.interval)
}

func readWriter(b []byte) writer {
	return writer{
		start:    binary.LittleEndian.Uint64(b[0:]),
		time:     binary.LittleEndian.Uint64(b[8:]),
		value:    math.Float64frombits(binary.LittleEndian.Uint64(b[16:])),
		sum:      math.Float64frombits(binary.LittleEndian.Uint64(b[24:])),
		fp:       binary.LittleEndian.Uint64(b[32:]),
		interval: binary.LittleEndian.Uint64(b[40:]),
	}
}

// AppendSnapshot appends the state of every tracked stream to b: who is
// elected, who else was seen, and their newest points. A process that
// restores it judges the next points as this one would have, so a restart
// of the judge is not a new election.
func (t *Tracker) AppendSnapshot(b []byte) []byte {
	b = append(b, snapshotMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(t.index.n))
	for i := range t.used {
		s := t.at(i)
		if s.flags&flagLive == 0 {
			continue
		}
		b = append(b, s.id[:]...)
		b = appendWriter(b, &s.cur)
		b = appendWriter(b, &s.alt)
		b = binary.LittleEndian.AppendUint64(b, uint64(s.seen))
		b = append(b, byte(s.shape), s.flags)
		b = binary.LittleEndian.AppendUint64(b, s.shift.Start)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.shift.Offset))
	}
	return t.judge.appendSnapshot(b)
}

// Restore adds the streams of a snapshot made by AppendSnapshot, up to the
// tracker's limit, skipping streams it tracks already. It returns how many
// it added.
func (t *Tracker) Restore(b []byte) (int, error) {
	if len(b) < len(snapshotMagic)+8 {
		return 0, errSnapshot
	}
	size := uint64(streamBytes)
	judged := false
	switch string(b[:len(snapshotMagic)]) {
	case snapshotMagic:
		judged = true
	case snapshotMagicV2:
	case snapshotMagicV1:
		size = streamBytesV1
	default:
		return 0, errSnapshot
	}
	b = b[len(snapshotMagic):]
	n := binary.LittleEndian.Uint64(b)
	b = b[8:]
	var tail []byte
	if judged && n <= uint64(len(b))/size {
		b, tail = b[:n*size], b[n*size:]
	}
	if n > uint64(len(b)) || uint64(len(b)) != n*size {
		return 0, fmt.Errorf("stream tracker snapshot: %d bytes for %d streams, want %d", len(b), n, n*size)
	}
	if judged {
		// Checked before any stream is added: a bad section adds nothing.
		if err := checkJudgeSnapshot(tail); err != nil {
			return 0, err
		}
		defer func() { t.judge.restore(tail, t) }()
	}
	added := 0
	for ; len(b) > 0; b = b[size:] {
		var id ID
		copy(id[:], b)
		if _, _, ok := t.index.find(&id, t); ok || t.index.n >= t.max {
			continue
		}
		i := t.alloc()
		s := t.at(i)
		*s = stream{
			id:      id,
			cur:     readWriter(b[16:]),
			alt:     readWriter(b[16+writerBytes:]),
			seen:    int64(binary.LittleEndian.Uint64(b[16+2*writerBytes:])),
			shape:   Shape(b[16+2*writerBytes+8]),
			flags:   b[16+2*writerBytes+9] | flagLive | flagRunSince,
			version: t.nextVersion(),
		}
		if size == streamBytes {
			o := streamBytesV1
			s.shift = Shift{
				Start:  binary.LittleEndian.Uint64(b[o:]),
				Offset: math.Float64frombits(binary.LittleEndian.Uint64(b[o+8:])),
			}
		} else {
			s.flags &^= flagShift
		}
		t.index.insert(&id, i)
		added++
	}
	return added, nil
}
