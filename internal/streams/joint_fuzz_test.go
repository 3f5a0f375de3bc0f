package streams

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"
)

// FuzzPairCopyNeverPeer: a copy made of the fuzzer's measurements (its
// values multiples of 1/16, so that every sum is exact) and reads, the
// later writer joining after any of them, its points fed in any order,
// is never called a peer by any test of Pair (the joint test of count and
// sum included), nor, as delta chains, by a DeltaPair (deltaCopy). Nor is it by a Tracker (quietCopy) when it goes quiet:
// the copy and its elected writer export on their own timers, late and
// losing exports, until their process ends, and a restart goes on. Nor
// is a copy that shares its elected writer's start ever split from it
// (sharedCopy: identical values on one timer, or its own timer). Then
// the same Pair takes arbitrary histogram points (NaN, infinities, min
// above max) without panicking.
func FuzzPairCopyNeverPeer(f *testing.F) {
	f.Add([]byte{3, 20, 22, 21, 20, 23, 20, 22, 0x80, 0x7f, 1, 9, 2, 11, 4, 12, 6, 8, 7, 5})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		n := min(int(data[1])%48+1, len(data)-2)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(int8(data[2+i])) / 16
		}
		ops := data[2+n:]
		join := int(data[0]) % n // L counts vals[join:]
		const ms = uint64(time.Millisecond)
		startE, startL := uint64(time.Second), uint64(time.Second)+uint64(join)*10*ms+ms
		read := func(w, upto int) (Point, bool) {
			from := 0
			if w == 1 {
				from = join
			}
			if upto <= from {
				return Point{}, false
			}
			p := Point{Start: startE, Time: startE + uint64(upto)*10*ms + 5*ms, HasSum: true, HasMinMax: true, Min: math.Inf(1), Max: math.Inf(-1)}
			if w == 1 {
				p.Start = startL
			}
			for _, v := range vals[from:upto] {
				p.Value++
				p.Sum += v
				p.Min, p.Max = min(p.Min, v), max(p.Max, v)
			}
			return p, true
		}
		var p Pair
		for i := 0; i+1 < len(ops); i += 2 {
			pt, ok := read(int(ops[i]&1), int(ops[i+1])%(n+1))
			if !ok {
				continue
			}
			p.Add(histogram, pt)
			if p.Class() == ClassPeer {
				t.Fatalf("a copy (join after %d of %v) called a peer at point %d: %v", join, vals, i/2, p.Evidence())
			}
		}
		quietCopy(t, vals, join, ops)
		deltaCopy(t, vals, join, ops)
		slackCopy(t, vals, join, ops)
		sparseCopy(t, vals, join, ops)
		sharedCopy(t, vals, ops)
		// Hostile points: any bits in count, sum, min and max.
		for i := 0; i+33 <= len(data); i += 33 {
			b := data[i : i+33]
			f := func(k int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[1+8*k:])) }
			pt := Point{Start: startE, Time: startE + uint64(b[0])*ms, Value: math.Abs(f(0)), Sum: f(1), HasSum: true, Min: f(2), Max: f(3), HasMinMax: true}
			if b[0]&1 != 0 {
				pt.Start = startL
			}
			p.Add(histogram, pt)
			_ = p.Evidence().String()
		}
	})
}

// quietCopy feeds a Tracker with Auto the exports of a process's first
// reader E and a copy C joined after join measurements (one a second),
// each on its own timer (ops[0], ops[1]: 1 to 8 s; ops[2]: C's phase),
// until the process ends after ops[3] measurements; each export arrives up
// to a quarter of the shorter interval late and may be lost, never two in
// a row (ops[4:]); then a restart exports for QuietOneShot and more. C's
// points are never labelled nor its held point released: a copy that
// ends with its process is never a peer. The measurements are taken
// non-negative (a histogram's, as the API asks).
func quietCopy(t *testing.T, vals []float64, join int, ops []byte) {
	if len(ops) < 4 {
		return
	}
	n := len(vals)
	ivE, ivC := uint64(ops[0]%8+1)*sec, uint64(ops[1]%8+1)*sec
	end := uint64(join+1+int(ops[3])%n) * sec // C joined before it ended
	const base = 1000 * sec
	startE, startC := base, base+uint64(join)*sec
	jitter := ops[4:]
	type export struct {
		at uint64
		p  Point
	}
	var all []export
	k := 0
	emit := func(start, first, iv uint64, from int, stop uint64) {
		lost := false
		for tm := first; tm <= stop; tm += iv {
			b := byte(0)
			if len(jitter) > 0 {
				b = jitter[k%len(jitter)]
			}
			k++
			if b&1 != 0 && !lost {
				lost = true
				continue
			}
			lost = false
			p := Point{Start: start, Time: tm, HasSum: true, HasMinMax: true, Min: math.Inf(1), Max: math.Inf(-1)}
			for i := from; i < n && base+uint64(i)*sec+sec/4 <= tm; i++ { // measurement i at i s + 250 ms
				p.Value++
				v := math.Abs(vals[i]) // the Tracker seeds a pair with no min: a sum that falls is not compared only once a min < 0 is seen
				p.Sum += v
				p.Min, p.Max = min(p.Min, v), max(p.Max, v)
			}
			p.HasMinMax = p.Value > 0
			p.Fingerprint = uint64(tm)
			all = append(all, export{at: tm + uint64(b>>1)*min(ivE, ivC)/4/128, p: p})
		}
	}
	emit(startE, startE+ivE, ivE, 0, base+end)
	emit(startC, startC+uint64(ops[2])*ivC/256+sec/8, ivC, join, base+end)
	restart := base + end + sec
	for tm := restart + ivE; tm <= restart+uint64(QuietOneShot)+10*max(ivE, ivC); tm += ivE {
		all = append(all, export{at: tm, p: Point{Start: restart, Time: tm, Value: float64((tm - restart) / sec), Fingerprint: tm}})
	}
	slices.SortStableFunc(all, func(a, b export) int { return cmp.Compare(a.at, b.at) })
	s := newSimTracker(t)
	for _, e := range all {
		s.feed(histogram, e.p)
		if s.labelled[startC] {
			j, _ := s.tr.Judgement(ID{1}, startC)
			t.Fatalf("a copy (E every %s, C every %s, ended at %s) called a peer at %s: %s", time.Duration(ivE), time.Duration(ivC), time.Duration(end), time.Duration(e.p.Time-base), j)
		}
	}
}

// deltaCopy: the same reads as delta chains, each writer's points in its
// own order (a read at or before its previous one is skipped), the two
// writers' in any order: each point counts the measurements since the
// writer's previous read, with that interval's min and max. An export may
// be lost (ops bit 1): its measurements are in no point and the writer's
// next one goes on across the gap (AddAfterGap), as after intervals
// without measurements; or late (bits 1 and 2): it comes right after that
// next one (Fill), without its sum with bit 3. A read that finds no
// measurements sends nothing (bit 4, right after a point sent): the next
// point starts at it and goes on across that one empty interval
// (AddAfterEmpty, as when its export was seen). Measurement i is taken
// 3 ms after read i (at i·10 ms + 5 ms), so an empty read 2 ms after a
// read finds none. A DeltaPair never calls the later chain a peer.
func deltaCopy(t *testing.T, vals []float64, join int, ops []byte) {
	n := len(vals)
	const ms = uint64(time.Millisecond)
	base := uint64(time.Second)
	at := func(upto int) uint64 { return base + uint64(upto)*10*ms + 5*ms }
	prev := [2]int{0, join}
	start := [2]uint64{base, base + uint64(join)*10*ms + ms}
	var end [2]uint64   // the newest point fed
	var empty [2]uint64 // an empty read's time since it (0: none)
	var late [2][]Point
	var p DeltaPair
	for i := 0; i+1 < len(ops); i += 2 {
		w, upto := int(ops[i]&1), int(ops[i+1])%(n+1)
		if upto <= prev[w] {
			if upto == prev[w] && ops[i]&16 != 0 && end[w] != 0 && start[w] == end[w] {
				empty[w] = end[w] + 2*ms
				start[w] = empty[w]
			}
			continue
		}
		pt := deltaRead(start[w], at(upto), vals[prev[w]:upto])
		prev[w], start[w] = upto, pt.Time
		if ops[i]&2 != 0 && end[w] != 0 {
			if ops[i]&4 != 0 {
				if ops[i]&8 != 0 {
					pt.Sum, pt.HasSum = 0, false // a late point without its sum
				}
				late[w] = append(late[w][:0], pt) // late: it comes after the next
			}
			empty[w] = 0
			continue // lost, or late
		}
		switch {
		case end[w] != 0 && empty[w] != 0 && pt.Start == empty[w]:
			p.AddAfterEmpty(deltaHistogram, pt, end[w])
		case end[w] != 0 && pt.Start != end[w]:
			p.AddAfterGap(deltaHistogram, pt, end[w])
		default:
			p.Add(deltaHistogram, pt)
		}
		empty[w] = 0
		end[w] = pt.Time
		if len(late[w]) == 1 && late[w][0].Time == pt.Start {
			p.Fill(deltaHistogram, late[w][0])
		}
		late[w] = late[w][:0]
		if p.Class() == ClassPeer {
			t.Fatalf("a delta copy (join after %d of %v) called a peer at point %d: %v", join, vals, i/2, p.Evidence())
		}
	}
}

// slackCopy: the reads of deltaCopy as delta chains, each stamped up to
// 49 ms before the read it names (ops bits 5 to 7), as an SDK stamps a
// collection and then reads its aggregations; a writer's first read is
// stamped when it is made (its start is its reader's). The points arrive
// in the order of their reads, none lost. A DeltaPair never calls the
// later chain a peer: the measurements between two reads are bounded by
// the intervals that may hold them (Pair.within), not by the intervals
// the stamps alone say.
func slackCopy(t *testing.T, vals []float64, join int, ops []byte) {
	n := len(vals)
	const ms = uint64(time.Millisecond)
	base := uint64(time.Second)
	at := func(upto int) uint64 { return base + uint64(upto)*10*ms + 5*ms }
	prev := [2]int{0, join}
	start := [2]uint64{base, base + uint64(join)*10*ms + ms}
	type read struct {
		at uint64
		pt Point
	}
	var reads []read
	var fed [2]bool // the writer has read: its reads are stamped early
	for i := 0; i+1 < len(ops); i += 2 {
		w, upto := int(ops[i]&1), int(ops[i+1])%(n+1)
		if upto <= prev[w] {
			continue
		}
		stamp := at(upto)
		if fed[w] {
			stamp = max(stamp-uint64(ops[i]>>5)*7*ms, start[w]+1)
		}
		fed[w] = true
		pt := deltaRead(start[w], stamp, vals[prev[w]:upto])
		prev[w], start[w] = upto, pt.Time
		reads = append(reads, read{at(upto), pt})
	}
	slices.SortStableFunc(reads, func(a, b read) int { return cmp.Compare(a.at, b.at) })
	var p DeltaPair
	for i, r := range reads {
		p.Add(deltaHistogram, r.pt)
		if p.Class() == ClassPeer {
			t.Fatalf("a delta copy (join after %d of %v), stamps before reads, called a peer at point %d: %v", join, vals, i, p.Evidence())
		}
	}
}

// deltaRead is a histogram's delta point over (start, time] that counts
// the measurements vals (their absolute values: a histogram's).
func deltaRead(start, time uint64, vals []float64) Point {
	pt := Point{Start: start, Time: time, HasSum: true, Min: math.Inf(1), Max: math.Inf(-1)}
	for _, v := range vals {
		v = math.Abs(v)
		pt.Value++
		pt.Sum += v
		pt.Min, pt.Max = min(pt.Min, v), max(pt.Max, v)
	}
	pt.HasMinMax = pt.Value > 0
	return pt
}

// sparseCopy feeds a Tracker with Auto the delta exports of a process's
// first reader E and a copy C joined after join measurements, each on its
// own timer (ops[0], ops[1]: 1 to 8 s; ops[2]: C's phase), as the Python
// and Go SDKs send them: no delta point for an interval without
// measurements (measurement i, at i s + 250 ms, is taken only when vals[i]
// is not 0), and every export also carrying the reader's cumulative
// up-down counter, started when the reader began (its exports' other
// stream: exports.go). An export may be lost, both its points, never two
// in a row (ops[4:]), and arrives up to a quarter of the shorter interval
// late. C's points are never labelled nor any of its chains' held points
// released: the evidence of empty intervals never makes a copy a peer.
func sparseCopy(t *testing.T, vals []float64, join int, ops []byte) {
	if len(ops) < 4 {
		return
	}
	n := len(vals)
	ivE, ivC := uint64(ops[0]%8+1)*sec, uint64(ops[1]%8+1)*sec
	end := uint64(join+1+int(ops[3])%n) * sec
	const base = 1000 * sec
	jitter := ops[4:]
	type export struct {
		at   uint64
		p    Point
		copy bool
		up   bool // the up-down counter's point
	}
	var all []export
	k := 0
	emit := func(reader, first, iv uint64, from int, copy bool) {
		lost := false
		prev := reader
		for tm := first; tm <= base+end; tm += iv {
			b := byte(0)
			if len(jitter) > 0 {
				b = jitter[k%len(jitter)]
			}
			k++
			if b&1 != 0 && !lost {
				lost = true
				prev = tm // the next delta starts at this read: its counts are lost with it
				continue
			}
			lost = false
			at := tm + uint64(b>>1)*min(ivE, ivC)/4/128
			all = append(all, export{at: at, p: Point{Start: reader, Time: tm, Value: 1, Fingerprint: tm}, copy: copy, up: true})
			p := Point{Start: prev, Time: tm, Fingerprint: tm}
			for i := from; i < n && base+uint64(i)*sec+sec/4 <= tm; i++ {
				if vals[i] != 0 && base+uint64(i)*sec+sec/4 > prev {
					p.Value++
				}
			}
			prev = tm
			if p.Value > 0 {
				all = append(all, export{at: at, p: p, copy: copy})
			}
		}
	}
	startE, startC := base-sec/2, base+uint64(join)*sec
	emit(startE, startE+ivE, ivE, 0, false)
	// C reads 1 ms past the 1/256ths of its interval: never at one of
	// E's reads, a 0.5 s mark (two readers do not read at one instant;
	// points at one time and start are one writer's repeats).
	emit(startC, startC+uint64(ops[2])*ivC/256+sec/8+sec/1000, ivC, join, true)
	slices.SortStableFunc(all, func(a, b export) int { return cmp.Compare(a.at, b.at) })
	s := newDeltaSim(t)
	runs := map[uint64]bool{} // the copy's chains' possible run starts: its points' starts
	for _, e := range all {
		s.tr.NewScope(7) // one identity; each point its own export's
		if e.up {
			id := ID{2}
			if e.copy {
				id = ID{3}
			}
			s.tr.ObserveFrom(id, 9, upDown, e.p, 0)
			continue
		}
		if e.copy {
			runs[e.p.Start] = true
		}
		d := s.feed(deltaSum, e.p)
		if e.copy && d.Verdict == Label {
			t.Fatalf("a sparse copy (E every %s, C every %s) labelled, a peer, at %s: %v", time.Duration(ivE), time.Duration(ivC), time.Duration(e.p.Time-base), d)
		}
		for w := range runs {
			if j, ok := s.tr.Judgement(ID{1}, w); ok && j.Class == ClassPeer {
				t.Fatalf("a sparse copy (E every %s, C every %s): its chain of run %s a peer at %s: %v", time.Duration(ivE), time.Duration(ivC), time.Duration(w-base), time.Duration(e.p.Time-base), j)
			}
		}
	}
}
