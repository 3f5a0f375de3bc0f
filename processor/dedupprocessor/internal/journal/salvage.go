package journal

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Salvaged is what Salvage found of one journal.
type Salvaged struct {
	// MetaLost says that no readable meta record was found: the range of
	// segments was taken from the segments found.
	MetaLost bool
	// Segments were read whole (and, in format 2, their checksum
	// matched); Lost were not; Unverified are format 1 segments, kept
	// without a checksum to check.
	Segments, Lost, Unverified int
	// Entries the salvaged insert segments hold.
	Entries int
}

// Salvage rebuilds the journal under prefix from what a damaged storage
// file still holds: copies(key) returns every value found for key (the
// reachable one first), keys lists every key found. Segment records are
// written once and never changed, so any copy of one is it; the meta
// record changes at every append, and the newest copy found (highest
// next, then first) is taken. It returns the records to store: the
// readable segments as they were and a meta record (format 2) naming
// their range; a segment lost is left out, and Open skips and counts it.
func Salvage(prefix string, recordSize int, copies func(key string) [][]byte, keys []string) (map[string][]byte, Salvaged) {
	var r Salvaged
	j := &Journal{opt: Options{Prefix: prefix}}
	var m Meta
	found := false
	for _, v := range copies(j.metaKey()) {
		if c, ok := DecodeMeta(v); ok && (!found || c.Next > m.Next || (c.Next == m.Next && c.First > m.First)) {
			m, found = c, true
		}
	}
	if !found {
		// The range from the segments found; the newest are in parts
		// with a checksum.
		r.MetaLost = true
		lo, hi, any := uint64(0), uint64(0), false
		for _, k := range keys {
			rest, ok := strings.CutPrefix(k, prefix+"c/")
			if !ok || len(rest) != 20 {
				continue
			}
			n, err := strconv.ParseUint(rest, 10, 64)
			if err != nil {
				continue
			}
			if !any || n < lo {
				lo = n
			}
			if !any || n >= hi {
				hi = n + 1
			}
			any = true
		}
		if !any {
			return map[string][]byte{}, r
		}
		if hi-lo > maxParts*16 {
			lo = hi - maxParts*16
		}
		m = Meta{First: lo, Next: hi}
	}
	j.partsFrom, j.sumsFrom = m.PartsFrom, m.SumsFrom
	// The segments kept are renumbered from m.First without gaps, in
	// order, so that the salvaged journal is whole (and checks as such
	// at the next start). Their formats stay in order: whole ones, then
	// format 1 parts, then format 2.
	type kept struct {
		whole   []byte
		head    []byte
		payload [][]byte
	}
	var keep []kept
	for n := m.First; n < m.Next; n++ {
		if n < m.PartsFrom {
			vs := copies(j.segKey(n))
			if len(vs) == 0 || len(vs[0]) < 8 {
				r.Lost++
				continue
			}
			keep = append(keep, kept{whole: vs[0]})
			r.Segments++
			r.Unverified++
			r.Entries += entriesOf(vs[0][:8], len(vs[0])-8, recordSize)
			continue
		}
		want := headerLen
		if n >= m.SumsFrom {
			want = sumHeaderLen
		}
		ok := false
		for _, h := range copies(j.headKey(n)) {
			if len(h) != want {
				continue
			}
			parts := int(binary.LittleEndian.Uint32(h[8:]))
			if parts > maxParts {
				continue
			}
			var payload [][]byte
			size := 0
			for i := range parts {
				vs := copies(j.partKey(n, i))
				if len(vs) == 0 {
					break
				}
				payload = append(payload, vs[0])
				size += len(vs[0])
			}
			if len(payload) != parts {
				continue
			}
			if want == sumHeaderLen && segmentSum(binary.LittleEndian.Uint64(h), parts, payload...) != binary.LittleEndian.Uint32(h[12:]) {
				continue
			}
			keep = append(keep, kept{head: h, payload: payload})
			if want == headerLen {
				r.Unverified++
			}
			r.Segments++
			r.Entries += entriesOf(h[:8], size, recordSize)
			ok = true
			break
		}
		if !ok {
			r.Lost++
		}
	}
	out := map[string][]byte{}
	nm := Meta{First: m.First, Next: m.First + uint64(len(keep))}
	nm.PartsFrom, nm.SumsFrom = nm.Next, nm.Next
	for i, k := range keep {
		n := m.First + uint64(i)
		switch {
		case k.whole != nil:
			out[j.segKey(n)] = k.whole
			continue
		case len(k.head) == headerLen:
			nm.PartsFrom = min(nm.PartsFrom, n)
		default:
			nm.PartsFrom = min(nm.PartsFrom, n)
			nm.SumsFrom = min(nm.SumsFrom, n)
		}
		out[j.headKey(n)] = k.head
		for p, v := range k.payload {
			out[j.partKey(n, p)] = v
		}
	}
	out[j.metaKey()] = nm.Encode()
	return out, r
}

func entriesOf(stamp []byte, payload, recordSize int) int {
	if binary.LittleEndian.Uint64(stamp)&forgetBit != 0 || recordSize < 1 {
		return 0
	}
	return payload / recordSize
}
