package streams

// Exports seen (docs/metrics.md, "Empty intervals, known from the
// export"). An SDK
// reads all of a reader's instruments at once and stamps every point of
// that export with one time: a writer's export at time T is the points of
// its identity (resource) whose time is exactly T, whatever their scope or
// metric. A delta chain's point that goes on across one interval its
// writer sent nothing for starts at such a time, the read that found no
// measurements for it. If that export arrived with other points, the
// interval was empty, not an export lost with its counts: nothing is
// missing from the chain's totals, and the bounds a lost export could
// have broken (Pair.gapped) still hold. If it did not arrive (lost, or
// not here yet), nothing is known, and the gap is a gap.
//
// Across several intervals the reads before the last are at times not
// known exactly, but each export is its reader's: its cumulative points
// carry the reader's own start (an SDK's cumulative aggregation starts
// when its reader began keeping it, so a second reader in one process has
// another), and a reader's exports, in order, are a chain. The record
// links each export that has a cumulative point to its reader's previous
// one (the start of its first cumulative point names the reader): a gap
// of k intervals whose last export, walked back k links, one interval
// each, comes to the export of the chain's newest point, had every
// export in between arrive, none with a point of the stream.
//
// exportTimes remembers the newest (identity, time) pairs seen, at most
// max: past it the oldest is forgotten (counted), so that an export is
// remembered while a gateway takes in max exports after it. The record
// starts with the first delta point judged (a tracker of cumulative
// streams only keeps none).
type exportTimes struct {
	max  int
	on   bool
	ring []uint64 // keys, oldest at next once full
	next int
	set  map[uint64]exportLink
	// newest is each reader's newest export (its time and key), by
	// readerKey; a reader goes with its newest export.
	newest    map[uint64]readerExport
	last      uint64 // the newest key added: one export's points share it
	lastRead  bool   // that export's reader is known
	forgotten uint64
	// before is the newest export's first cumulative point while the
	// record is off: the export of the first delta point judged names
	// its reader by it when that point came first (its up-down counter).
	before struct{ identity, time, start uint64 }
}

// exportLink is what the record keeps of one export: its reader (0: none
// known yet) and the time of that reader's previous export (0: none).
type exportLink struct{ reader, prev uint64 }

type readerExport struct{ time, key uint64 }

// readerKey names a reader: its identity and the start of the first
// cumulative point of its exports.
func readerKey(identity, start uint64) uint64 { return exportKey(identity^0x5bd1e995, start) }

// exportKey mixes an identity and a time into one key (a 64-bit
// finalizer, so that times a whole interval apart do not cluster); a
// collision would take an export for another's: 1 in 2^64 per lookup.
func exportKey(identity, time uint64) uint64 {
	x := identity ^ (time * 0x9e3779b97f4a7c15)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x | 1
}

// add records that identity exported a point at time, and returns its key
// when it was not recorded yet (0: it was).
func (e *exportTimes) add(identity, time uint64) uint64 {
	k := exportKey(identity, time)
	if k == e.last {
		return 0
	}
	e.last, e.lastRead = k, false
	if _, ok := e.set[k]; ok {
		return 0 // an export met again (its points in two requests): read names its reader if none did
	}
	if e.set == nil {
		n := min(e.max, 1024)
		e.set, e.newest, e.ring = make(map[uint64]exportLink, n), map[uint64]readerExport{}, make([]uint64, 0, n)
	}
	if len(e.ring) < e.max {
		e.ring = append(e.ring, k)
	} else {
		if old := e.ring[e.next]; old != 0 {
			if l, ok := e.set[old]; ok {
				e.drop(old, l)
				e.forgotten++
			}
		}
		e.ring[e.next] = k
		e.next = (e.next + 1) % e.max
	}
	e.set[k] = exportLink{}
	return k
}

// drop removes export k, and its reader with it when k is the reader's
// newest (the reader's next export starts its chain afresh).
func (e *exportTimes) drop(k uint64, l exportLink) {
	delete(e.set, k)
	if l.reader != 0 && e.newest[l.reader].key == k {
		delete(e.newest, l.reader)
	}
}

// read names the reader of the newest export by p, its first cumulative
// point, and links the export to that reader's previous one.
func (e *exportTimes) read(identity uint64, p Point) {
	if e.lastRead || e.last == 0 {
		return
	}
	e.lastRead = true
	l, ok := e.set[e.last]
	if !ok || l.reader != 0 {
		return
	}
	r := readerKey(identity, p.Start)
	l.reader = r
	if n, ok := e.newest[r]; ok && n.time < p.Time {
		l.prev = n.time
	}
	e.set[e.last] = l
	e.newest[r] = readerExport{time: p.Time, key: e.last}
}

// forget takes back an export recorded by a request the next component
// refused (Tracker.Undo): its points were not delivered, so its export is
// not evidence that a stream it had a point of had none. Its slot in the
// ring stays, to be reused in turn.
func (e *exportTimes) forget(k uint64) {
	if l, ok := e.set[k]; ok {
		e.drop(k, l)
	}
	if e.last == k {
		e.last = 0
	}
}

// alive says whether the reader of identity's export at time has exported
// since: a writer whose reads found nothing to count, or whose exports
// holding counts were lost, but not a stopped one.
func (e *exportTimes) alive(identity, time uint64) bool {
	if identity == 0 || e.set == nil {
		return false
	}
	l, ok := e.set[exportKey(identity, time)]
	if !ok || l.reader == 0 {
		return false
	}
	n, ok := e.newest[l.reader]
	return ok && n.time > time
}

// observe records p's export when the record is on (and turns it on at
// the first delta point judged); it returns the export's key when it was
// recorded now (0: it was before, or is not).
func (e *exportTimes) observe(identity uint64, shape Shape, p Point) uint64 {
	if identity == 0 || e.max == 0 {
		return 0
	}
	read := shape.Cumulative() && p.Start != 0 && p.Start < p.Time
	if !e.on {
		if !JudgedDelta(shape) {
			if b := &e.before; read && (b.time != p.Time || b.identity != identity) {
				b.identity, b.time, b.start = identity, p.Time, p.Start
			}
			return 0
		}
		e.on = true
		k := e.add(identity, p.Time)
		if b := e.before; b.identity == identity && b.time == p.Time {
			e.read(identity, Point{Start: b.start, Time: b.time})
		}
		return k
	}
	k := e.add(identity, p.Time)
	if read {
		e.read(identity, p)
	}
	return k
}

// emptyGap says whether the intervals a delta chain skipped were empty:
// the chain's newest point ended at end, its timer's interval is iv, and
// its next point starts at start, whole intervals on, where its writer's
// export arrived. One interval: that export seen. Several: that export's
// reader's exports walked back, one interval each, come to end's export.
// Only with the chain's own interval (first 0): while the chain has sent
// only its first interval (first, its length, with the stream's interval
// standing in) the writer's interval is not known, and two of its reads
// may lie in what looks like one interval.
func (e *exportTimes) emptyGap(identity, iv, first, end, start uint64) bool {
	if iv == 0 || start <= end || first != 0 {
		return false
	}
	k := (start - end + iv/2) / iv
	if k == 0 || k > GridMaxSkip {
		return false
	}
	l, ok := e.set[exportKey(identity, start)]
	if identity == 0 || !ok {
		return false
	}
	if k == 1 {
		return true
	}
	t, tol := start, GridSlack+iv/GridDrift
	for range k {
		if l.reader == 0 || l.prev == 0 || l.prev >= t {
			return false
		}
		if step := t - l.prev; step+tol < iv || step > iv+tol {
			return false
		}
		r := l.reader
		t = l.prev
		if l, ok = e.set[exportKey(identity, t)]; !ok || l.reader != r {
			return false
		}
	}
	return t == end
}
