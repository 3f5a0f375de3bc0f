package logstorageextension

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// This file decodes a record's operations (the format is in store.go) and
// applies them to the client's index, at open (replay) and after each
// write.

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
