package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/internal/capture"
)

// The data dir on a small tmpfs, the upstream away while a sender that
// records every acknowledgement fills it: the gateway refuses new data
// retryably (gRPC Unavailable) and stays up, the status page says the
// data dir is full, and everything it acknowledged reaches the upstream
// once it is back (or once room is freed by hand, or after a kill -9
// while full). Before the drain reserve, 4 of 5 acknowledged items of
// such a backlog were lost.

// fullDiskBytes is the tmpfs the data dir is on.
const fullDiskBytes = 24 << 20

func mountSmallDisk(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs for the data dir (the full-disk tests run as root, as the README's test command does): %v", size, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fullSignal sends one signal's requests of perRequest items, each item
// numbered, and counts the numbers the upstream received.
type fullSignal struct {
	name   string
	export func(ctx context.Context, conn *grpc.ClientConn, first, n int) error
	// received are the item numbers the sink holds, with copies.
	received func(r *capture.Request) []int
}

const fullPerRequest = 200

// fullPayload makes each item about 250 bytes: a request is about 50 KiB,
// small enough for the queue (not the direct path).
var fullPayload = string(make([]byte, 200))

func fullSignals() []fullSignal {
	return []fullSignal{
		{"traces", func(ctx context.Context, conn *grpc.ClientConn, first, n int) error {
			td := ptrace.NewTraces()
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", "fulldisk")
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for i := first; i < first+n; i++ {
				s := spans.AppendEmpty()
				s.SetTraceID(pcommon.TraceID{0xfd, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
				s.SetSpanID(pcommon.SpanID{1, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
				s.SetName("work")
				s.SetStartTimestamp(1)
				s.SetEndTimestamp(2)
				s.Attributes().PutInt("n", int64(i))
				s.Attributes().PutStr("pad", fullPayload)
			}
			_, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
			return err
		}, func(r *capture.Request) []int {
			var out []int
			if r.Signal != capture.Traces {
				return nil
			}
			rss := r.Traces.ResourceSpans()
			for i := 0; i < rss.Len(); i++ {
				sss := rss.At(i).ScopeSpans()
				for j := 0; j < sss.Len(); j++ {
					for k := 0; k < sss.At(j).Spans().Len(); k++ {
						if v, ok := sss.At(j).Spans().At(k).Attributes().Get("n"); ok {
							out = append(out, int(v.Int()))
						}
					}
				}
			}
			return out
		}},
		{"logs", func(ctx context.Context, conn *grpc.ClientConn, first, n int) error {
			ld := plog.NewLogs()
			rl := ld.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("service.name", "fulldisk")
			recs := rl.ScopeLogs().AppendEmpty().LogRecords()
			for i := first; i < first+n; i++ {
				lr := recs.AppendEmpty()
				lr.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)))
				lr.Body().SetStr(fmt.Sprintf("record %d", i))
				lr.Attributes().PutInt("n", int64(i))
				lr.Attributes().PutStr("pad", fullPayload)
			}
			_, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
			return err
		}, func(r *capture.Request) []int {
			var out []int
			if r.Signal != capture.Logs {
				return nil
			}
			rls := r.Logs.ResourceLogs()
			for i := 0; i < rls.Len(); i++ {
				sls := rls.At(i).ScopeLogs()
				for j := 0; j < sls.Len(); j++ {
					for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
						if v, ok := sls.At(j).LogRecords().At(k).Attributes().Get("n"); ok {
							out = append(out, int(v.Int()))
						}
					}
				}
			}
			return out
		}},
		{"metrics", func(ctx context.Context, conn *grpc.ClientConn, first, n int) error {
			// A gauge per item: one stream each (attribute n), one
			// point: no two points of a stream, no copy among them.
			md := pmetric.NewMetrics()
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("service.name", "fulldisk")
			ms := rm.ScopeMetrics().AppendEmpty().Metrics()
			m := ms.AppendEmpty()
			m.SetName("fulldisk.items")
			pts := m.SetEmptyGauge().DataPoints()
			for i := first; i < first+n; i++ {
				p := pts.AppendEmpty()
				p.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)))
				p.SetIntValue(int64(i))
				p.Attributes().PutInt("n", int64(i))
				p.Attributes().PutStr("pad", fullPayload)
			}
			_, err := pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
			return err
		}, func(r *capture.Request) []int {
			var out []int
			if r.Signal != capture.Metrics {
				return nil
			}
			rms := r.Metrics.ResourceMetrics()
			for i := 0; i < rms.Len(); i++ {
				sms := rms.At(i).ScopeMetrics()
				for j := 0; j < sms.Len(); j++ {
					for k := 0; k < sms.At(j).Metrics().Len(); k++ {
						m := sms.At(j).Metrics().At(k)
						if m.Name() != "fulldisk.items" {
							continue
						}
						for p := 0; p < m.Gauge().DataPoints().Len(); p++ {
							out = append(out, int(m.Gauge().DataPoints().At(p).IntValue()))
						}
					}
				}
			}
			return out
		}},
	}
}

// fullDiskRun is one run: the gateway, its sender, its upstream.
type fullDiskRun struct {
	t        *testing.T
	sig      fullSignal
	d        *defaultGateway
	upstream string // the address the upstream listens on when back

	mu       sync.Mutex
	got      map[int]int // item number: copies received upstream
	acked    []int       // the first item of each acknowledged request
	refusals map[codes.Code]int
	next     int // the next request's first item
}

func newFullDiskRun(t *testing.T, sig fullSignal, dataDir string) *fullDiskRun {
	r := &fullDiskRun{t: t, sig: sig, upstream: freePort(t), got: map[int]int{}, refusals: map[codes.Code]int{}}
	r.d = newDefault(t, dataDir, "--upstream", "http://"+r.upstream)
	r.d.g = startGateway(t, r.d.health, r.d.env, r.d.args...)
	return r
}

// send sends requests until one has been refused refusals times in a row
// (the data dir full) or most have been acknowledged; each refusal must
// be retryable.
func (r *fullDiskRun) send(refusals, most int) (acked int) {
	r.t.Helper()
	conn, err := grpc.NewClient(r.d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close()
	for acked < most {
		inARow := 0
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := r.sig.export(ctx, conn, r.next, fullPerRequest)
			cancel()
			if err == nil {
				break
			}
			code := status.Code(err)
			r.mu.Lock()
			r.refusals[code]++
			r.mu.Unlock()
			if code != codes.Unavailable && code != codes.ResourceExhausted {
				r.t.Fatalf("request at item %d refused with %v: not retryable", r.next, err)
			}
			if inARow++; inARow >= refusals {
				return acked
			}
			time.Sleep(5 * time.Millisecond) // the sender's retry backoff
		}
		r.mu.Lock()
		r.acked = append(r.acked, r.next)
		r.mu.Unlock()
		r.next += fullPerRequest
		acked++
	}
	return acked
}

// upstreamBack starts the upstream on its address.
func (r *fullDiskRun) upstreamBack() {
	r.t.Helper()
	srv, err := capture.Listen(r.upstream, func(req *capture.Request) error {
		items := r.sig.received(req)
		r.mu.Lock()
		for _, i := range items {
			r.got[i]++
		}
		r.mu.Unlock()
		return nil
	})
	if err != nil {
		r.t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	r.t.Cleanup(func() { _ = srv.Close() })
}

// missing counts the acknowledged items not received upstream.
func (r *fullDiskRun) missing() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, first := range r.acked {
		for i := first; i < first+fullPerRequest; i++ {
			if r.got[i] == 0 {
				n++
			}
		}
	}
	return n
}

func (r *fullDiskRun) waitDelivered() {
	r.t.Helper()
	waitFor(r.t, 40*time.Second, "every acknowledged item upstream", func() bool { return r.missing() == 0 })
}

// dataDirFull reads status.json: whether a data dir is reported full.
func (r *fullDiskRun) dataDirFull() bool {
	var st struct {
		DataDirs []struct {
			Full bool `json:"full"`
		} `json:"data_dirs"`
	}
	if err := json.Unmarshal([]byte(get(r.t, "http://"+r.d.status+"/status.json")), &st); err != nil {
		r.t.Fatalf("status.json: %v", err)
	}
	for _, d := range st.DataDirs {
		if d.Full {
			return true
		}
	}
	return false
}

// fill sends until the data dir is full, and checks the gateway says so
// and is still up.
func (r *fullDiskRun) fill() {
	r.t.Helper()
	n := r.send(40, 1<<20)
	if n < 50 {
		r.t.Fatalf("%s: only %d requests acknowledged before the data dir was full", r.sig.name, n)
	}
	select {
	case <-r.d.g.done:
		r.t.Fatalf("the gateway exited on a full data dir: %v", r.d.g.err)
	default:
	}
	if !r.dataDirFull() {
		r.t.Errorf("%s: status.json does not report the data dir full", r.sig.name)
	}
}

func (r *fullDiskRun) report(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	copies := 0
	for _, n := range r.got {
		if n > 1 {
			copies += n - 1
		}
	}
	r.t.Logf("%s %s: %d items acknowledged, %d received upstream (%d distinct, %d copies); refusals by code: %v",
		r.sig.name, what, len(r.acked)*fullPerRequest, len(r.got)+copies, len(r.got), copies, r.refusals)
}

// TestFullDataDir: per signal, the upstream away fills the data dir; the
// upstream back drains it; new data is taken again.
func TestFullDataDir(t *testing.T) {
	for _, sig := range fullSignals() {
		t.Run(sig.name, func(t *testing.T) {
			r := newFullDiskRun(t, sig, filepath.Join(mountSmallDisk(t, fullDiskBytes), "data"))
			r.fill()
			r.upstreamBack()
			r.waitDelivered()
			if !strings.Contains(r.d.g.stderr.String(), "The data dir is full") {
				t.Error("no warn line when the data dir filled")
			}
			// Drained: taken again.
			waitFor(t, time.Minute, "the data dir to take new data", func() bool { return r.send(1, 20) == 20 })
			r.waitDelivered()
			r.report("upstream back")
		})
	}
}

// TestFullDataDirFreedByHand: room freed by hand (another file on the
// filesystem removed) while the upstream is still away: new data is
// taken again at once, and all of it reaches the upstream once back.
func TestFullDataDirFreedByHand(t *testing.T) {
	mnt := mountSmallDisk(t, fullDiskBytes)
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newFullDiskRun(t, fullSignals()[0], filepath.Join(mnt, "data"))
	r.fill()
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the data dir to take new data after room was freed", func() bool { return r.send(1, 20) == 20 })
	r.upstreamBack()
	r.waitDelivered()
	r.report("freed by hand")
}

// TestFullDataDirKill9: kill -9 while the data dir is full, a start again
// on the full data dir, the upstream back: everything acknowledged is
// delivered.
func TestFullDataDirKill9(t *testing.T) {
	r := newFullDiskRun(t, fullSignals()[0], filepath.Join(mountSmallDisk(t, fullDiskBytes), "data"))
	r.fill()
	if err := r.d.g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.d.g.done
	r.d.restartOnNewPorts(t)
	r.upstreamBack()
	r.waitDelivered()
	r.report("kill -9 while full")
}
