package logstorageextension

import (
	"bytes"
	"context"
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// The storage contract the collector's persistent queue relies on, under
// faults injected at every filesystem call the client makes (faultFS):
//   - a Batch is all or nothing, and its Gets see its own earlier writes;
//   - an operation that returned success is there to read, in the process
//     and after a crash (the client dropped without Close) and reopen;
//   - one that failed left no trace; only where the client could not undo
//     it (a failed fsync, a cut that failed) is its outcome in doubt, and
//     then it is whole or absent, and the client writes nothing more;
//   - after a fault the client keeps working, or refuses every later
//     write: an acknowledged entry never becomes unreadable or lost.
//
// The workload is the queue's own: put (the metadata and a new entry in a
// batch), take (the metadata and a Get of the entry), done (the metadata
// and a Delete), with other keys set and deleted beside, crashes and
// clean reopens.

// contractRun is one run of a workload against a client with faults.
type contractRun struct {
	t     testing.TB
	dir   string
	fs    *faultFS
	c     *client
	m     map[string][]byte // what the client acknowledged
	w, r  uint64            // the queue's write and read indexes, as acknowledged
	taken []uint64          // entries taken and not done
	seq   uint64
	step  int
	// plan decides the faults; nil while the client is reopened clean.
	plan func(op string) fault
	// inDoubt: the client is reopened after a batch it could not undo.
	inDoubt bool
	moved   int // entries requeued
}

func (cr *contractRun) options() options {
	return options{segmentBytes: 4096, fs: cr.fs, reserveBase: 4096, fsync: true, discarded: func(d Discarded) {
		// A reopen cuts nothing the client wrote whole: only the
		// torn tail of a write it could not undo (the batch in
		// doubt), never damage.
		if !d.Torn || !cr.inDoubt {
			cr.t.Fatalf("step %d: a reopen cut %+v; faults: %v", cr.step, d, cr.fs.fired)
		}
	}}
}

// open opens the client with faults on; when that fails, the failure must
// have lost nothing: a clean open follows and is checked.
func (cr *contractRun) open() {
	cr.fs.setPlan(cr.plan)
	c, err := openClient(cr.dir, cr.options())
	cr.fs.setPlan(nil)
	if err != nil {
		c = mustOpen(cr.t, cr.dir, cr.options())
	}
	cr.c = c
	cr.checkAll("open")
	cr.fs.setPlan(cr.plan)
}

// crash drops the client as kill -9 would: nothing more is written (no
// mark, no sync), its files are closed.
func (cr *contractRun) crash() {
	cr.fs.setPlan(nil)
	cr.c.mu.Lock()
	if cr.c.markTimer != nil {
		cr.c.markTimer.Stop()
		cr.c.markTimer = nil
	}
	cr.c.closed = true
	if cr.c.markF != nil {
		cr.c.markF.Close()
		cr.c.markF = nil
	}
	cr.c.closeFiles()
	cr.c.mu.Unlock()
	cr.open()
}

func (cr *contractRun) value() []byte {
	cr.seq++
	v := make([]byte, 80+int(cr.seq*37%1500))
	for i := range v {
		v[i] = byte(cr.seq*13 + uint64(i))
	}
	binary.LittleEndian.PutUint64(v, cr.seq)
	return v
}

func meta(w, r uint64) []byte {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, w), r)
}

// batch runs ops and checks the outcome against the model: on success
// the model takes next; on failure nothing changed, unless the client
// is broken by it, when the outcome is settled by a clean reopen.
func (cr *contractRun) batch(next map[string][]byte, ops ...*storage.Operation) bool {
	wants := map[int][]byte{}
	state := maps.Clone(cr.m)
	for i, op := range ops {
		switch op.Type {
		case storage.Set:
			state[op.Key] = slices.Clone(op.Value)
		case storage.Delete:
			delete(state, op.Key)
		case storage.Get:
			wants[i] = state[op.Key]
		}
	}
	if !maps.EqualFunc(state, next, bytes.Equal) {
		cr.t.Fatalf("step %d: the test's next state is not the batch's", cr.step)
	}
	cr.c.mu.Lock()
	brokenBefore := cr.c.broken != nil
	cr.c.mu.Unlock()
	err := cr.c.Batch(context.Background(), ops...)
	if err == nil {
		for i, want := range wants {
			if !bytes.Equal(ops[i].Value, want) || (want == nil) != (ops[i].Value == nil) {
				cr.t.Fatalf("step %d: Get(%q) in a batch read %d bytes (nil %v), want %d (nil %v); ops %d; faults %v", cr.step, ops[i].Key, len(ops[i].Value), ops[i].Value == nil, len(want), want == nil, len(ops), cr.fs.fired)
			}
		}
		cr.m = next
		return true
	}
	cr.c.mu.Lock()
	broken := cr.c.broken != nil
	cr.c.mu.Unlock()
	if broken && !brokenBefore {
		// A fault the client could not undo: the batch is whole or
		// absent after a reopen, never in part.
		cr.fs.setPlan(nil)
		cr.c.Close(context.Background())
		cr.inDoubt = true
		c := mustOpen(cr.t, cr.dir, cr.options())
		cr.inDoubt = false
		cr.c = c
		writes := slices.ContainsFunc(ops, func(op *storage.Operation) bool { return op.Type != storage.Get })
		if writes && cr.same(next) {
			cr.m = next
			cr.checkAll("a batch in doubt, found whole")
			cr.fs.setPlan(cr.plan)
			return true
		}
		cr.checkAll("a batch in doubt, found absent")
		cr.fs.setPlan(cr.plan)
		return false
	}
	// Failed and undone: a later Get shows the state before it.
	cr.checkKeys("a failed batch", ops)
	return false
}

func (cr *contractRun) same(m map[string][]byte) bool {
	cr.c.mu.Lock()
	defer cr.c.mu.Unlock()
	if len(cr.c.idx) != len(m) {
		return false
	}
	for k, v := range m {
		got, err := cr.c.read(k)
		if err != nil || !bytes.Equal(got, v) {
			return false
		}
	}
	return true
}

// checkKeys reads the keys ops touched; an injected read fault may fail
// a read (and then the client must write nothing more).
func (cr *contractRun) checkKeys(what string, ops []*storage.Operation) {
	for _, op := range ops {
		cr.checkKey(what, op.Key)
	}
}

func (cr *contractRun) checkKey(what, k string) {
	cr.t.Helper()
	got, err := cr.c.Get(context.Background(), k)
	if err != nil {
		cr.c.mu.Lock()
		broken := cr.c.broken
		cr.c.mu.Unlock()
		if broken == nil {
			cr.t.Fatalf("step %d (%s): Get(%q) failed (%v) and the client still writes", cr.step, what, k, err)
		}
		return
	}
	want, ok := cr.m[k]
	if ok != (got != nil) || !bytes.Equal(got, want) {
		cr.t.Fatalf("step %d (%s): %q holds %d bytes (present %v), acknowledged %d (present %v); faults: %v", cr.step, what, k, len(got), got != nil, len(want), ok, cr.fs.fired)
	}
}

// checkAll reads every key, with no faults, against the model.
func (cr *contractRun) checkAll(what string) {
	cr.t.Helper()
	plan := cr.fs.plan
	cr.fs.setPlan(nil)
	defer cr.fs.setPlan(plan)
	cr.c.mu.Lock()
	n := len(cr.c.idx)
	cr.c.mu.Unlock()
	if n != len(cr.m) {
		cr.t.Fatalf("step %d (%s): %d keys held, %d acknowledged; faults: %v", cr.step, what, n, len(cr.m), cr.fs.fired)
	}
	for _, k := range slices.Sorted(maps.Keys(cr.m)) {
		cr.checkKey(what, k)
	}
}

// run runs program: one byte a step.
func (cr *contractRun) run(program []byte) {
	cr.open()
	defer func() {
		cr.fs.setPlan(nil)
		cr.c.Close(context.Background())
	}()
	for i, b := range program {
		cr.step = i
		next := maps.Clone(cr.m)
		switch b % 10 {
		case 0, 1, 2: // put
			v := cr.value()
			k := strconv.FormatUint(cr.w, 10)
			next["meta"], next[k] = meta(cr.w+1, cr.r), v
			if cr.batch(next, storage.SetOperation("meta", meta(cr.w+1, cr.r)), storage.SetOperation(k, slices.Clone(v))) {
				cr.w++
			}
		case 3, 4: // take
			if cr.r == cr.w {
				continue
			}
			k := strconv.FormatUint(cr.r, 10)
			next["meta"] = meta(cr.w, cr.r+1)
			if cr.batch(next, storage.SetOperation("meta", meta(cr.w, cr.r+1)), storage.GetOperation(k)) {
				cr.taken = append(cr.taken, cr.r)
				cr.r++
			}
		case 5, 6: // done
			if len(cr.taken) == 0 {
				continue
			}
			k := strconv.FormatUint(cr.taken[0], 10)
			next["meta"] = meta(cr.w, cr.r)
			delete(next, k)
			if cr.batch(next, storage.SetOperation("meta", meta(cr.w, cr.r)), storage.DeleteOperation(k)) {
				cr.taken = cr.taken[1:]
			}
		case 7: // another key, set or deleted
			k := "other" + strconv.Itoa(int(b/10)%4)
			if b/40%2 == 0 {
				v := cr.value()[:20+int(b)%60]
				next[k] = v
				cr.batch(next, storage.SetOperation(k, slices.Clone(v)))
			} else {
				delete(next, k)
				cr.batch(next, storage.DeleteOperation(k))
			}
		case 8:
			if b/10%2 == 1 {
				cr.requeue()
				continue
			}
			cr.crash()
		case 9:
			cr.fs.setPlan(nil)
			if err := cr.c.Close(context.Background()); err != nil {
				cr.c.mu.Lock()
				broken := cr.c.broken
				cr.c.mu.Unlock()
				if broken == nil {
					cr.t.Fatalf("step %d: Close: %v", cr.step, err)
				}
			}
			cr.open()
		}
	}
	cr.crash()
}

// requeue does what the persistent queue does at start with the entries
// that were being sent: reads them in a batch without writes, deletes
// them, and puts each again under a new number (moved.go: written as
// references to the bytes already held).
func (cr *contractRun) requeue() {
	if len(cr.taken) == 0 {
		return
	}
	var gets, dels []*storage.Operation
	for _, i := range cr.taken {
		k := strconv.FormatUint(i, 10)
		gets = append(gets, storage.GetOperation(k))
		dels = append(dels, storage.DeleteOperation(k))
	}
	if !cr.batch(maps.Clone(cr.m), gets...) {
		return
	}
	next := maps.Clone(cr.m)
	for _, op := range dels {
		delete(next, op.Key)
	}
	if !cr.batch(next, dels...) {
		return
	}
	cr.taken = nil
	for _, op := range gets {
		k := strconv.FormatUint(cr.w, 10)
		next := maps.Clone(cr.m)
		next["meta"], next[k] = meta(cr.w+1, cr.r), slices.Clone(op.Value)
		if cr.batch(next, storage.SetOperation("meta", meta(cr.w+1, cr.r)), storage.SetOperation(k, slices.Clone(op.Value))) {
			cr.w++
			cr.moved++
		}
	}
}

// randomPlan fails about one call in every rate, each fault drawn from
// the errors the call can give.
func randomPlan(seed uint64, rate int) func(op string) fault {
	rng := rand.New(rand.NewPCG(seed, 1))
	return func(op string) fault {
		if rng.IntN(rate) != 0 {
			return fault{}
		}
		errs := errorsOf(op)
		return fault{err: errs[rng.IntN(len(errs))], short: rng.IntN(2) == 0}
	}
}

// schedulePlan reads faults from b: pairs of (calls to let through, the
// fault: its error and whether a write fails short).
func schedulePlan(b []byte) func(op string) fault {
	i, gap := 0, -1
	return func(op string) fault {
		if i+1 >= len(b) {
			return fault{}
		}
		if gap < 0 {
			gap = int(b[i])
		}
		if gap > 0 {
			gap--
			return fault{}
		}
		k := b[i+1]
		i, gap = i+2, -1
		errs := errorsOf(op)
		return fault{err: errs[int(k>>1)%len(errs)], short: k&1 == 1}
	}
}

func TestContractUnderFaults(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	fired := 0
	for seed := range uint64(seeds) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			cr := &contractRun{t: t, dir: t.TempDir(), fs: &faultFS{}, m: map[string][]byte{}}
			cr.plan = randomPlan(seed, 8+int(seed%5)*8)
			cr.run(randomProgram(1000+seed, 600))
			fired += len(cr.fs.fired)
		})
	}
	if fired < seeds*10 {
		t.Fatalf("%d faults in %d runs: the plans hit too little", fired, seeds)
	}
}

// Without faults, the same workload holds the model: the checks are not
// passing for want of anything to check.
func TestContractWithoutFaults(t *testing.T) {
	cr := &contractRun{t: t, dir: t.TempDir(), fs: &faultFS{}, m: map[string][]byte{}}
	cr.run(randomProgram(7, 2000))
	if cr.w < 100 || cr.r < 50 || cr.moved < 20 {
		t.Fatalf("the workload put %d entries, took %d, requeued %d", cr.w, cr.r, cr.moved)
	}
	for _, op := range faultOps {
		if op == "mkdir" || op == "rename" || op == "close" {
			continue
		}
		if cr.fs.calls[op] == 0 && op != "read" && op != "stat" && op != "readfile" && op != "readdir" && op != "lstat" && op != "syncdir" && op != "remove" {
			t.Errorf("the workload made no %s call: faults there are not tested", op)
		}
	}
}

func FuzzFaultSchedule(f *testing.F) {
	for seed := range uint64(6) {
		f.Add(randomProgram(200+seed, 120), randomProgram(300+seed, 24))
	}
	f.Fuzz(func(t *testing.T, program, faults []byte) {
		if len(program) > 400 || len(faults) > 200 {
			return
		}
		cr := &contractRun{t: t, dir: t.TempDir(), fs: &faultFS{}, m: map[string][]byte{}}
		cr.plan = schedulePlan(faults)
		cr.run(program)
	})
}
