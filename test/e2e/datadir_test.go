package e2e

import (
	"bytes"
	le "encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/doubletake/doubletake/internal/capture"
)

// The backlog of the damage tests: backlogRequests requests of perEntry
// spans, sent one at a time while the upstream is down and each
// acknowledged, so that each is one entry of the persistent queue (group
// commit merges only requests that wait together) and one segment of
// dedup's span journal.
const (
	backlogRequests = 100
	perEntry        = 1024
	acknowledged    = backlogRequests * perEntry
)

// The log_storage clients (DATA_DIR/log/CLIENT) of the embedded default's
// traces queue and of dedup's journal.
const (
	queueClient   = "exporter_dedup_otlp_grpc_upstream_traces"
	journalClient = "processor_dedup_"
)

// The lines the gateway logs for what it lost.
const (
	damagedLine     = "A damaged range of a segment was cut"             // log_storage, error
	truncatedLine   = "A segment lost writes that had been acknowledged" // log_storage, error
	undecodableLine = "A queue entry could not be read or decoded and was dropped"
)

// storageRecovered is dedup's status JSON's storage_recovered field.
type storageRecovered struct {
	File          string `json:"file"`
	KeptAs        string `json:"kept_as"`
	Store         string `json:"store"`
	Salvaged      int64  `json:"salvaged_items"`
	Lost          int64  `json:"lost_items"`
	LostEntries   int64  `json:"lost_entries"`
	LostUncounted bool   `json:"lost_uncounted"`
	Line          string `json:"line"`
}

// backlog is the requests a test sends and the span ids of each.
type backlog struct {
	reqs []ptrace.Traces
	keys [][][24]byte
}

// newBacklog makes backlogRequests requests of perEntry spans with
// random ids, from a seed of name.
func newBacklog(name string) *backlog {
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(h.Sum64(), 25))
	b := &backlog{}
	for range backlogRequests {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "backlog")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		keys := make([][24]byte, 0, perEntry)
		for range perEntry {
			var k [24]byte
			for i := range k {
				k[i] = byte(r.Uint32())
			}
			s := spans.AppendEmpty()
			s.SetTraceID([16]byte(k[:16]))
			s.SetSpanID([8]byte(k[16:]))
			s.SetName("op")
			keys = append(keys, k)
		}
		b.reqs = append(b.reqs, td)
		b.keys = append(b.keys, keys)
	}
	return b
}

// send exports every request to addr over OTLP/gRPC, one at a time; each
// must be acknowledged.
func (b *backlog) send(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	ctx := ctxTimeout(t, 5*time.Minute)
	for i, td := range b.reqs {
		if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
			t.Fatalf("export %d: %v", i, err)
		}
	}
}

// snapshot copies the copies received per span id.
func (s *sink) snapshot() map[[24]byte]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[[24]byte]int, len(s.spans))
	for k, n := range s.spans {
		out[k] = n
	}
	return out
}

// A log_storage segment (extension/logstorageextension/store.go): the
// magic, then records of a u32 payload length, the payload's u32 CRC32C
// (Castagnoli) and the payload, operations: opSet, the key and the value,
// or opDelete and the key, each length an unsigned varint.
const (
	segMagic = "DTLOG\x00\x01\n"
	opSet    = 1
	opDelete = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type logOp struct {
	del bool
	key string
	val []byte
}

// logRecord is one record of a segment: its bytes [from, to) and its
// operations.
type logRecord struct {
	from, to int64
	ops      []logOp
}

// readSegment reads and parses a segment log_storage wrote whole; one it
// cannot parse fails the test.
func readSegment(t *testing.T, path string) ([]byte, []logRecord) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(segMagic)) {
		t.Fatalf("%s: no segment magic", path)
	}
	var recs []logRecord
	size := int64(len(data))
	for off := int64(len(segMagic)); off < size; {
		if off+8 > size {
			t.Fatalf("%s: a record header cut short at %d", path, off)
		}
		n := int64(le.LittleEndian.Uint32(data[off:]))
		if off+8+n > size || crc32.Checksum(data[off+8:off+8+n], castagnoli) != le.LittleEndian.Uint32(data[off+4:]) {
			t.Fatalf("%s: the record at %d is not whole", path, off)
		}
		rec := logRecord{from: off, to: off + 8 + n}
		p := data[off+8 : off+8+n]
		for i := 0; i < len(p); {
			op := p[i]
			kl, k := le.Uvarint(p[i+1:])
			if k <= 0 || uint64(len(p)-i-1-k) < kl {
				t.Fatalf("%s: the record at %d has a bad key", path, off)
			}
			i += 1 + k
			o := logOp{key: string(p[i : i+int(kl)])}
			i += int(kl)
			switch op {
			case opSet:
				vl, k := le.Uvarint(p[i:])
				if k <= 0 || uint64(len(p)-i-k) < vl {
					t.Fatalf("%s: the record at %d has a bad value", path, off)
				}
				i += k
				o.val = p[i : i+int(vl)]
				i += int(vl)
			case opDelete:
				o.del = true
			default:
				t.Fatalf("%s: the record at %d has an operation %d", path, off, op)
			}
			rec.ops = append(rec.ops, o)
		}
		recs = append(recs, rec)
		off = rec.to
	}
	return data, recs
}

// newestSegment is the path of the newest segment of a client directory.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); len(n) == 20 && strings.HasSuffix(n, ".log") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s holds no segment", dir)
	}
	slices.Sort(names)
	return filepath.Join(dir, names[len(names)-1])
}

// markCovers says whether a client's mark (WRITTEN: the newest segment's
// number and size, version 1, CRC32C) covers its newest segment whole.
func markCovers(t *testing.T, dir string) (bool, string) {
	t.Helper()
	seg := newestSegment(t, dir)
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(seg), ".log"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "WRITTEN"))
	if err != nil || len(b) != 24 || le.LittleEndian.Uint32(b[16:]) != 1 || crc32.Checksum(b[:20], castagnoli) != le.LittleEndian.Uint32(b[20:]) {
		return false, fmt.Sprintf("%s: no valid mark (%v)", dir, err)
	}
	mn, ms := le.LittleEndian.Uint64(b), int64(le.LittleEndian.Uint64(b[8:]))
	return mn == num && ms == st.Size(), fmt.Sprintf("%s: the mark says segment %d, %d bytes; the newest is %d, %d bytes", dir, mn, ms, num, st.Size())
}

// applyRecords is the keys and values the records leave, in order.
func applyRecords(recs []logRecord) map[string][]byte {
	kv := map[string][]byte{}
	for _, r := range recs {
		for _, o := range r.ops {
			if o.del {
				delete(kv, o.key)
			} else {
				kv[o.key] = o.val
			}
		}
	}
	return kv
}

// surviving are the records of a segment as written (before) whose bytes
// are all still there after the damage (after): log_storage cuts each
// record the damage touched, and only those (it resyncs at the next whole
// record).
func surviving(before, after []byte, recs []logRecord) []logRecord {
	var out []logRecord
	for _, r := range recs {
		if r.to <= int64(len(after)) && bytes.Equal(before[r.from:r.to], after[r.from:r.to]) {
			out = append(out, r)
		}
	}
	return out
}

// queueOutcome is what the persistent queue (exporterhelper v0.161) makes
// of the records log_storage kept, at the restart: its metadata (qmv0) as
// the last kept record set it, and the items the kept records hold. It
// re-enqueues the items dispatched before the kill and reads
// [read_index, write_index): each of those items is sent, or, not found,
// dropped and reported (undecodable). An acknowledged entry the metadata
// no longer reaches (a truncation took the records that wrote it and
// counted it) vanishes: only log_storage's report, which cannot count it,
// says so.
type queueOutcome struct {
	spans                          map[[24]byte]bool // delivered
	entries, undecodable, vanished int
	// putBack counts the undecodable entries that were being sent at the
	// kill: found missing when the queue puts them back at start, the
	// others when it takes them to send.
	putBack int
}

func predictQueue(t *testing.T, recs []logRecord) queueOutcome {
	t.Helper()
	kv := applyRecords(recs)
	var reached []uint64
	dispatched := 0
	if meta := kv["qmv0"]; len(meta) > 0 {
		ri, wi, d := decodeQueueMeta(t, meta)
		reached, dispatched = d, len(d)
		for i := ri; i < wi; i++ {
			reached = append(reached, i)
		}
	}
	o := queueOutcome{spans: map[[24]byte]bool{}}
	for n, i := range reached {
		v, ok := kv[strconv.FormatUint(i, 10)]
		if !ok {
			o.undecodable++
			if n < dispatched {
				o.putBack++
			}
			continue
		}
		_, td, err := pdatareq.UnmarshalTraces(v)
		if err != nil {
			t.Fatalf("queue item %d, kept whole, does not decode: %v", i, err)
		}
		eachSpan(td, func(k [24]byte) { o.spans[k] = true })
		o.entries++
	}
	o.vanished = backlogRequests - o.entries - o.undecodable
	return o
}

// decodeQueueMeta decodes the queue's PersistentMetadata (meta.proto):
// read_index (3), write_index (4), currently_dispatched_items (5), all
// fixed64.
func decodeQueueMeta(t *testing.T, b []byte) (ri, wi uint64, dispatched []uint64) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("queue metadata: %v", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case typ == protowire.Fixed64Type && (num == 3 || num == 4 || num == 5):
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				t.Fatalf("queue metadata: %v", protowire.ParseError(n))
			}
			switch num {
			case 3:
				ri = v
			case 4:
				wi = v
			default:
				dispatched = append(dispatched, v)
			}
			b = b[n:]
		case typ == protowire.BytesType && num == 5:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || len(v)%8 != 0 {
				t.Fatalf("queue metadata: bad dispatched items")
			}
			for ; len(v) > 0; v = v[8:] {
				dispatched = append(dispatched, le.LittleEndian.Uint64(v))
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				t.Fatalf("queue metadata: %v", protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return ri, wi, dispatched
}

// predictJournal is the span ids dedup's span journal replays at the
// restart from the records log_storage kept: the segments in [first,
// next) of its meta (traces/meta) whose header and every part were kept.
// A segment missing any is skipped: its spans pass as new again.
func predictJournal(recs []logRecord) map[[24]byte]bool {
	kv := applyRecords(recs)
	out := map[[24]byte]bool{}
	meta := kv["traces/meta"]
	if len(meta) != 40 {
		return out // no meta: the journal starts afresh
	}
	first, next := le.LittleEndian.Uint64(meta), le.LittleEndian.Uint64(meta[8:])
	for n := first; n < next; n++ {
		head := fmt.Sprintf("traces/c/%020d", n)
		h := kv[head]
		if len(h) != 16 {
			continue
		}
		var payload []byte
		whole := true
		for i := range int(le.LittleEndian.Uint32(h[8:])) {
			v, ok := kv[fmt.Sprintf("%s/%06d", head, i)]
			if !ok {
				whole = false
				break
			}
			payload = append(payload, v...)
		}
		if !whole {
			continue
		}
		// A span: trace id, span id (24 bytes), fingerprint (8).
		for ; len(payload) >= 32; payload = payload[32:] {
			out[[24]byte(payload[:24])] = true
		}
	}
	return out
}

// damageOutcome is what a damage test measured.
type damageOutcome struct {
	d *defaultGateway
	// reasons are otelcol_log_storage_discarded_bytes of the damaged
	// client, by reason.
	reasons map[string]float64
	// Queue entries delivered, reported undecodable, and lost without
	// the queue knowing (acknowledged - delivered - undecodable).
	delivered, undecodable, vanished int
	// forgotten counts the spans the journal lost: their re-sent copies
	// passed.
	forgotten int
}

// damagedBacklog queues the backlog while the upstream is down, waits
// until log_storage's marks cover what was written, kills the gateway with
// SIGKILL, damages the newest segment of client with damage, brings the
// upstream back and starts the gateway again on the same data dir. It
// checks that the gateway serves within seconds of CPU time; that what is
// delivered is exactly what the records log_storage kept hold (each
// span once: predictQueue); that the queue entries lost are found missing
// and reported (warn line, metric, status page) when the queue reaches
// them, so that delivered + undecodable entries x perEntry = acknowledged
// unless a loss was reported as uncountable; that a re-send of the whole
// backlog passes exactly the spans whose journal records were lost
// (predictJournal); and that every cut is reported (assertStorageReported).
func damagedBacklog(t *testing.T, client string, damage func(t *testing.T, path string)) damageOutcome {
	t.Helper()
	upstream := freePort(t)
	d := startDefault(t, "--upstream", "http://"+upstream)
	bl := newBacklog(t.Name())
	bl.send(t, d.grpc)
	logDir := filepath.Join(d.dataDir, "log")
	// Only what the mark covers is known to have been written: a cut past
	// it is a write the kill cut short (torn), not a loss.
	waitFor(t, 30*time.Second, "log_storage's marks to cover the backlog", func() bool {
		q, _ := markCovers(t, filepath.Join(logDir, queueClient))
		j, _ := markCovers(t, filepath.Join(logDir, journalClient))
		return q && j
	})
	if err := d.g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	type segment struct {
		name, path    string
		before, after []byte
		recs          []logRecord
	}
	clients := map[string]*segment{}
	for _, name := range []string{queueClient, journalClient} {
		dir := filepath.Join(logDir, name)
		if ok, why := markCovers(t, dir); !ok {
			t.Fatalf("a write after the marks covered the backlog: %s", why)
		}
		c := &segment{name: name, path: newestSegment(t, dir)}
		c.before, c.recs = readSegment(t, c.path)
		clients[name] = c
	}
	checkBacklogStored(t, bl, clients[queueClient].recs, clients[journalClient].recs)

	damaged := clients[client]
	damage(t, damaged.path)
	for _, c := range clients {
		var err error
		if c.after, err = os.ReadFile(c.path); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.Equal(damaged.before, damaged.after) {
		t.Fatalf("the damage left %s as it was", damaged.path)
	}
	qc, jc := clients[queueClient], clients[journalClient]
	q := predictQueue(t, surviving(qc.before, qc.after, qc.recs))
	remembered := predictJournal(surviving(jc.before, jc.after, jc.recs))

	sk := &sink{spans: map[[24]byte]int{}}
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })

	began := time.Now()
	d.restartOnNewPorts(t) // the backlog's sender is gone
	// The cost of reading the damaged segment is CPU time: the wall clock
	// it takes depends on what else the machine runs.
	cpu := processCPU(t, d.g.cmd.Process.Pid)
	t.Logf("the gateway served %s after its restart, having used %s of CPU", time.Since(began).Round(time.Millisecond), cpu)
	if cpu > 15*time.Second {
		t.Errorf("the gateway used %s of CPU to start again on the damaged data dir, want a few seconds", cpu)
	}
	// Everything the queue reached is delivered or dropped once it is
	// empty (an entry is done once the upstream took it).
	waitFor(t, 2*time.Minute, "the queue to empty", func() bool { return d.queueSize(t) == 0 })
	delivered := sk.snapshot()

	o := damageOutcome{d: d}
	m := get(t, "http://"+d.tel+"/metrics")
	log := d.g.stderr.String()
	var st struct {
		Storage []storageRecovered `json:"storage_recovered"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+d.status+"/status.json")), &st); err != nil {
		t.Fatal(err)
	}

	// Delivered: exactly the spans of the entries the queue still had,
	// each once.
	var extra, twice, missed int
	for k, n := range delivered {
		switch {
		case !q.spans[k]:
			extra++
		case n > 1:
			twice++
		}
	}
	for k := range q.spans {
		if delivered[k] == 0 {
			missed++
		}
	}
	if extra+twice+missed > 0 {
		t.Errorf("after the restart: %d spans delivered that the kept records do not hold, %d delivered more than once, %d kept but not delivered (%d delivered, %d expected)", extra, twice, missed, len(delivered), len(q.spans))
	}
	if len(delivered)%perEntry != 0 {
		t.Errorf("%d spans delivered: not whole entries of %d", len(delivered), perEntry)
	}
	o.delivered = len(delivered) / perEntry

	// Undecodable: each entry the queue reached and did not find, with a
	// warn line, the metric and the status page.
	u, _ := promValue(m, `otelcol_processor_dedup_storage_recovered_items{outcome="undecodable",store="queue"}`)
	o.undecodable = int(u)
	if o.undecodable != q.undecodable {
		t.Errorf("%d queue entries reported undecodable, want %d (the entries the queue reached whose records were cut)", o.undecodable, q.undecodable)
	}
	if warns := grepLines(log, undecodableLine); strings.Count(warns, "\twarn\t") != o.undecodable || (o.undecodable == 0) != (warns == "") {
		t.Errorf("want %d warn lines %q, got:\n%s", o.undecodable, undecodableLine, warns)
	}
	if o.undecodable > 0 && !slices.ContainsFunc(st.Storage, func(s storageRecovered) bool {
		return s.Store == "queue" && s.File == "" && s.LostUncounted && strings.Contains(s.Line, ": "+strconv.Itoa(o.undecodable)+" (")
	}) {
		t.Errorf("the status page does not say %d queue entries were undecodable: %+v", o.undecodable, st.Storage)
	}

	// Accounting: delivered + undecodable entries = acknowledged, unless
	// entries vanished, which only an uncounted report can say.
	o.vanished = backlogRequests - o.delivered - o.undecodable
	if o.vanished != q.vanished {
		t.Errorf("acknowledged %d entries, delivered %d, %d undecodable: %d vanished, want %d", backlogRequests, o.delivered, o.undecodable, o.vanished, q.vanished)
	}
	if o.vanished > 0 && !slices.ContainsFunc(st.Storage, func(s storageRecovered) bool {
		return s.Store == "queue" && s.File != "" && s.LostUncounted && strings.Contains(s.Line, "cannot be counted")
	}) {
		t.Errorf("%d queue entries lost without a report that says their loss cannot be counted: %+v", o.vanished, st.Storage)
	}

	// Every cut is reported; the client left alone reports nothing.
	store := map[string]string{queueClient: "queue", journalClient: "journal"}
	o.reasons = assertStorageReported(t, d, log, m, st.Storage, client, store[client])
	for name, s := range store {
		if name == client {
			continue
		}
		if r := discardedBytes(m, name); len(r) > 0 {
			t.Errorf("%s, not damaged, reports discarded bytes: %v", name, r)
		}
		if slices.ContainsFunc(st.Storage, func(e storageRecovered) bool { return e.Store == s && e.File != "" }) {
			t.Errorf("%s, not damaged, is on the status page: %+v", name, st.Storage)
		}
	}

	// A re-send of the backlog: dedup drops what its journal replayed, and
	// passes the rest once more.
	bl.send(t, d.grpc)
	waitFor(t, 2*time.Minute, "the queue to empty after the re-send", func() bool { return d.queueSize(t) == 0 })
	after := sk.snapshot()
	var wrong int
	var some []string
	for _, keys := range bl.keys {
		for _, k := range keys {
			if !remembered[k] {
				o.forgotten++
			}
			want := delivered[k]
			if !remembered[k] {
				want++
			}
			if after[k] != want {
				wrong++
				if len(some) < 5 {
					some = append(some, fmt.Sprintf("%x: %d copies, want %d (remembered %v)", k, after[k], want, remembered[k]))
				}
			}
		}
	}
	if wrong > 0 || len(after) > acknowledged {
		t.Errorf("after the re-send: %d spans with other than the copies the kept journal records allow, %d distinct spans received; e.g. %v", wrong, len(after), some)
	}
	t.Logf("acknowledged %d entries: %d delivered, %d undecodable (%d being sent at the kill), %d vanished; %d spans forgotten by the journal; discarded bytes %v; status %+v",
		backlogRequests, o.delivered, o.undecodable, q.putBack, o.vanished, o.forgotten, o.reasons, st.Storage)
	return o
}

// checkBacklogStored checks that the backlog is stored as the tests take
// it to be: each request one queue entry, items 0.. in order, each
// holding that request's spans; and the journal holding every span.
func checkBacklogStored(t *testing.T, bl *backlog, queue, journal []logRecord) {
	t.Helper()
	next := 0
	for _, r := range queue {
		for _, o := range r.ops {
			if o.del || o.key == "qmv0" {
				continue
			}
			if o.key != strconv.Itoa(next) || next >= backlogRequests {
				t.Fatalf("queue record at %d sets %q, want item %d", r.from, o.key, next)
			}
			_, td, err := pdatareq.UnmarshalTraces(o.val)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			eachSpan(td, func(k [24]byte) {
				if k == bl.keys[next][n%perEntry] {
					n++
				}
			})
			if n != perEntry || td.SpanCount() != perEntry {
				t.Fatalf("queue item %d holds %d spans, %d of them request %d's, want its %d", next, td.SpanCount(), n, next, perEntry)
			}
			next++
		}
	}
	if next != backlogRequests {
		t.Fatalf("the queue holds %d items, want one per request (%d)", next, backlogRequests)
	}
	if got := len(predictJournal(journal)); got != acknowledged {
		t.Fatalf("the journal holds %d spans, want %d", got, acknowledged)
	}
}

// discardedBytes is otelcol_log_storage_discarded_bytes of client, by
// reason.
func discardedBytes(metrics, client string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(l, "otelcol_log_storage_discarded_bytes{") || !strings.Contains(l, `client="`+client+`"`) {
			continue
		}
		_, reason, ok := strings.Cut(l, `reason="`)
		if !ok {
			continue
		}
		reason, _, _ = strings.Cut(reason, `"`)
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil && v > 0 {
			out[reason] += v
		}
	}
	return out
}

// assertStorageReported checks that log_storage reported the damage to
// client, for each reason it counted: an error line naming the client,
// otelcol_log_storage_discarded_bytes, a status page entry under the
// client's directory saying its loss cannot be counted (a damaged range
// kept aside in a file that exists), and one
// otelcol_processor_dedup_storage_recovered_items{outcome="uncounted"} per
// entry. The marks covered every write: no cut may be called torn.
func assertStorageReported(t *testing.T, d *defaultGateway, log, metrics string, st []storageRecovered, client, store string) map[string]float64 {
	t.Helper()
	reasons := discardedBytes(metrics, client)
	if len(reasons) == 0 {
		t.Errorf("the damage to %s is not in otelcol_log_storage_discarded_bytes:\n%s", client, grepLines(metrics, "log_storage"))
	}
	if reasons["torn"] > 0 {
		t.Errorf("%s: %v bytes reported torn (never acknowledged), though the mark covered every write", client, reasons["torn"])
	}
	dir := filepath.Join(d.dataDir, "log", client) + string(filepath.Separator)
	var entries []storageRecovered
	for _, s := range st {
		if strings.HasPrefix(s.File, dir) {
			entries = append(entries, s)
			if s.Store != store || !s.LostUncounted || !strings.Contains(s.Line, "cannot be counted") {
				t.Errorf("status entry for %s: want store %s, lost_uncounted and a line saying the loss cannot be counted: %+v", s.File, store, s)
			}
		}
	}
	for reason, line := range map[string]string{"damaged": damagedLine, "truncated": truncatedLine} {
		logged := grepLines(log, line)
		if reasons[reason] == 0 {
			if strings.Contains(logged, client) {
				t.Errorf("%s: logged %q without counting it:\n%s", client, line, logged)
			}
			continue
		}
		if !strings.Contains(logged, "\terror\t") || !strings.Contains(logged, `"client": "`+client+`"`) {
			t.Errorf("%s: %v bytes %s, want an error line %q naming it, got:\n%s", client, reasons[reason], reason, line, logged)
		}
		found := false
		for _, s := range entries {
			switch {
			case reason == "damaged" && s.KeptAs != "":
				found = true
				if _, err := os.Stat(s.KeptAs); err != nil {
					t.Errorf("the damaged range was not kept: %v", err)
				}
			case reason == "truncated" && s.KeptAs == "" && strings.Contains(s.Line, "acknowledged writes lost"):
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v bytes %s, and no status entry says so: %+v", client, reasons[reason], reason, st)
		}
	}
	if n, _ := promValue(metrics, `otelcol_processor_dedup_storage_recovered_items{outcome="uncounted",store="`+store+`"}`); int(n) != len(entries) {
		t.Errorf("storage_recovered_items{outcome=uncounted,store=%s} is %v, want one per status entry (%d):\n%s", store, n, len(entries), grepLines(metrics, "storage_recovered"))
	}
	return reasons
}

// processCPU is the CPU time (user and system) a running process has
// used, from /proc/PID/stat, whose times are in USER_HZ (100) ticks.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatalf("reading the gateway's CPU time: %v", err)
	}
	// Fields after the command name (which may hold spaces, in
	// parentheses): state is the 3rd field of the line, utime the 14th
	// and stime the 15th.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

func truncateHalf(t *testing.T, path string) {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// overwrite writes n random bytes at off (negative: from the middle).
func overwrite(off, n int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if off < 0 {
			st, _ := f.Stat()
			off = st.Size() / 2
		}
		b := make([]byte, n)
		r := rand.New(rand.NewPCG(uint64(off), uint64(n)))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQueueTruncatedToHalf: the queue's segment cut to half its size. The
// entries in the half cut vanish with the metadata that counted them: the
// restart reports acknowledged writes lost (truncated) and says their
// loss cannot be counted; the entries of the first half are delivered,
// once each.
func TestQueueTruncatedToHalf(t *testing.T) {
	o := damagedBacklog(t, queueClient, truncateHalf)
	if o.reasons["truncated"] == 0 || o.reasons["damaged"] > 0 {
		t.Errorf("discarded bytes %v, want truncated only", o.reasons)
	}
	if o.vanished == 0 || o.delivered == 0 || o.undecodable != 0 {
		t.Errorf("delivered %d, undecodable %d, vanished %d entries: want the first half delivered and the rest vanished", o.delivered, o.undecodable, o.vanished)
	}
}

// TestQueueHeadOverwritten: the segment's first 8 KiB (its magic and the
// first entry's record header) overwritten: the records after are read,
// the first entry is found missing when the queue reaches it, and the
// rest is delivered.
func TestQueueHeadOverwritten(t *testing.T) {
	o := damagedBacklog(t, queueClient, overwrite(0, 8192))
	if o.reasons["damaged"] == 0 {
		t.Errorf("discarded bytes %v, want damaged", o.reasons)
	}
	if o.undecodable == 0 || o.vanished != 0 {
		t.Errorf("delivered %d, undecodable %d, vanished %d entries: want the first entry undecodable and none vanished", o.delivered, o.undecodable, o.vanished)
	}
}

// TestQueueMiddleOverwritten: 16 KiB in the middle overwritten: the
// entries whose records it hit are found missing when the queue reaches
// them, and counted; every other entry is delivered.
func TestQueueMiddleOverwritten(t *testing.T) {
	o := damagedBacklog(t, queueClient, overwrite(-1, 16384))
	if o.reasons["damaged"] == 0 {
		t.Errorf("discarded bytes %v, want damaged", o.reasons)
	}
	if o.undecodable == 0 || o.vanished != 0 || o.delivered+o.undecodable != backlogRequests {
		t.Errorf("delivered %d, undecodable %d, vanished %d entries: want delivered + undecodable = %d", o.delivered, o.undecodable, o.vanished, backlogRequests)
	}
}

// TestJournalTruncatedToHalf: the journal's segment cut to half: every
// entry is delivered once (the queue is whole), the truncation is
// reported, and copies of the spans journaled in the half cut pass again.
func TestJournalTruncatedToHalf(t *testing.T) {
	o := damagedBacklog(t, journalClient, truncateHalf)
	if o.reasons["truncated"] == 0 || o.reasons["damaged"] > 0 {
		t.Errorf("discarded bytes %v, want truncated only", o.reasons)
	}
	if o.delivered != backlogRequests || o.forgotten == 0 || o.forgotten == acknowledged {
		t.Errorf("delivered %d entries, %d spans forgotten: want all delivered and the second half forgotten", o.delivered, o.forgotten)
	}
}

// TestJournalHeadOverwritten: the journal segment's first 8 KiB (its
// magic, the seed, the first request's record) overwritten.
func TestJournalHeadOverwritten(t *testing.T) {
	o := damagedBacklog(t, journalClient, overwrite(0, 8192))
	if o.reasons["damaged"] == 0 {
		t.Errorf("discarded bytes %v, want damaged", o.reasons)
	}
	if o.delivered != backlogRequests || o.forgotten == 0 {
		t.Errorf("delivered %d entries, %d spans forgotten: want all delivered and the first request's spans forgotten", o.delivered, o.forgotten)
	}
}

// TestJournalMiddleGarbled: 16 KiB in the middle of the journal's segment
// overwritten: the requests whose records it hit are forgotten, the
// others still caught.
func TestJournalMiddleGarbled(t *testing.T) {
	o := damagedBacklog(t, journalClient, overwrite(-1, 16384))
	if o.reasons["damaged"] == 0 {
		t.Errorf("discarded bytes %v, want damaged", o.reasons)
	}
	if o.delivered != backlogRequests || o.forgotten == 0 || o.forgotten > 2*perEntry {
		t.Errorf("delivered %d entries, %d spans forgotten: want all delivered and the one or two requests hit forgotten", o.delivered, o.forgotten)
	}
}

// TestSecondGatewaySameDataDir: a second gateway on the same data dir
// (other ports) exits at once with one line naming the dir and the PID
// holding it.
func TestSecondGatewaySameDataDir(t *testing.T) {
	d := startDefault(t)
	args := []string{"run", "--grpc-endpoint", freePort(t), "--http-endpoint", freePort(t), "--metrics-endpoint", freePort(t),
		"--telemetry-endpoint", freePort(t), "--health-endpoint", freePort(t), "--status-endpoint", freePort(t), "--data-dir", d.dataDir}
	// The data dir's lock is taken without waiting (LOCK_NB): the line
	// naming the PID that holds it is how the refusal is known to come
	// from there, not from a storage extension timing out on its file.
	r := runCLI(t, args...)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	pid := strconv.Itoa(d.g.cmd.Process.Pid)
	if r.code != 4 || len(lines) != 1 || !strings.Contains(lines[0], d.dataDir) || !strings.Contains(lines[0], "pid "+pid) {
		t.Errorf("exit %d; want 4 and one line naming %s and pid %s, got:\n%s", r.code, d.dataDir, pid, r.stderr)
	}
}

// TestLocalFileUnwritable: in local mode a traces file that cannot be
// opened stops the start with a message naming it.
func TestLocalFileUnwritable(t *testing.T) {
	dir := t.TempDir()
	// A directory where the traces file must be: no user can open it for
	// writing (root included).
	if err := os.MkdirAll(filepath.Join(dir, "traces.jsonl"), 0o750); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--grpc-endpoint", freePort(t), "--http-endpoint", freePort(t), "--metrics-endpoint", freePort(t),
		"--telemetry-endpoint", freePort(t), "--health-endpoint", freePort(t), "--status-endpoint", freePort(t), "--data-dir", dir}
	r := runCLI(t, args...)
	want := filepath.Join(dir, "traces.jsonl")
	if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("exit %d; want a failure in one line naming %s, got:\n%s", r.code, want, r.stderr)
	}
}

// TestRandomDamageEndToEnd: random damage of each kind (a truncation, an
// overwritten range, zeroed 4 KiB pages) to the newest segment of the
// queue and of the journal, each from a real backlog: the gateway serves
// within seconds, delivers exactly what the records left whole hold, and
// reports every loss (damagedBacklog). extension/logstorageextension's
// tests run many more cases on the store alone.
func TestRandomDamageEndToEnd(t *testing.T) {
	for seed := range 6 {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 2025))
			client := queueClient
			if seed%2 == 1 {
				client = journalClient
			}
			damagedBacklog(t, client, func(t *testing.T, path string) {
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				size := st.Size()
				switch seed / 2 {
				case 0:
					at := r.Int64N(size)
					t.Logf("damage: truncated to %d of %d bytes", at, size)
					if err := os.Truncate(path, at); err != nil {
						t.Fatal(err)
					}
				case 1:
					at, n := r.Int64N(size), 1+r.Int64N(16384)
					t.Logf("damage: %d bytes overwritten at %d of %d", n, at, size)
					overwrite(at, n)(t, path)
				default:
					f, err := os.OpenFile(path, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					for range 1 + r.IntN(3) {
						at := 4096 * r.Int64N(size/4096)
						t.Logf("damage: 4 KiB zeroed at %d of %d", at, size)
						if _, err := f.WriteAt(make([]byte, 4096), at); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		})
	}
}

// previousDefault is the embedded default as it was before log_storage
// (7293662^), rendered from the current one: file_storage in
// DATA_DIR/queue where log_storage is, and group commit's hold of 50ms.
func previousDefault(t *testing.T, current, dataDir string) string {
	t.Helper()
	replace := func(s, from, to string, n int) string {
		if c := strings.Count(s, from); c != n {
			t.Fatalf("the default config has %q %d times, want %d: previousDefault needs updating", from, c, n)
		}
		return strings.ReplaceAll(s, from, to)
	}
	old := replace(current, "  log_storage:\n    directory: "+dataDir+"/log\n", "  file_storage:\n    directory: "+dataDir+"/queue\n    create_directory: true\n", 1)
	old = replace(old, "    file_storage_directory: "+dataDir+"/queue\n", "", 1)
	old = replace(old, "storage: log_storage\n", "storage: file_storage\n", 2)
	old = replace(old, "extensions: [health_check, log_storage, guard]", "extensions: [health_check, file_storage, guard]", 1)
	old = replace(old, "max_delay: 0s\n", "max_delay: 50ms\n", 1)
	for _, l := range strings.Split(old, "\n") {
		if code, _, _ := strings.Cut(l, "#"); strings.Contains(code, "log_storage") {
			t.Fatalf("the previous default still uses log_storage: %q", l)
		}
	}
	return old
}

// TestUpgradeFromFileStorage: a data dir of the previous embedded default
// (file_storage files in DATA_DIR/queue) holding an acknowledged backlog,
// queued while the upstream was down, the gateway killed with SIGKILL.
// The current default, started on it with the upstream back, moves the
// files into log_storage and says so, keeps them as NAME.migrated-TIME,
// delivers every acknowledged span once, and still drops copies of them
// (dedup's journal was moved too).
func TestUpgradeFromFileStorage(t *testing.T) {
	d, bl, upstream, _ := fileStorageBacklog(t)
	upgradedDelivers(t, d, bl, upstream, func() *gateway { return startGateway(t, d.health, d.env, d.args...) })
}

// fileStorageBacklog runs the previous embedded default (file_storage)
// on a new data dir with its upstream down, has it acknowledge a backlog
// and kills it with SIGKILL (queueInFileStorage). It returns the
// gateway's addresses and flags (not running), the backlog, the
// upstream's address and the current default config rendered with those
// flags.
func fileStorageBacklog(t *testing.T) (d *defaultGateway, bl *backlog, upstream, current string) {
	t.Helper()
	upstream = freePort(t)
	d = newDefault(t, t.TempDir(), "--upstream", "http://"+upstream)
	r := runCLI(t, append([]string{"run", "default-config"}, d.args...)...)
	if r.code != 0 {
		t.Fatalf("default-config: exit %d: %s", r.code, r.stderr)
	}
	return d, queueInFileStorage(t, d, previousDefault(t, r.stdout, d.dataDir)), upstream, r.stdout
}

// queueInFileStorage runs previous, a config that stores in file_storage
// under d.dataDir/queue and listens on d's addresses, with its upstream
// down; has it acknowledge a backlog; and kills it with SIGKILL.
func queueInFileStorage(t *testing.T, d *defaultGateway, previous string) *backlog {
	t.Helper()
	g := startGatewayConfig(t, d.health, previous)
	bl := newBacklog(t.Name())
	bl.send(t, d.grpc)
	// A run with file_storage in its config moves nothing: this one wrote
	// file_storage's files, and no log_storage.
	queueDir := filepath.Join(d.dataDir, "queue")
	for _, name := range []string{queueClient, journalClient} {
		if st, err := os.Stat(filepath.Join(queueDir, name)); err != nil || st.Size() == 0 {
			t.Fatalf("the previous config wrote no %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "log")); !os.IsNotExist(err) {
		t.Fatalf("the previous config made %s/log (%v)", d.dataDir, err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-g.done
	return bl
}

// upgradedDelivers is the rest of TestUpgradeFromFileStorage: with the
// upstream back, start (the current config, on d's data dir and
// addresses) moves file_storage's files into log_storage and says so,
// keeps them as NAME.migrated-TIME, delivers every acknowledged span of
// bl once, and still drops copies of them.
func upgradedDelivers(t *testing.T, d *defaultGateway, bl *backlog, upstream string, start func() *gateway) {
	t.Helper()
	queueDir := filepath.Join(d.dataDir, "queue")

	sk := &sink{spans: map[[24]byte]int{}}
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	d.g = start()
	waitFor(t, 2*time.Minute, "the queue to empty", func() bool { return d.queueSize(t) == 0 })
	delivered := sk.snapshot()
	var missed, twice int
	for _, keys := range bl.keys {
		for _, k := range keys {
			switch n := delivered[k]; {
			case n == 0:
				missed++
			case n > 1:
				twice++
			}
		}
	}
	if missed+twice > 0 || len(delivered) != acknowledged {
		t.Errorf("of %d acknowledged spans, %d not delivered, %d delivered more than once; %d distinct spans delivered", acknowledged, missed, twice, len(delivered))
	}

	log := d.g.stderr.String()
	for _, name := range []string{queueClient, journalClient} {
		file := filepath.Join(queueDir, name)
		line := grepLines(log, "migrated file_storage file "+file+" to log_storage")
		_, keys, _ := strings.Cut(line, `"keys": `)
		n, _ := strconv.Atoi(strings.TrimRight(keys, "}\n"))
		if strings.Count(line, "\n") != 0 || !strings.Contains(line, "\tinfo\t") || !strings.Contains(line, "keys imported into "+filepath.Join(d.dataDir, "log", name)) || n < backlogRequests {
			t.Errorf("want one info line saying %s was migrated, with at least %d keys, got:\n%s", file, backlogRequests, line)
		}
		kept, err := filepath.Glob(file + ".migrated-*")
		if err != nil || len(kept) != 1 {
			t.Errorf("%s kept as %v (%v), want one %s.migrated-TIME", name, kept, err, name)
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", file, err)
		}
	}
	if st := get(t, "http://"+d.status+"/status.json"); strings.Contains(st, "storage_recovered") {
		t.Errorf("the status page reports storage recovered after a clean upgrade:\n%s", st)
	}

	// The journal moved with the queue: copies of the backlog are dropped.
	bl.send(t, d.grpc)
	waitFor(t, 2*time.Minute, "the queue to empty after the re-send", func() bool { return d.queueSize(t) == 0 })
	if copies := sk.copiesOver(); len(copies) > 0 {
		t.Errorf("%d spans delivered twice after a re-send, e.g. %v", len(copies), copies[:min(5, len(copies))])
	}
}
