package logstorageextension

// This file is the client's read cache: values larger than inlineMax that
// this process wrote, held in memory up to cache_bytes, oldest dropped
// first (client.cacheQ).

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
