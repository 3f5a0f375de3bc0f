package logstorageextension

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// recorder collects what opening a client reports cut.
type recorder struct{ ds []Discarded }

func (r *recorder) opts(segmentBytes int64) options {
	return options{segmentBytes: segmentBytes, discarded: func(d Discarded) { r.ds = append(r.ds, d) }}
}

// A write cut short by a crash at any byte of the newest segment's last
// record, past the mark, is cut at open: the client holds exactly what it held before
// that write, reports the cut as torn, keeps nothing aside, and writes on
// from there.
func TestTornTail(t *testing.T) {
	const seg = 4096
	ctx := context.Background()
	pristine := t.TempDir()
	var compacted int64
	c := mustOpen(t, pristine, options{segmentBytes: seg, compacted: func(n int64) { compacted += n }})
	before := map[string][]byte{}
	for i := range 30 {
		set(t, c, before, fmt.Sprintf("k%02d", i), val(i, 40+i*11))
	}
	if segmentCount(c) < 2 {
		t.Fatal("want several segments")
	}
	// The last write: a batch of a large Set, an inlined Set and a
	// Delete, all of which the cut must take back.
	last := []*storage.Operation{
		storage.SetOperation("x", val(100, 300)),
		storage.SetOperation("k00", val(101, 8)),
		storage.DeleteOperation("k01"),
	}
	if err := c.Batch(ctx, last...); err != nil {
		t.Fatal(err)
	}
	path, end := newestSegment(c)
	start := end - recordSize(last)
	if start < int64(len(segMagic)) || compacted != 0 {
		t.Fatalf("the last record is not at the end of the newest segment (start %d, compacted %d)", start, compacted)
	}
	if offs := records(t, path); offs[len(offs)-2] != start {
		t.Fatalf("the last record starts at %d, not %d", offs[len(offs)-2], start)
	}
	after := maps.Clone(before)
	after["x"], after["k00"] = val(100, 300), val(101, 8)
	delete(after, "k01")
	closeClient(t, c)
	name := filepath.Base(path)

	for n := start; n <= end; n++ {
		dir := t.TempDir()
		copyDir(t, pristine, dir)
		if err := os.Truncate(filepath.Join(dir, name), n); err != nil {
			t.Fatal(err)
		}
		// The crash came before the mark covered the last write (it is
		// written a second after the writes): as of the write before.
		setMark(t, dir, path, start)
		var r recorder
		c := mustOpen(t, dir, r.opts(seg))
		want := before
		switch n {
		case start:
			if len(r.ds) != 0 {
				t.Fatalf("cut at a record's end: %+v", r.ds)
			}
		case end:
			want = after
			if len(r.ds) != 0 {
				t.Fatalf("whole: %+v", r.ds)
			}
		default:
			if len(r.ds) != 1 {
				t.Fatalf("cut at %d: %d reports, want 1: %+v", n, len(r.ds), r.ds)
			}
			d := r.ds[0]
			if d.Segment != filepath.Join(dir, name) || d.Offset != start || d.Bytes != n-start || !d.Torn || d.KeptAs != "" || d.Cause == "" {
				t.Fatalf("cut at %d: %+v; want torn, %d bytes from %d, nothing kept", n, d, n-start, start)
			}
		}
		checkState(t, c, want, "x", "k01")
		wantSize := start
		if n == end {
			wantSize = end
		}
		if got := fileSize(t, filepath.Join(dir, name)); got != wantSize {
			t.Fatalf("cut at %d: the segment holds %d bytes, want %d", n, got, wantSize)
		}
		if m := damagedFiles(t, dir); len(m) != 0 {
			t.Fatalf("a torn tail was kept aside: %v", m)
		}
		// It writes on from the cut, and the cut stays cut.
		want = maps.Clone(want)
		set(t, c, want, "y", val(7, 100))
		closeClient(t, c)
		r = recorder{}
		c = mustOpen(t, dir, r.opts(seg))
		if len(r.ds) != 0 {
			t.Fatalf("cut at %d, reopened: %+v", n, r.ds)
		}
		checkState(t, c, want, "x", "k01")
		closeClient(t, c)
	}
}

// A new segment whose magic was cut short by a crash (created, nothing
// acknowledged in it) is removed at open and reported torn.
func TestTornMagic(t *testing.T) {
	pristine := t.TempDir()
	c := mustOpen(t, pristine, options{segmentBytes: 4096})
	want := map[string][]byte{}
	for i := range 20 {
		set(t, c, want, fmt.Sprintf("k%02d", i), val(i, 300))
	}
	path, _ := newestSegment(c)
	closeClient(t, c)
	var num uint64
	if _, err := fmt.Sscanf(filepath.Base(path), "%016x.log", &num); err != nil {
		t.Fatal(err)
	}
	next := segName(num + 1)
	for n := 0; n <= len(segMagic); n++ {
		dir := t.TempDir()
		copyDir(t, pristine, dir)
		if err := os.WriteFile(filepath.Join(dir, next), []byte(segMagic[:n]), 0o600); err != nil {
			t.Fatal(err)
		}
		var r recorder
		c := mustOpen(t, dir, r.opts(4096))
		if n == len(segMagic) || n == 0 {
			if len(r.ds) != 0 {
				t.Fatalf("an empty segment: %+v", r.ds)
			}
		} else {
			if len(r.ds) != 1 || !r.ds[0].Torn || r.ds[0].Offset != 0 || r.ds[0].Bytes != int64(n) || r.ds[0].KeptAs != "" || r.ds[0].Segment != filepath.Join(dir, next) {
				t.Fatalf("magic cut at %d: %+v; want one torn cut of %d bytes", n, r.ds, n)
			}
			if _, err := os.Stat(filepath.Join(dir, next)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("magic cut at %d: the segment is still there (%v)", n, err)
			}
		}
		checkState(t, c, want)
		if m := damagedFiles(t, dir); len(m) != 0 {
			t.Fatalf("kept aside: %v", m)
		}
		w := maps.Clone(want)
		set(t, c, w, "new", val(9, 3000))
		closeClient(t, c)
		c = mustOpen(t, dir, r.opts(4096))
		checkState(t, c, w)
		closeClient(t, c)
	}
}

// olderSegments writes distinct keys (all live: nothing is compacted)
// until there are at least three segments.
func olderSegments(t *testing.T, dir string, valueSize int) (*client, map[string][]byte) {
	t.Helper()
	c := mustOpen(t, dir, options{segmentBytes: 4096})
	want := map[string][]byte{}
	for i := 0; segmentCount(c) < 4; i++ {
		set(t, c, want, fmt.Sprintf("k%03d", i), val(i, valueSize))
	}
	// Something in the newest segment.
	set(t, c, want, "newest", val(999, 100))
	return c, want
}

// keysBetween are the keys whose value is in segment num between offsets
// from and to.
func keysBetween(t *testing.T, c *client, want map[string][]byte, num uint64, from, to int64) []string {
	t.Helper()
	var ks []string
	for k := range want {
		if l := where(t, c, k); l.seg == num && l.off >= from && l.off < to {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// keysIn are the keys whose value is in segment num from offset off on.
func keysIn(t *testing.T, c *client, want map[string][]byte, num uint64, off int64) []string {
	t.Helper()
	var ks []string
	for k := range want {
		if l := where(t, c, k); l.seg == num && l.off >= off {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// A bit flipped in a record in the middle of an older segment cuts that
// segment there: the bytes from that record on are kept aside (as they
// are on disk), the writes in them are lost, reported, and the later
// segments still apply, a value written again in them too.
func TestBitFlipInOlderSegment(t *testing.T) {
	dir := t.TempDir()
	c, want := olderSegments(t, dir, 200)
	first := filepath.Join(dir, segName(1))
	offs := records(t, first)
	cutAt, end := offs[len(offs)/2], offs[len(offs)/2+1]
	// Two records damaged, one after the other: the bytes of both are one
	// damaged range, and the records after them are read again (resync).
	lost := keysBetween(t, c, want, 1, cutAt, offs[len(offs)/2+2])
	if len(lost) != 2 {
		t.Fatalf("lost %v", lost)
	}
	// One of the lost keys is written again later: that survives.
	set(t, c, want, lost[0], val(500, 150))
	for _, k := range lost[1:] {
		delete(want, k)
	}
	if where(t, c, lost[0]).seg == 1 {
		t.Fatal("written again in segment 1")
	}
	flipBit(t, first, end+recHeader+5, 3)
	end = offs[len(offs)/2+2]
	closeClient(t, c)
	size := fileSize(t, first)
	flipBit(t, first, cutAt+recHeader+5, 3)
	damaged, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}

	var r recorder
	c = mustOpen(t, dir, r.opts(4096))
	if len(r.ds) != 1 {
		t.Fatalf("%d reports: %+v", len(r.ds), r.ds)
	}
	d := r.ds[0]
	if d.Segment != first || d.Offset != cutAt || d.Bytes != end-cutAt || d.Torn || !strings.HasPrefix(d.KeptAs, first+".damaged-") || !strings.Contains(d.Cause, "checksum") {
		t.Fatalf("%+v; want damage from %d, %d bytes, kept aside", d, cutAt, end-cutAt)
	}
	kept, err := os.ReadFile(d.KeptAs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, damaged[cutAt:end]) {
		t.Fatalf("kept %d bytes, not the %d damaged ones", len(kept), end-cutAt)
	}
	if got := fileSize(t, first); got != size-(end-cutAt) {
		t.Fatalf("segment 1 holds %d bytes, want %d: rewritten without the damaged range", got, size-(end-cutAt))
	}
	checkState(t, c, want, lost...)
	if m := damagedFiles(t, dir); len(m) != 1 || m[0] != d.KeptAs {
		t.Fatalf("kept aside: %v", m)
	}
	// Reported once: the next open finds nothing to cut.
	set(t, c, want, "after", val(3, 3000))
	closeClient(t, c)
	r = recorder{}
	c = mustOpen(t, dir, r.opts(4096))
	defer closeClient(t, c)
	if len(r.ds) != 0 {
		t.Fatalf("reopened: %+v", r.ds)
	}
	checkState(t, c, want, lost...)
}

// A segment that does not start with the magic: its header is damage
// (kept aside, reported) and its records are read from the first whole
// one (resync); a file with none (junk) is kept aside whole and removed.
// The other segments apply.
func TestBadMagic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string) string // the bad file
		lostSeg uint64
	}{
		{"older", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, segName(2))
			flipBit(t, p, 0, 0)
			return p
		}, 0},
		{"a file of junk after the newest", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, segName(9))
			if err := os.WriteFile(p, bytes.Repeat([]byte("junk"), 25), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, 0},
		{"short junk after the newest", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, segName(9))
			if err := os.WriteFile(p, []byte("DTL0G"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, want := olderSegments(t, dir, 200)
			lost := keysIn(t, c, want, tc.lostSeg, 0)
			for _, k := range lost {
				delete(want, k)
			}
			closeClient(t, c)
			bad := tc.damage(t, dir)
			content, err := os.ReadFile(bad)
			if err != nil {
				t.Fatal(err)
			}
			var r recorder
			c = mustOpen(t, dir, r.opts(4096))
			if len(r.ds) != 1 {
				t.Fatalf("%d reports: %+v", len(r.ds), r.ds)
			}
			d := r.ds[0]
			junk := tc.name != "older"
			wantBytes := int64(len(segMagic)) // the header; the records after it are read
			if junk {
				wantBytes = int64(len(content))
			}
			if d.Segment != bad || d.Offset != 0 || d.Bytes != wantBytes || d.Torn || !strings.Contains(d.Cause, "magic") {
				t.Fatalf("%+v; want %d bytes from 0 reported damaged", d, wantBytes)
			}
			kept, err := os.ReadFile(d.KeptAs)
			if err != nil || !bytes.Equal(kept, content[:wantBytes]) {
				t.Fatalf("kept aside %q: %d bytes, %v; want the file's first %d", d.KeptAs, len(kept), err, wantBytes)
			}
			if _, err := os.Stat(bad); junk != errors.Is(err, os.ErrNotExist) {
				t.Fatalf("junk %v, the file after the open: %v", junk, err)
			}
			checkState(t, c, want, lost...)
			set(t, c, want, "after", val(4, 5000))
			closeClient(t, c)
			r = recorder{}
			c = mustOpen(t, dir, r.opts(4096))
			defer closeClient(t, c)
			if len(r.ds) != 0 {
				t.Fatalf("reopened: %+v", r.ds)
			}
			checkState(t, c, want, lost...)
		})
	}
}

// A record's length field that says more than a record may hold, or
// more than its segment holds, is damage (nothing is allocated for it),
// even in the newest segment when the bytes after it hold a whole record
// (a damaged length, not a write cut short); in the newest segment a
// record that reaches past the end is torn only when the bytes after its
// header are not a whole record.
func TestBadLength(t *testing.T) {
	for _, tc := range []struct {
		name   string
		newest bool
		middle bool // else the segment's last record
		length func(n uint32) uint32
	}{
		{"0xFFFFFFFF in an older segment", false, true, func(uint32) uint32 { return 0xFFFFFFFF }},
		{"0xFFFFFFFF ending the newest", true, false, func(uint32) uint32 { return 0xFFFFFFFF }},
		{"0xFFFFFFFF in the newest", true, true, func(uint32) uint32 { return 0xFFFFFFFF }},
		{"1 GiB in an older segment", false, true, func(uint32) uint32 { return maxRecord }},
		{"a bit flipped in the newest", true, true, func(n uint32) uint32 { return n ^ 1<<20 }},
		{"a bit flipped ending the newest", true, false, func(n uint32) uint32 { return n ^ 1<<9 }},
		{"a bit flipped ending an older segment", false, false, func(n uint32) uint32 { return n ^ 1<<9 }},
		{"a bit flipped making it shorter", true, true, func(n uint32) uint32 { return n ^ 1<<2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, want := olderSegments(t, dir, 100)
			// Several records in the newest segment.
			for i := range 5 {
				set(t, c, want, fmt.Sprintf("n%d", i), val(i, 100))
			}
			num := uint64(1)
			if tc.newest {
				c.mu.Lock()
				num = c.segs[len(c.segs)-1].num
				c.mu.Unlock()
			}
			path := filepath.Join(dir, segName(num))
			offs := records(t, path)
			i := len(offs) - 2
			if tc.middle {
				i = len(offs) / 2
			}
			at, recEnd := offs[i], offs[i+1]
			// That record only: the next one is read again (resync).
			lost := keysBetween(t, c, want, num, at, recEnd)
			for _, k := range lost {
				delete(want, k)
			}
			closeClient(t, c)
			size := fileSize(t, path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			putUint32(t, path, at, tc.length(binary.LittleEndian.Uint32(b[at:])))

			var r recorder
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			c = mustOpen(t, dir, r.opts(4096))
			runtime.ReadMemStats(&ms1)
			defer closeClient(t, c)
			if a := ms1.TotalAlloc - ms0.TotalAlloc; a > 64<<20 {
				t.Fatalf("opening allocated %d bytes", a)
			}
			if len(r.ds) != 1 {
				t.Fatalf("%d reports: %+v", len(r.ds), r.ds)
			}
			d := r.ds[0]
			if d.Segment != path || d.Offset != at || d.Bytes != recEnd-at || d.Torn || d.KeptAs == "" {
				t.Fatalf("%+v; want damage from %d, %d bytes, kept aside", d, at, recEnd-at)
			}
			_ = size
			checkState(t, c, want, lost...)
		})
	}
}

// Zeros where records should be (a file the file system extended but
// whose data it never wrote) are damage: no write appends a record of no
// bytes, and zeros read as one (length 0, checksum 0) would let a region
// of lost records pass without a word.
func TestZeroedRecords(t *testing.T) {
	t.Run("a record zeroed in an older segment", func(t *testing.T) {
		dir := t.TempDir()
		c := mustOpen(t, dir, options{segmentBytes: 4096})
		want := map[string][]byte{}
		set(t, c, want, "a", val(1, 50))
		// A record of 32 bytes: zeroed, four empty records.
		set(t, c, want, "z", val(2, 20))
		l := where(t, c, "z")
		set(t, c, want, "b", val(3, 50))
		for i := 0; segmentCount(c) < 2; i++ {
			set(t, c, want, fmt.Sprintf("k%02d", i), val(i, 500))
		}
		at := recordStart("z", l)
		lost := keysBetween(t, c, want, 1, at, at+32) // z only: b is read again (resync)
		closeClient(t, c)
		path := filepath.Join(dir, segName(1))
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 32), at); err != nil {
			t.Fatal(err)
		}
		f.Close()
		size := fileSize(t, path)
		var r recorder
		c = mustOpen(t, dir, r.opts(4096))
		defer closeClient(t, c)
		if len(r.ds) != 1 || r.ds[0].Offset != at || r.ds[0].Bytes != 32 || r.ds[0].Torn || r.ds[0].KeptAs == "" {
			t.Fatalf("%+v; want damage from %d, 32 bytes (size %d)", r.ds, at, size)
		}
		if !slices.Equal(lost, []string{"z"}) {
			t.Fatalf("lost %v", lost)
		}
		for _, k := range lost {
			delete(want, k)
		}
		checkState(t, c, want, lost...)
	})
	t.Run("zeros after the newest segment's records", func(t *testing.T) {
		dir := t.TempDir()
		c := mustOpen(t, dir, options{segmentBytes: 4096})
		want := map[string][]byte{}
		set(t, c, want, "a", val(1, 50))
		path, size := newestSegment(c)
		closeClient(t, c)
		if err := os.Truncate(path, size+4096); err != nil {
			t.Fatal(err)
		}
		var r recorder
		c = mustOpen(t, dir, r.opts(4096))
		if len(r.ds) != 1 || r.ds[0].Offset != size || r.ds[0].Bytes != 4096 || r.ds[0].Torn || r.ds[0].KeptAs == "" {
			t.Fatalf("%+v; want damage from %d", r.ds, size)
		}
		kept, err := os.ReadFile(r.ds[0].KeptAs)
		if err != nil || !bytes.Equal(kept, make([]byte, 4096)) {
			t.Fatalf("kept %d bytes, %v", len(kept), err)
		}
		checkState(t, c, want)
		set(t, c, want, "b", val(2, 100))
		closeClient(t, c)
		c = mustOpen(t, dir, r.opts(4096))
		defer closeClient(t, c)
		checkState(t, c, want)
	})
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func damagedFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.damaged-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func flipBit(t *testing.T, path string, off int64, bit uint) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 1 << bit
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func putUint32(t *testing.T, path string, off int64, v uint32) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint32(nil, v), off); err != nil {
		t.Fatal(err)
	}
}

// recordStart is where the record of a single Set of key holding a
// value at l begins.
func recordStart(key string, l loc) int64 {
	return l.off - int64(recHeader+1+uvarintLen(len(key))+len(key)+uvarintLen(l.n))
}

// setMark writes the client's mark in dir as segment path's size.
func setMark(t *testing.T, dir, path string, size int64) {
	t.Helper()
	var num uint64
	if _, err := fmt.Sscanf(filepath.Base(path), "%016x.log", &num); err != nil {
		t.Fatal(err)
	}
	var b [24]byte
	binary.LittleEndian.PutUint64(b[:], num)
	binary.LittleEndian.PutUint64(b[8:], uint64(size))
	binary.LittleEndian.PutUint32(b[16:], 1)
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
	if err := os.WriteFile(filepath.Join(dir, markFile), b[:], 0o600); err != nil {
		t.Fatal(err)
	}
}
