package nested

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// longName is a distinct n-byte string of its own allocation, as a decoded
// request's span name is.
func longName(n, i int) string {
	b := make([]byte, n)
	for j := range b {
		b[j] = 'a' + byte(j%26)
	}
	copy(b[n-8:], []byte{byte(i), byte(i >> 8), byte(i >> 16), '!', '!', '!', '!', '!'})
	return string(b)
}

// TestDetectorHoldsBoundedBytes: spans with 1 MB names (which no span
// ever pairs with) leave the detector within MaxBytes plus its fixed
// part, after a GC; before, it kept every name whole: 256 MB here.
func TestDetectorHoldsBoundedBytes(t *testing.T) {
	const (
		spans    = 256
		perBatch = 16
		maxBytes = 64 << 10 // about 100 spans with clipped names
	)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	d := NewDetector(Options{MaxSpans: 1000, MaxBytes: maxBytes})
	for b := 0; b < spans/perBatch; b++ {
		var ss []s
		for i := range perBatch {
			n := b*perBatch + i
			// Each span waits for a parent that never comes: all are held.
			ss = append(ss, s{svc: "api", scope: "o", trace: byte(n), id: byte(n%200 + 1), parent: 255,
				name: longName(1<<20, n), kind: server, start: 0, end: 1})
		}
		d.Add(build(ss...))
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	st := d.Stats()
	// The ring of MaxSpans records and its index are allocated
	// whole; the findings, the span counts per service and the interner
	// add under 4 MB at most.
	ring := int64(1000*recSize + indexLen(1000)*ientrySize)
	bound := int64(maxBytes) + ring + 4<<20
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grown > bound {
		t.Fatalf("heap grew by %d bytes after %d spans with 1 MB names, want at most %d (max_bytes %d); stats %+v", grown, spans, bound, maxBytes, st)
	}
	if st.Bytes > maxBytes || st.Held == 0 || st.EvictedBytes == 0 || st.Evicted != 0 || st.Held+st.EvictedBytes != spans {
		t.Fatalf("stats %+v: want bytes ≤ %d, evictions for bytes only, held + evicted = %d", st, maxBytes, spans)
	}
	runtime.KeepAlive(d)
}

// TestLongStringsCompareWhole: names past MaxStringBytes are held clipped,
// yet two of them pair only when they are equal whole.
func TestLongStringsCompareWhole(t *testing.T) {
	a, b := longName(4096, 1), longName(4096, 2) // the same first 4088 bytes
	td := build(
		s{svc: "api", scope: "o1", id: 1, name: a, kind: server, start: 0, end: 10},
		s{svc: "api", scope: "o2", id: 2, parent: 1, name: b, kind: server, start: 0, end: 10},
		s{svc: "api", scope: "o1", trace: 2, id: 1, name: a, kind: server, start: 0, end: 10},
		s{svc: "api", scope: "o2", trace: 2, id: 2, parent: 1, name: a, kind: server, start: 0, end: 10},
	)
	rep := Detect(td, Options{})
	if len(rep.Findings) != 1 || rep.Findings[0].Occurrences != 1 || rep.Findings[0].Examples[0].TraceID != tid(2).String() {
		t.Fatalf("findings %+v: want one pair, in trace 2 (equal names) only", rep.Findings)
	}
	n := rep.Findings[0].Name
	if len(n) > MaxStringBytes || !strings.HasPrefix(n, a[:200]) || !strings.Contains(n, "…") {
		t.Fatalf("finding name %q (%d bytes): want a's prefix, \"…\" and a hash within %d bytes", n, len(n), MaxStringBytes)
	}
}

func TestClip(t *testing.T) {
	short := strings.Repeat("é", MaxStringBytes/2)
	if clip(short) != short {
		t.Fatal("a string of MaxStringBytes was changed")
	}
	long := strings.Repeat("é", MaxStringBytes) // 2 bytes a rune
	c := clip(long)
	if len(c) > MaxStringBytes || !utf8.ValidString(c) {
		t.Fatalf("clip: %d bytes, valid UTF-8 %v", len(c), utf8.ValidString(c))
	}
	if clip(long+"x") == c || clip(long) != c {
		t.Fatal("clip is not a function of the whole string")
	}
}

// TestDetectorBoundsRandom: whatever arrives, in whatever order and size,
// the detector holds at most MaxSpans spans and MaxBytes bytes (or the one
// span just added), its count of bytes is the sum over the spans it holds,
// and its indexes name held spans only.
func TestDetectorBoundsRandom(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		o := Options{MaxSpans: 1 + r.IntN(30), MaxBytes: 1 + r.IntN(8000)}
		d := NewDetector(o)
		for range 60 {
			var ss []s
			for range 1 + r.IntN(8) {
				ss = append(ss, s{svc: "api", scope: []string{"a", "b"}[r.IntN(2)], trace: byte(1 + r.IntN(3)),
					id: byte(1 + r.IntN(40)), parent: byte(r.IntN(40)),
					name: strings.Repeat("x", r.IntN(600)), kind: []ptrace.SpanKind{server, internal}[r.IntN(2)],
					start: 0, end: 1 + float64(r.IntN(3))})
			}
			d.Add(build(ss...))
			st := d.Stats()
			byKey := d.byKeyMap(t)
			sum := 0
			for i := range d.n {
				sum += d.recs[(d.head+i)%int32(len(d.recs))].bytes()
			}
			if st.Held > o.MaxSpans || (st.Bytes > o.MaxBytes && st.Held > 1) || st.Bytes != sum || int(d.n) != len(byKey) || st.Held != len(byKey) {
				t.Fatalf("seed %d, options %+v: stats %+v, %d held in the ring, %d bytes summed", seed, o, st, d.n, sum)
			}
			for _, slot := range byKey {
				if (slot-d.head+int32(len(d.recs)))%int32(len(d.recs)) >= d.n {
					t.Fatalf("seed %d: byKey names slot %d outside the held ones", seed, slot)
				}
			}
			for _, m := range []map[spanKey][]int32{d.listMap(t, waitingKind), d.listMap(t, sibsKind)} {
				for _, l := range m {
					if len(l) == 0 {
						t.Fatalf("seed %d: a live list of no held span", seed)
					}
					for _, slot := range l {
						if byKey[d.recs[slot].key] != slot {
							t.Fatalf("seed %d: a list names a span no longer held", seed)
						}
					}
				}
			}
		}
	}
}
