package e2e

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/doubletake/doubletake/internal/capture"
)

// The backlog of the damage tests: requests of perEntry spans sent one at
// a time while the upstream is down, each acknowledged, so that each is
// one entry of the persistent queue (group commit merges only requests
// that wait together).
const (
	backlogRequests = 100
	perEntry        = 1024
)

const queueFile = "exporter_dedup_otlp_grpc_upstream_traces"
const journalFile = "processor_dedup_"

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

// damagedBacklog queues backlogRequests*perEntry acknowledged spans
// while the upstream is down, kills the gateway with SIGKILL, damages a
// file of its data dir with damage, brings the upstream back and starts
// the gateway again on the same data dir. It checks that the gateway
// serves again within seconds of CPU time, that every span the restart
// reports salvaged is delivered, and that delivered + reported lost =
// acknowledged, and returns what the status page reports.
func damagedBacklog(t *testing.T, file string, damage func(t *testing.T, path string)) (*defaultGateway, []storageRecovered) {
	t.Helper()
	upstream := freePort(t)
	d := startDefault(t, "--upstream", "http://"+upstream)
	conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	r := rand.New(rand.NewPCG(uint64(len(t.Name())), 25))
	ctx := ctxTimeout(t, 5*time.Minute)
	for range backlogRequests {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "backlog")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for range perEntry {
			s := spans.AppendEmpty()
			var tid [16]byte
			var sid [8]byte
			for i := range tid {
				tid[i] = byte(r.Uint32())
			}
			for i := range sid {
				sid[i] = byte(r.Uint32())
			}
			s.SetTraceID(tid)
			s.SetSpanID(sid)
			s.SetName("op")
		}
		if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
			t.Fatalf("export while the upstream is down: %v", err)
		}
	}
	const acknowledged = backlogRequests * perEntry
	if err := d.g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	path := filepath.Join(d.dataDir, "queue", file)
	damage(t, path)

	sk := &sink{spans: map[[24]byte]int{}}
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })

	began := time.Now()
	d.restart(t)
	// The salvage's cost is CPU time: the wall clock it takes depends on
	// what else the machine runs.
	cpu := processCPU(t, d.g.cmd.Process.Pid)
	t.Logf("the gateway served %s after its restart, having used %s of CPU", time.Since(began).Round(time.Millisecond), cpu)
	if cpu > 15*time.Second {
		t.Errorf("the gateway used %s of CPU to start again on the damaged data dir, want a few seconds", cpu)
	}
	var st struct {
		Storage []storageRecovered `json:"storage_recovered"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+d.status+"/status.json")), &st); err != nil {
		t.Fatal(err)
	}
	var queue *storageRecovered
	for i := range st.Storage {
		if st.Storage[i].Store == "queue" && st.Storage[i].File != "" {
			queue = &st.Storage[i]
		}
	}
	want := acknowledged
	if queue != nil {
		if queue.Salvaged+queue.Lost != acknowledged && !queue.LostUncounted {
			t.Errorf("queue: salvaged %d + lost %d != acknowledged %d", queue.Salvaged, queue.Lost, acknowledged)
		}
		// Uncounted: the file no longer says how many entries were lost
		// (its newest metadata went with them); the report must say so,
		// and what it counts must not exceed what was acknowledged.
		if queue.LostUncounted && (!strings.Contains(queue.Line, "cannot be counted") || queue.Salvaged+queue.LostEntries*perEntry > acknowledged) {
			t.Errorf("queue: loss not counted and not said so: salvaged %d, %d lost entries of %d spans, acknowledged %d: %s", queue.Salvaged, queue.LostEntries, perEntry, acknowledged, queue.Line)
		}
		want = int(queue.Salvaged)
	}
	waitFor(t, 2*time.Minute, "the salvaged backlog to be delivered", func() bool { _, u := sk.counts(); return u >= want })
	// What more could arrive is what the salvage said was lost: wait for
	// the queue to be empty before counting.
	waitFor(t, time.Minute, "the queue to empty", func() bool {
		seen := false
		for _, l := range strings.Split(get(t, "http://"+d.tel+"/metrics"), "\n") {
			if strings.HasPrefix(l, "otelcol_exporter_queue_size{") && strings.Contains(l, "dedup_otlp_grpc/upstream") {
				if !strings.HasSuffix(l, " 0") {
					return false
				}
				seen = true
			}
		}
		return seen
	})
	_, unique := sk.counts()
	if unique != want {
		t.Errorf("delivered %d distinct spans, want the %d salvaged (acknowledged %d)", unique, want, acknowledged)
	}
	t.Logf("acknowledged %d, delivered %d; status: %+v", acknowledged, unique, st.Storage)
	return d, st.Storage
}

// assertReported checks the warn line, the metric and the status line of
// the damaged file.
func assertReported(t *testing.T, d *defaultGateway, st []storageRecovered, file, store string, lines ...string) {
	t.Helper()
	log := d.g.stderr.String()
	warns := grepLines(log, "damaged storage file")
	if strings.Count(warns, "\n")+1 != 1 || !strings.Contains(warns, "\twarn\t") || !strings.Contains(warns, file) {
		t.Errorf("want one warn line naming %s, got:\n%s", file, warns)
	}
	for _, l := range lines {
		if !strings.Contains(warns, l) {
			t.Errorf("the warn line does not say %q:\n%s", l, warns)
		}
	}
	found := false
	for _, s := range st {
		if strings.HasSuffix(s.File, file) && s.Store == store && strings.Contains(s.Line, "moved aside") {
			found = true
			if _, err := os.Stat(s.KeptAs); err != nil {
				t.Errorf("the damaged file was not kept: %v", err)
			}
		}
	}
	if !found {
		t.Errorf("the status page has no line for %s: %+v", file, st)
	}
	m := get(t, "http://"+d.tel+"/metrics")
	if !strings.Contains(m, `otelcol_processor_dedup_storage_recovered_items{outcome="salvaged",store="`+store+`"}`) {
		t.Errorf("no storage_recovered_items metric for %s:\n%s", store, grepLines(m, "storage_recovered"))
	}
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

// TestQueueTruncatedToHalf: on the unchanged collector this file made the
// gateway panic at every start.
func TestQueueTruncatedToHalf(t *testing.T) {
	d, st := damagedBacklog(t, queueFile, truncateHalf)
	assertReported(t, d, st, queueFile, "queue", "traces queue: salvaged")
}

// TestQueueHeadOverwritten: its first 8 KiB (both meta pages) overwritten;
// the unchanged collector exited with "invalid database" at every start.
func TestQueueHeadOverwritten(t *testing.T) {
	d, st := damagedBacklog(t, queueFile, overwrite(0, 8192))
	assertReported(t, d, st, queueFile, "queue", "traces queue: salvaged")
}

// TestQueueMiddleOverwritten: 16 KiB in the middle overwritten; the
// unchanged collector started and lost entries without a word.
func TestQueueMiddleOverwritten(t *testing.T) {
	d, st := damagedBacklog(t, queueFile, overwrite(-1, 16384))
	assertReported(t, d, st, queueFile, "queue", "traces queue: salvaged")
}

// TestJournalTruncatedToHalf: the unchanged collector faulted (mmap past
// the end) at every start.
func TestJournalTruncatedToHalf(t *testing.T) {
	d, st := damagedBacklog(t, journalFile, truncateHalf)
	assertReported(t, d, st, journalFile, "journal", "dedup journal: salvaged", "may pass as new for one window")
}

// TestJournalMiddleGarbled: the unchanged collector panicked
// ("freepages: failed to get all reachable pages") at every start.
func TestJournalMiddleGarbled(t *testing.T) {
	d, st := damagedBacklog(t, journalFile, overwrite(-1, 16384))
	assertReported(t, d, st, journalFile, "journal", "dedup journal: salvaged")
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

// TestRandomDamageEndToEnd: a few seeds of random damage (a truncation,
// an overwritten range, zeroed pages) to either file, each from a real
// backlog: the gateway serves within seconds, every salvaged span is
// delivered, and loss is counted or said to be uncountable
// (damagedBacklog). internal/datadir's TestRandomDamage runs many more
// seeds on the checker and salvager alone.
func TestRandomDamageEndToEnd(t *testing.T) {
	for seed := range 3 {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 2025))
			file := queueFile
			if seed%2 == 1 {
				file = journalFile
			}
			damagedBacklog(t, file, func(t *testing.T, path string) {
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				size := st.Size()
				switch r.IntN(3) {
				case 0:
					if err := os.Truncate(path, r.Int64N(size)); err != nil {
						t.Fatal(err)
					}
				case 1:
					overwrite(r.Int64N(size), 1+r.Int64N(16384))(t, path)
				default:
					f, err := os.OpenFile(path, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					for range 1 + r.IntN(3) {
						if _, err := f.WriteAt(make([]byte, 4096), 4096*r.Int64N(size/4096)); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		})
	}
}
