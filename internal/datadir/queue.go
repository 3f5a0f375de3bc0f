package datadir

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/xpdata/request"
)

// The exporterhelper persistent queue (collector v0.161) keeps, in its
// file_storage client's bucket: "qmv0", its metadata (the protobuf
// PersistentMetadata: items_size sfixed64 = 1, bytes_size sfixed64 = 2,
// read_index fixed64 = 3, write_index fixed64 = 4, currently dispatched
// indexes repeated fixed64 = 5), and each entry under its index in
// decimal, the request encoded with its context (pdata's request format,
// or plain OTLP protobuf). Entries are written once and deleted once
// delivered: a copy of one found anywhere in the file is that entry.
const queueMetaKey = "qmv0"

type queueMeta struct {
	items, bytes int64
	read, write  uint64
	dispatched   []uint64
}

// decodeQueueMeta reads the fields above; anything else is an error.
func decodeQueueMeta(b []byte) (queueMeta, error) {
	var m queueMeta
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		switch tag {
		case 0x09, 0x11, 0x19, 0x21, 0x29: // fixed64 fields 1..5
			if len(b) < 8 {
				return m, errors.New("short field")
			}
			v := binary.LittleEndian.Uint64(b)
			b = b[8:]
			switch tag {
			case 0x09:
				m.items = int64(v)
			case 0x11:
				m.bytes = int64(v)
			case 0x19:
				m.read = v
			case 0x21:
				m.write = v
			default:
				m.dispatched = append(m.dispatched, v)
			}
		case 0x2a: // packed field 5
			n, k := binary.Uvarint(b)
			if k <= 0 || n%8 != 0 || n > uint64(len(b)-k) {
				return m, errors.New("bad packed field")
			}
			b = b[k:]
			for i := uint64(0); i < n; i += 8 {
				m.dispatched = append(m.dispatched, binary.LittleEndian.Uint64(b[i:]))
			}
			b = b[n:]
		default:
			return m, errors.New("unknown field")
		}
	}
	if m.write < m.read || m.items < 0 || m.bytes < 0 {
		return m, errors.New("inconsistent indexes")
	}
	return m, nil
}

func encodeQueueMeta(m queueMeta) []byte {
	var b []byte
	put := func(tag byte, v uint64) {
		b = append(b, tag)
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	if m.items != 0 {
		put(0x09, uint64(m.items))
	}
	if m.bytes != 0 {
		put(0x11, uint64(m.bytes))
	}
	if m.read != 0 {
		put(0x19, m.read)
	}
	if m.write != 0 {
		put(0x21, m.write)
	}
	if len(m.dispatched) > 0 {
		b = append(b, 0x2a)
		b = binary.AppendUvarint(b, uint64(8*len(m.dispatched)))
		for _, d := range m.dispatched {
			b = binary.LittleEndian.AppendUint64(b, d)
		}
	}
	return b
}

// newer says whether m is a later state of the same queue than o: every
// write raises write_index, every read read_index.
func (m queueMeta) newer(o queueMeta) bool {
	if m.write != o.write {
		return m.write > o.write
	}
	return m.read > o.read
}

// decodeEntry decodes one queue entry of signal and returns its items
// (spans, log records or points) and its encoded size, as the queue's
// sizers count them.
func decodeEntry(signal string, v []byte) (items, size int, err error) {
	switch signal {
	case "traces":
		_, td, err := request.UnmarshalTraces(v)
		if errors.Is(err, request.ErrInvalidFormat) {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(v)
		}
		if err != nil {
			return 0, 0, err
		}
		return td.SpanCount(), (&ptrace.ProtoMarshaler{}).TracesSize(td), nil
	case "logs":
		_, ld, err := request.UnmarshalLogs(v)
		if errors.Is(err, request.ErrInvalidFormat) {
			ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(v)
		}
		if err != nil {
			return 0, 0, err
		}
		return ld.LogRecordCount(), (&plog.ProtoMarshaler{}).LogsSize(ld), nil
	case "metrics":
		_, md, err := request.UnmarshalMetrics(v)
		if errors.Is(err, request.ErrInvalidFormat) {
			md, err = (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(v)
		}
		if err != nil {
			return 0, 0, err
		}
		return md.DataPointCount(), (&pmetric.ProtoMarshaler{}).MetricsSize(md), nil
	}
	return 0, 0, errors.New("unknown signal " + signal)
}

// entries lists the indexes a queue state holds, oldest first: the
// entries being sent when the process stopped, then read..write-1.
func (m queueMeta) entries(limit int) []uint64 {
	out := slices.Clone(m.dispatched)
	slices.Sort(out)
	for i := m.read; i < m.write && len(out) < limit; i++ {
		out = append(out, i)
	}
	return out
}

// itemIndex parses a queue entry's key.
func itemIndex(k string) (uint64, bool) {
	if k == "" || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	v, err := strconv.ParseUint(k, 10, 64)
	return v, err == nil
}
