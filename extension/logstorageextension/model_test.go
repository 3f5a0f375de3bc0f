package logstorageextension

import (
	"bytes"
	"context"
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// The model test runs a program (bytes, so that the fuzzer can write
// them) of Sets, Deletes, Gets, Batches mixing them, and close-and-reopen
// points against a client with small segments, so that segments roll and
// the oldest is compacted, and checks after every step that the client
// holds what a map holds, that its bookkeeping (live bytes per segment,
// total bytes, file sizes) is right, and after every write that the disk
// holds at most twice the current values, a segment and a record.
// TestStoreModel reads every key back after every step; FuzzStore, to
// run fast enough to be minimized, reads back what a step touched and
// every key when values may have moved.

const modelSegmentBytes = 4096

// modelKeys: the queue's keys (indexes and items), the empty key and a
// key longer than a value.
var modelKeys = func() []string {
	ks := []string{"", "a", "b", "ri", "wi", "di", "meta"}
	for i := range 16 {
		ks = append(ks, strconv.Itoa(i))
	}
	return append(ks, strings.Repeat("a long key ", 30))
}()

type prog struct {
	b []byte
	i int
}

func (p *prog) done() bool { return p.i >= len(p.b) }

func (p *prog) next() byte {
	if p.i >= len(p.b) {
		return 0
	}
	p.i++
	return p.b[p.i-1]
}

type modelRun struct {
	t   testing.TB
	dir string
	c   *client
	// full: every step reads every key back; else a step reads the
	// keys it touched, and every key only when values may have moved
	// (a compaction, a reopen, the end), checking the index against
	// the model in between.
	full       bool
	touched    []string
	compaction int // compactions so far
	m          map[string][]byte
	seq        uint64
	maxRec     int64 // the largest record written
	steps      int
}

func runModel(t testing.TB, program []byte, full bool) {
	r := &modelRun{t: t, dir: t.TempDir(), m: map[string][]byte{}, full: full}
	r.c = mustOpen(t, r.dir, r.options(nil))
	defer func() { r.c.Close(context.Background()) }()
	p := &prog{b: program}
	for !p.done() {
		r.step(p)
		r.steps++
	}
	r.reopen()
}

// A program is one byte per step: the low 3 bits the operation, the
// others the key; a Set takes one more byte for its value, a Batch one
// for its length and then one byte per operation (the low 2 bits the
// operation, the others one of the first 12 keys) and one per value. Short programs do
// much, so that the fuzzer can minimize what it finds.

func key(b byte) string { return modelKeys[int(b>>3)%len(modelKeys)] }

// value is a new value of a size class (b's low 2 bits): inlined (1 to
// 64 bytes, empty, or nil, which stores an empty value), up to about
// 1 KiB, about a segment, up to two segments.
func (r *modelRun) value(b byte) []byte {
	var n int
	switch x := int(b >> 2); b & 3 {
	case 0:
		switch {
		case x == 0:
			return []byte{}
		case x%8 == 0:
			return nil
		}
		n = x * inlineMax / 63
	case 1:
		n = inlineMax + 1 + x*16
	case 2:
		n = 1100 + x*50
	case 3:
		n = 4000 + x*64
	}
	r.seq++
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(r.seq*7 + uint64(i))
	}
	if n >= 8 {
		binary.LittleEndian.PutUint64(v, r.seq)
	}
	return v
}

func (r *modelRun) options(discarded func(Discarded)) options {
	return options{segmentBytes: modelSegmentBytes, discarded: discarded, compacted: func(int64) { r.compaction++ }}
}

func (r *modelRun) step(p *prog) {
	ctx := context.Background()
	compaction := r.compaction
	r.touched = r.touched[:0]
	b := p.next()
	switch b & 7 {
	case 0, 1:
		r.write(storage.SetOperation(key(b), r.value(p.next())))
	case 2:
		r.write(storage.DeleteOperation(key(b)))
	case 3:
		k := key(b)
		r.touched = append(r.touched, k)
		got, err := r.c.Get(ctx, k)
		if err != nil {
			r.t.Fatalf("step %d: Get(%.40q): %v", r.steps, k, err)
		}
		want, ok := r.m[k]
		r.same(k, got, want, ok)
		scribble(got)
	case 4, 5:
		ops := make([]*storage.Operation, 1+int(p.next())%8)
		for i := range ops {
			o := p.next()
			// Fewer keys than a step's: a batch often writes and
			// reads the same key.
			switch k := modelKeys[int(o>>2)%12]; o & 3 {
			case 0, 1:
				ops[i] = storage.SetOperation(k, r.value(p.next()))
			case 2:
				ops[i] = storage.DeleteOperation(k)
			default:
				ops[i] = storage.GetOperation(k)
			}
		}
		r.write(ops...)
	case 6:
		r.reopen()
	default:
		// Delete every key: whole segments fall dead.
		var ops []*storage.Operation
		for _, k := range slices.Sorted(maps.Keys(r.m)) {
			ops = append(ops, storage.DeleteOperation(k))
		}
		if len(ops) > 0 {
			r.write(ops...)
		}
	}
	if r.full || r.compaction != compaction {
		r.check(modelKeys)
	} else {
		r.check(r.touched)
	}
}

// write runs a Batch, checks its Gets against the model as of their
// place in the batch, and then the disk bound.
func (r *modelRun) write(ops ...*storage.Operation) {
	next := maps.Clone(r.m)
	type want struct {
		v  []byte
		ok bool
	}
	wants := make([]want, len(ops))
	writes := false
	for i, op := range ops {
		r.touched = append(r.touched, op.Key)
		switch op.Type {
		case storage.Set:
			next[op.Key] = slices.Clone(op.Value)
			if next[op.Key] == nil {
				next[op.Key] = []byte{}
			}
			writes = true
		case storage.Delete:
			delete(next, op.Key)
			writes = true
		case storage.Get:
			v, ok := next[op.Key]
			wants[i] = want{v, ok}
		}
	}
	if err := r.c.Batch(context.Background(), ops...); err != nil {
		r.t.Fatalf("step %d: Batch: %v", r.steps, err)
	}
	for i, op := range ops {
		switch op.Type {
		case storage.Get:
			r.same(op.Key, op.Value, wants[i].v, wants[i].ok)
			scribble(op.Value)
		case storage.Set:
			// The client keeps no reference to what it was given.
			scribble(op.Value)
		}
	}
	r.m = next
	if writes {
		r.maxRec = max(r.maxRec, recordSize(ops))
		r.checkBound()
	}
}

func (r *modelRun) reopen() {
	if err := r.c.Close(context.Background()); err != nil {
		r.t.Fatalf("step %d: Close: %v", r.steps, err)
	}
	var ds []Discarded
	r.c = mustOpen(r.t, r.dir, r.options(func(d Discarded) { ds = append(ds, d) }))
	if len(ds) > 0 {
		r.t.Fatalf("step %d: a clean reopen cut %+v", r.steps, ds)
	}
	r.check(modelKeys)
}

func (r *modelRun) same(k string, got, want []byte, ok bool) {
	r.t.Helper()
	switch {
	case !ok && got != nil:
		r.t.Fatalf("step %d: %.40q: got %d bytes, want none (deleted or never set)", r.steps, k, len(got))
	case ok && got == nil:
		r.t.Fatalf("step %d: %.40q: got none, want %d bytes", r.steps, k, len(want))
	case !bytes.Equal(got, want):
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		r.t.Fatalf("step %d: %.40q: got %d bytes, want %d, differing from byte %d", r.steps, k, len(got), len(want), i)
	}
}

// check reads keys back, compares the index with the model (every key's
// size and inlined value) and the client's books with its index and
// files.
func (r *modelRun) check(keys []string) {
	r.t.Helper()
	for _, k := range keys {
		got, err := r.c.Get(context.Background(), k)
		if err != nil {
			r.t.Fatalf("step %d: Get(%.40q): %v", r.steps, k, err)
		}
		want, ok := r.m[k]
		r.same(k, got, want, ok)
		scribble(got)
	}
	r.c.mu.Lock()
	n := len(r.c.idx)
	for k, v := range r.m {
		l, ok := r.c.idx[k]
		if !ok || l.n != len(v) || l.n <= inlineMax && !bytes.Equal(l.val, v) {
			r.c.mu.Unlock()
			r.t.Fatalf("step %d: %.40q in the index (%v): %d bytes, want %d bytes %.16x", r.steps, k, ok, l.n, len(v), v)
		}
	}
	r.c.mu.Unlock()
	if n != len(r.m) {
		r.t.Fatalf("step %d: the index holds %d keys, the model %d", r.steps, n, len(r.m))
	}
	checkBooks(r.t, r.c)
}

// checkBound: the segments hold at most twice the current values (their
// cost), a segment and the largest record (a segment holds one record
// larger than segment_bytes; the last segment may be full).
func (r *modelRun) checkBound() {
	r.t.Helper()
	var live int64
	for k, v := range r.m {
		live += int64(len(k) + len(v) + opCost)
	}
	r.c.mu.Lock()
	total, segs := r.c.total, len(r.c.segs)
	r.c.mu.Unlock()
	if bound := 2*live + modelSegmentBytes + int64(len(segMagic)) + r.maxRec; total > bound {
		r.t.Fatalf("step %d: %d bytes in %d segments for %d live bytes, more than %d", r.steps, total, segs, live, bound)
	}
}

// recordSize is the size of the record a Batch of ops appends.
func recordSize(ops []*storage.Operation) int64 {
	n := int64(recHeader)
	for _, op := range ops {
		switch op.Type {
		case storage.Set:
			n += int64(1 + uvarintLen(len(op.Key)) + len(op.Key) + uvarintLen(len(op.Value)) + len(op.Value))
		case storage.Delete:
			n += int64(1 + uvarintLen(len(op.Key)) + len(op.Key))
		}
	}
	return n
}

func uvarintLen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }

// checkBooks checks the client's bookkeeping against its index and its
// files: every key's segment is there, each segment's live bytes are
// the cost of the values in it, the total is the sum of the segment
// sizes, and each size is its file's.
func checkBooks(t testing.TB, c *client) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	perSeg := map[uint64]int64{}
	var live int64
	for k, l := range c.idx {
		s := c.segment(l.seg)
		if s == nil {
			t.Fatalf("%q is in segment %d, which is gone", k, l.seg)
		}
		if l.off+int64(l.n) > s.size {
			t.Fatalf("%q at %d+%d, past the end of segment %d (%d bytes)", k, l.off, l.n, l.seg, s.size)
		}
		perSeg[l.seg] += l.cost(k)
		live += l.cost(k)
	}
	if c.live != live {
		t.Fatalf("live %d, the index holds %d", c.live, live)
	}
	var total int64
	for i, s := range c.segs {
		if i > 0 && s.num <= c.segs[i-1].num {
			t.Fatalf("segment %d after %d", s.num, c.segs[i-1].num)
		}
		if s.live != perSeg[s.num] {
			t.Fatalf("segment %d: live %d, the index holds %d in it", s.num, s.live, perSeg[s.num])
		}
		st, err := s.f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != s.size {
			t.Fatalf("segment %d: size %d, its file %d", s.num, s.size, st.Size())
		}
		total += s.size
	}
	if c.total != total {
		t.Fatalf("total %d, the segments hold %d", c.total, total)
	}
}

func mustOpen(t testing.TB, dir string, opt options) *client {
	t.Helper()
	c, err := openClient(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scribble overwrites b: a client that kept a reference to a value it
// was given or returned would then return something else.
func scribble(b []byte) {
	for i := range b {
		b[i] ^= 0xA5
	}
}

func randomProgram(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestStoreModel(t *testing.T) {
	n := 6000
	if testing.Short() {
		n = 1000
	}
	for seed := range uint64(4) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			runModel(t, randomProgram(seed, n), true)
		})
	}
}

func FuzzStore(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(randomProgram(100+seed, 96))
	}
	// The queue's pattern: put (an index and an item in a batch), get,
	// delete (an index and the item), and reopen.
	// A batch setting the write index and the item; one setting the
	// read index and deleting the item.
	put := func(item byte) []byte { return []byte{4, 1, 4 << 2, 8, item << 2, 0x2d} }
	del := func(item byte) []byte { return []byte{4, 1, 3 << 2, 8, item<<2 | 2} }
	var queue []byte
	for i := range byte(6) {
		queue = slices.Concat(queue, put(7+i), []byte{(7+i)<<3 | 3}, del(7+i))
		if i%2 == 1 {
			queue = append(queue, 6)
		}
	}
	f.Add(queue)
	f.Fuzz(func(t *testing.T, program []byte) {
		// A few hundred steps at most: enough to roll and compact
		// segments many times, cheap enough for the fuzzer to minimize
		// what it finds.
		if len(program) > 128 {
			program = program[:128]
		}
		runModel(t, program, false)
	})
}
