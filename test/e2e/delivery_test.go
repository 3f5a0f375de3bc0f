package e2e

import (
	"context"
	be "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// collectorUpstream is the collector's own OTLP receiver with its default
// gRPC settings (so its default 4 MiB receive limit), standing for the
// collector a gateway forwards to. It counts every span by id and every
// log record by body, and the size of the largest request it took.
type collectorUpstream struct {
	addr string

	mu        sync.Mutex
	spans     map[[24]byte]int
	total     int
	logs      map[string]int
	maxSpans  int // most spans in one request
	stopFuncs []func()
	// refuse, when set, answers a request before it is counted: a
	// non-nil error refuses it whole.
	refuse func(ptrace.Traces) error
	// hold, while set, keeps every trace request waiting until it is
	// closed; then the request is taken (it had arrived) whether or not
	// its sender still waits. held counts the requests and spans held.
	hold      chan struct{}
	held      int
	heldSpans int
	// dropAbandoned makes a held request whose caller has gone (its
	// context ended) count for nothing when it is let go: a backend that
	// keeps only what it answers.
	dropAbandoned bool
	// holdLogs makes hold keep log requests waiting too.
	holdLogs bool
	// points counts metric points by name and attribute i, holdMetrics
	// holds their requests (copies_test.go).
	points      map[string]int
	holdMetrics bool
}

func newCollectorUpstream(t *testing.T, addr string) *collectorUpstream {
	u := &collectorUpstream{addr: addr, spans: map[[24]byte]int{}, logs: map[string]int{}}
	u.start(t)
	t.Cleanup(u.stop)
	return u
}

// start listens on addr; the port must be free.
func (u *collectorUpstream) start(t *testing.T) {
	t.Helper()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	g := configgrpc.NewDefaultServerConfig()
	g.NetAddr.Endpoint = u.addr
	cfg.Protocols.GRPC = configoptional.Some(g)
	set := receivertest.NewNopSettings(f.Type())
	tr, err := f.CreateTraces(context.Background(), set, cfg, consumerTraces(u.takeTraces))
	if err != nil {
		t.Fatal(err)
	}
	lr, err := f.CreateLogs(context.Background(), set, cfg, consumerLogs(u.takeLogs))
	if err != nil {
		t.Fatal(err)
	}
	mr, err := f.CreateMetrics(context.Background(), set, cfg, consumerMetrics(u.takeMetrics))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []component.Component{tr, lr, mr} {
		if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatalf("starting the upstream on %s: %v", u.addr, err)
		}
	}
	u.mu.Lock()
	u.stopFuncs = []func(){func() { _ = tr.Shutdown(context.Background()) }, func() { _ = lr.Shutdown(context.Background()) },
		func() { _ = mr.Shutdown(context.Background()) }}
	u.mu.Unlock()
}

func (u *collectorUpstream) stop() {
	u.release() // a held request would keep the receiver from stopping
	u.mu.Lock()
	fs := u.stopFuncs
	u.stopFuncs = nil
	u.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (u *collectorUpstream) takeTraces(ctx context.Context, td ptrace.Traces) error {
	u.mu.Lock()
	if hold := u.hold; hold != nil {
		u.held++
		u.heldSpans += td.SpanCount()
		u.mu.Unlock()
		<-hold
		u.mu.Lock()
	}
	defer u.mu.Unlock()
	if u.dropAbandoned && ctx.Err() != nil {
		return ctx.Err()
	}
	if u.refuse != nil {
		if err := u.refuse(td); err != nil {
			return err
		}
	}
	u.maxSpans = max(u.maxSpans, td.SpanCount())
	eachSpan(td, func(k [24]byte) { u.spans[k]++; u.total++ })
	return nil
}

func (u *collectorUpstream) takeLogs(ctx context.Context, ld plog.Logs) error {
	u.mu.Lock()
	if hold := u.hold; hold != nil && u.holdLogs {
		u.held++
		u.mu.Unlock()
		<-hold
		u.mu.Lock()
	}
	defer u.mu.Unlock()
	if u.dropAbandoned && ctx.Err() != nil {
		return ctx.Err()
	}
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, r := range sl.LogRecords().All() {
				u.logs[r.Body().AsString()]++
			}
		}
	}
	return nil
}

// holdAll makes every trace request wait until release.
func (u *collectorUpstream) holdAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.hold == nil {
		u.hold = make(chan struct{})
	}
}

// release lets the requests held go on, and takes the next ones at once.
func (u *collectorUpstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.hold != nil {
		close(u.hold)
		u.hold = nil
	}
}

// heldCounts is how many requests and spans were held so far.
func (u *collectorUpstream) heldCounts() (requests, spans int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.held, u.heldSpans
}

func (u *collectorUpstream) counts() (total, unique, maxSpans int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total, len(u.spans), u.maxSpans
}

// has says whether every id in want arrived.
func (u *collectorUpstream) has(want map[[24]byte]bool) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k := range want {
		if u.spans[k] == 0 {
			return false
		}
	}
	return true
}

func consumerTraces(f func(context.Context, ptrace.Traces) error) consumer.Traces {
	c, _ := consumer.NewTraces(f)
	return c
}

func consumerLogs(f func(context.Context, plog.Logs) error) consumer.Logs {
	c, _ := consumer.NewLogs(f)
	return c
}

func eachSpan(td ptrace.Traces, f func([24]byte)) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				var k [24]byte
				tid, sid := s.TraceID(), s.SpanID()
				copy(k[:16], tid[:])
				copy(k[16:], sid[:])
				f(k)
			}
		}
	}
}

// ackSender is a retrying OTLP/gRPC sender, as an SDK with retries is: it
// re-sends a request until it is answered OK or refused for good, and
// records the ids of every span and log record the gateway acknowledged.
type ackSender struct {
	traces ptraceotlp.GRPCClient
	logs   plogotlp.GRPCClient
	conn   *grpc.ClientConn

	mu         sync.Mutex
	acked      map[[24]byte]bool
	ackedLogs  map[string]bool
	refused    int // requests refused for good
	retries    atomic.Int64
	maxRequest int // most spans in one request
	// attempt is each attempt's timeout (its gRPC deadline); 0: 10 s.
	attempt time.Duration
}

func newAckSender(t *testing.T, addr string) *ackSender {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &ackSender{traces: ptraceotlp.NewGRPCClient(conn), logs: plogotlp.NewGRPCClient(conn), conn: conn,
		acked: map[[24]byte]bool{}, ackedLogs: map[string]bool{}}
}

// errRefused is a request the gateway refused for good (InvalidArgument).
var errRefused = errors.New("refused for good")

// retry calls send until it succeeds or fails for good; the pause between
// attempts is the sender's backoff, not a wait for the gateway.
func (s *ackSender) retry(ctx context.Context, send func(context.Context) error) error {
	timeout := 10 * time.Second
	if s.attempt > 0 {
		timeout = s.attempt
	}
	for {
		c, cancel := context.WithTimeout(ctx, timeout)
		err := send(c)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.InvalidArgument:
			return fmt.Errorf("%w: %w", errRefused, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.retries.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *ackSender) sendTraces(ctx context.Context, td ptrace.Traces) error {
	req := ptraceotlp.NewExportRequestFromTraces(td)
	err := s.retry(ctx, func(c context.Context) error { _, err := s.traces.Export(c, req); return err })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxRequest = max(s.maxRequest, td.SpanCount())
	switch {
	case err == nil:
		eachSpan(td, func(k [24]byte) { s.acked[k] = true })
	case errors.Is(err, errRefused):
		s.refused++
	}
	return err
}

func (s *ackSender) sendLogs(ctx context.Context, ld plog.Logs) error {
	req := plogotlp.NewExportRequestFromLogs(ld)
	err := s.retry(ctx, func(c context.Context) error { _, err := s.logs.Export(c, req); return err })
	if err == nil {
		s.mu.Lock()
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, r := range sl.LogRecords().All() {
					s.ackedLogs[r.Body().AsString()] = true
				}
			}
		}
		s.mu.Unlock()
	}
	return err
}

func (s *ackSender) ackedIDs() map[[24]byte]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[[24]byte]bool, len(s.acked))
	for k := range s.acked {
		out[k] = true
	}
	return out
}

// spanGen makes requests of unique spans: ids from a counter under a
// per-generator prefix, an attribute of pad bytes to give them weight.
type spanGen struct {
	prefix byte
	n      atomic.Uint64
}

func (g *spanGen) request(service string, spans, pad int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	filler := strings.Repeat("p", pad)
	for range spans {
		n := g.n.Add(1)
		var tid pcommon.TraceID
		var sid pcommon.SpanID
		tid[0] = g.prefix
		be.BigEndian.PutUint64(tid[8:], n)
		sid[0] = g.prefix
		be.BigEndian.PutUint64(sid[:], n|uint64(g.prefix)<<56)
		s := ss.AppendEmpty()
		s.SetTraceID(tid)
		s.SetSpanID(sid)
		s.SetName("work")
		s.SetStartTimestamp(pcommon.Timestamp(n))
		s.SetEndTimestamp(pcommon.Timestamp(n + 1000))
		if pad > 0 {
			s.Attributes().PutStr("pad", filler)
		}
	}
	return td
}

// missing lists up to 5 acknowledged ids that did not arrive, and how many.
func missing(acked map[[24]byte]bool, got func([24]byte) bool) (int, []string) {
	n := 0
	var some []string
	for k := range acked {
		if !got(k) {
			n++
			if len(some) < 5 {
				some = append(some, fmt.Sprintf("%x/%x", k[:16], k[16:]))
			}
		}
	}
	return n, some
}

// TestUpstreamLimitWithOversizedRequests: the embedded default forwards to
// a collector receiver with its default 4 MiB limit. Four retrying senders
// stream ordinary requests; mixed in are 5 MB requests of small spans (the
// issue's case: they used to be merged into batches the upstream refused,
// and other senders' spans were dropped with them) and requests holding
// one 5 MB span, which no upstream request can carry. Every acknowledged
// span reaches the upstream, exactly once (nothing crashed); the requests
// with an oversized span, and only they, are refused with InvalidArgument
// before being acknowledged; nothing was lost after acceptance.
func TestUpstreamLimitWithOversizedRequests(t *testing.T) {
	up := newCollectorUpstream(t, freePort(t))
	d := startDefault(t, "--upstream", "http://"+up.addr)
	ctx := ctxTimeout(t, 2*time.Minute)

	const senders, requests = 4, 40
	s := newAckSender(t, d.grpc)
	var wg sync.WaitGroup
	var oversized, unexpected atomic.Int64
	for i := range senders {
		g := &spanGen{prefix: byte(i + 1)}
		wg.Go(func() {
			for r := range requests {
				var td ptrace.Traces
				wantRefused := false
				switch {
				case i == 0 && r%10 == 5:
					td = g.request("big-span", 3, 0)
					td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Attributes().PutStr("blob", strings.Repeat("b", 5<<20))
					wantRefused = true
				case i == 1 && r%10 == 5:
					td = g.request("big-request", 5000, 1000) // about 5 MB of small spans
				default:
					td = g.request(fmt.Sprintf("svc%d", i), 200, 100)
				}
				err := s.sendTraces(ctx, td)
				switch {
				case wantRefused && errors.Is(err, errRefused):
					oversized.Add(1)
					if !strings.Contains(err.Error(), "max_request_bytes") {
						t.Errorf("the refusal does not say why: %v", err)
					}
				case err != nil || wantRefused:
					unexpected.Add(1)
					t.Errorf("sender %d request %d: err = %v, want refused: %v", i, r, err, wantRefused)
				}
			}
		})
	}
	wg.Wait()
	acked := s.ackedIDs()
	waitFor(t, time.Minute, "every acknowledged span upstream", func() bool { return up.has(acked) })
	total, unique, maxSpans := up.counts()
	metrics := get(t, "http://"+d.tel+"/metrics")
	d.g.stop(t)
	t.Logf("%d spans acknowledged, %d requests refused; upstream got %d (%d distinct) in requests of at most %d spans; sender retries %d",
		len(acked), s.refused, total, unique, maxSpans, s.retries.Load())
	if oversized.Load() != requests/10 || unexpected.Load() != 0 {
		t.Fatalf("%d oversized requests refused, %d unexpected answers; want %d and 0", oversized.Load(), unexpected.Load(), requests/10)
	}
	if total != len(acked) || unique != len(acked) {
		t.Fatalf("upstream got %d spans (%d distinct); want each of the %d acknowledged exactly once", total, unique, len(acked))
	}
	if strings.Contains(metrics, "otelcol_processor_dedup_lost_items{") {
		t.Fatalf("items were lost after acceptance:\n%s", grepLines(metrics, "lost_items"))
	}
}

// copyBound is the copies one crash may cause in upstream mode: the
// upstream request in flight (at most maxUpstream spans), the queue entry
// it was cut from, which the queue sends again whole (with group commit,
// the client requests merged into it: at most one per sender, as each
// sender has one request in flight), and each sender's unanswered request,
// re-sent by its sender after the queue had stored it but before dedup
// journaled it.
func copyBound(kills, maxUpstream, maxClient, senders int) int {
	return kills * (maxUpstream + senders*maxClient + senders*maxClient)
}

// TestKill9sDuringOutageAndDrain: the embedded default with --upstream; the
// upstream is down while two retrying senders stream, and the gateway is
// killed with SIGKILL twice during the outage; then the upstream comes back
// and the gateway is killed twice more while its queue drains. Every
// acknowledged span arrives; copies stay within the documented bound per
// crash.
func TestKill9sDuringOutageAndDrain(t *testing.T) {
	addr := freePort(t)
	d := startDefault(t, "--upstream", "http://"+addr)
	ctx := ctxTimeout(t, 3*time.Minute)
	const senders, perRequest = 2, 100
	s := newAckSender(t, d.grpc)
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range senders {
		g := &spanGen{prefix: byte(0x10 + i)}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.sendTraces(ctx, g.request("drain", perRequest, 200)); err != nil {
					t.Errorf("sender %d: %v", i, err)
					return
				}
				sent.Add(1)
			}
		})
	}
	kills := 0
	kill := func(what string) {
		t.Helper()
		before := sent.Load()
		waitFor(t, time.Minute, "requests acknowledged "+what, func() bool { return sent.Load() >= before+20 })
		if err := d.g.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-d.g.done
		kills++
		d.restart(t)
	}
	kill("during the outage")
	kill("during the outage, after a restart")
	up := newCollectorUpstream(t, addr)
	waitFor(t, time.Minute, "the queue to start draining", func() bool { tot, _, _ := up.counts(); return tot > 0 })
	kill("while the backlog drains")
	waitFor(t, time.Minute, "more of the backlog upstream", func() bool { tot, _, _ := up.counts(); return tot > 2000 })
	kill("while the backlog drains, again")
	close(stop)
	wg.Wait()
	acked := s.ackedIDs()
	waitFor(t, 2*time.Minute, "every acknowledged span upstream", func() bool { return up.has(acked) })
	d.g.stop(t)
	total, unique, maxSpans := up.counts()
	copies := total - unique
	bound := copyBound(kills, maxSpans, perRequest, senders)
	t.Logf("%d kills; %d spans acknowledged in %d requests (sender retries %d); upstream got %d (%d distinct, %d copies; bound %d) in requests of at most %d spans",
		kills, len(acked), sent.Load(), s.retries.Load(), total, unique, copies, bound, maxSpans)
	if n, some := missing(acked, func(k [24]byte) bool { up.mu.Lock(); defer up.mu.Unlock(); return up.spans[k] > 0 }); n > 0 {
		t.Fatalf("%d acknowledged spans never arrived, e.g. %v", n, some)
	}
	if unique != len(acked) {
		t.Fatalf("upstream got %d distinct spans, want the %d acknowledged", unique, len(acked))
	}
	if copies > bound {
		t.Fatalf("%d copies after %d crashes, more than the bound of %d", copies, kills, bound)
	}
}

// otlpJSON is the part of an OTLP-JSON line the local-mode tests read.
type otlpJSON struct {
	ResourceSpans []struct {
		ScopeSpans []struct {
			Spans []struct {
				TraceID string `json:"traceId"`
				SpanID  string `json:"spanId"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
	ResourceLogs []struct {
		ScopeLogs []struct {
			LogRecords []struct {
				Body struct {
					StringValue string `json:"stringValue"`
				} `json:"body"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

// readLocalSink reads every OTLP-JSON file named base*.jsonl under dir
// (the current one and its rotated backups) and counts span ids and log
// bodies. A write cut short by kill -9 leaves a truncated object in a
// line; it is counted in torn and skipped: its request was never
// acknowledged, and its sender re-sent it.
func readLocalSink(t *testing.T, dir, base string) (spans map[[24]byte]int, logs map[string]int, torn int) {
	t.Helper()
	spans, logs = map[[24]byte]int{}, map[string]int{}
	paths, err := filepath.Glob(filepath.Join(dir, base+"*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			// A torn write is followed by the next write on the same line.
			for _, chunk := range splitObjects(line) {
				var v otlpJSON
				if err := json.Unmarshal([]byte(chunk), &v); err != nil {
					torn++
					continue
				}
				for _, rs := range v.ResourceSpans {
					for _, ss := range rs.ScopeSpans {
						for _, sp := range ss.Spans {
							var k [24]byte
							tid, err1 := hex.DecodeString(sp.TraceID)
							sid, err2 := hex.DecodeString(sp.SpanID)
							if err1 != nil || err2 != nil || len(tid) != 16 || len(sid) != 8 {
								t.Fatalf("%s: bad ids %q/%q", p, sp.TraceID, sp.SpanID)
							}
							copy(k[:16], tid)
							copy(k[16:], sid)
							spans[k]++
						}
					}
				}
				for _, rl := range v.ResourceLogs {
					for _, sl := range rl.ScopeLogs {
						for _, r := range sl.LogRecords {
							logs[r.Body.StringValue]++
						}
					}
				}
			}
		}
	}
	return spans, logs, torn
}

// splitObjects cuts a line at every start of a top-level OTLP object.
func splitObjects(line string) []string {
	if line == "" {
		return nil
	}
	var out []string
	for _, marker := range []string{`{"resourceSpans":`, `{"resourceLogs":`} {
		if !strings.Contains(line, marker) {
			continue
		}
		parts := strings.Split(line, marker)
		if parts[0] != "" {
			out = append(out, parts[0])
		}
		for _, p := range parts[1:] {
			out = append(out, marker+p)
		}
		return out
	}
	return []string{line}
}

func logRequest(prefix string, from, n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "local")
	recs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		r := recs.AppendEmpty()
		r.Body().SetStr(fmt.Sprintf("%s-%d", prefix, from+i))
		r.SetTimestamp(pcommon.Timestamp(from + i + 1))
	}
	return ld
}

// TestLocalKill9: the embedded default without --upstream, killed with
// SIGKILL twice while retrying senders stream spans and log records; after
// each kill it is started again on the same data dir. Every acknowledged
// span and record is in the local files afterwards: dedup records a
// request as delivered only once the file exporter has written it.
func TestLocalKill9(t *testing.T) {
	d := startDefault(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	s := newAckSender(t, d.grpc)
	const perRequest = 200
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	g := &spanGen{prefix: 0x20}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.sendTraces(ctx, g.request("local", perRequest, 50)); err != nil {
				t.Errorf("traces: %v", err)
				return
			}
			sent.Add(1)
		}
	})
	wg.Go(func() {
		for i := 0; ; i += perRequest {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.sendLogs(ctx, logRequest("rec", i, perRequest)); err != nil {
				t.Errorf("logs: %v", err)
				return
			}
			sent.Add(1)
		}
	})
	kills := 0
	for range 2 {
		before := sent.Load()
		waitFor(t, time.Minute, "requests acknowledged", func() bool { return sent.Load() >= before+40 })
		if err := d.g.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-d.g.done
		kills++
		d.restart(t)
	}
	before := sent.Load()
	waitFor(t, time.Minute, "requests acknowledged after the last restart", func() bool { return sent.Load() >= before+20 })
	close(stop)
	wg.Wait()
	d.g.stop(t)
	spans, _, tornT := readLocalSink(t, d.dataDir, "traces")
	_, logs, tornL := readLocalSink(t, d.dataDir, "logs")
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("%d kills; %d spans and %d log records acknowledged (sender retries %d); files hold %d distinct spans and %d records; torn writes %d",
		kills, len(s.acked), len(s.ackedLogs), s.retries.Load(), len(spans), len(logs), tornT+tornL)
	if s.retries.Load() == 0 {
		t.Fatal("the senders never had to retry: the kills did not interrupt them")
	}
	if n, some := missing(s.acked, func(k [24]byte) bool { return spans[k] > 0 }); n > 0 {
		t.Fatalf("%d acknowledged spans are not in the files, e.g. %v", n, some)
	}
	lost := 0
	for b := range s.ackedLogs {
		if logs[b] == 0 {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged log records are not in the files", lost)
	}
}

// TestLocalOversizedBatches: without --upstream, ten senders each send
// one request of about 12 MB at once (900 spans of 13 KB): together some
// 117 MB of JSON, over the file exporter's 100 MB rotation size. Each
// request is written on its own, so none is refused by the file exporter,
// and every acknowledged span is in the files. Before, the batch after
// dedup merged them (8,192 spans, 106 MB) into one write, which the
// exporter refused after the senders had been answered: lost.
func TestLocalOversizedBatches(t *testing.T) {
	d := startDefault(t)
	ctx := ctxTimeout(t, 2*time.Minute)
	s := newAckSender(t, d.grpc)
	const senders, perRequest, pad = 10, 900, 13 << 10
	reqs := make([]ptrace.Traces, senders)
	for i := range reqs {
		g := &spanGen{prefix: byte(0x30 + i)}
		reqs[i] = g.request("heavy", perRequest, pad)
	}
	var sizer ptrace.ProtoMarshaler
	t.Logf("requests of %d bytes each", sizer.TracesSize(reqs[0]))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			<-start
			if err := s.sendTraces(ctx, reqs[i]); err != nil {
				t.Errorf("sender %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	d.g.stop(t)
	spans, _, torn := readLocalSink(t, d.dataDir, "traces")
	t.Logf("%d spans acknowledged (sender retries %d); the files hold %d distinct (torn writes %d)", len(s.acked), s.retries.Load(), len(spans), torn)
	if len(s.acked) != senders*perRequest {
		t.Fatalf("%d spans acknowledged, want all %d", len(s.acked), senders*perRequest)
	}
	if n, some := missing(s.acked, func(k [24]byte) bool { return spans[k] > 0 }); n > 0 {
		t.Fatalf("%d acknowledged spans are not in the files, e.g. %v", n, some)
	}
}

// TestUpstreamPermanentRefusalTakesBack: the upstream refuses for good
// (InvalidArgument) any request holding a span named "poison", after the
// gateway has acknowledged and queued it. The merged batch is split so
// that only the poison span is lost: every other acknowledged span
// arrives; the loss is counted in otelcol_processor_dedup_lost_items and
// logged with its cause; and dedup took the span's record back, so that
// once the upstream accepts it, the sender's re-send passes instead of
// being dropped as a duplicate.
func TestUpstreamPermanentRefusalTakesBack(t *testing.T) {
	up := newCollectorUpstream(t, freePort(t))
	var poisonOK atomic.Bool
	up.mu.Lock()
	up.refuse = func(td ptrace.Traces) error {
		poisoned := false
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					poisoned = poisoned || sp.Name() == "poison"
				}
			}
		}
		if poisoned && !poisonOK.Load() {
			return consumererror.NewPermanent(status.Error(codes.InvalidArgument, "poison span refused"))
		}
		return nil
	}
	up.mu.Unlock()
	d := startDefault(t, "--upstream", "http://"+up.addr)
	ctx := ctxTimeout(t, time.Minute)
	s := newAckSender(t, d.grpc)
	g := &spanGen{prefix: 0x40}
	var poison ptrace.Traces
	for r := range 20 {
		td := g.request("mixed", 100, 100)
		if r == 7 {
			td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(42).SetName("poison")
			poison = ptrace.NewTraces()
			td.CopyTo(poison)
		}
		if err := s.sendTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	acked := s.ackedIDs()
	var poisonID [24]byte
	sp := poison.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(42)
	tid, sid := sp.TraceID(), sp.SpanID()
	copy(poisonID[:16], tid[:])
	copy(poisonID[16:], sid[:])
	delete(acked, poisonID)
	waitFor(t, 30*time.Second, "every other acknowledged span upstream", func() bool { return up.has(acked) })
	waitFor(t, 30*time.Second, "the loss to be counted", func() bool {
		return strings.Contains(get(t, "http://"+d.tel+"/metrics"), `otelcol_processor_dedup_lost_items{signal="traces"} 1`)
	})
	if !strings.Contains(d.g.stderr.String(), "poison span refused") {
		t.Fatal("the loss was not logged with its cause")
	}
	// The upstream now takes it; the sender re-sends the whole request.
	poisonOK.Store(true)
	if err := s.sendTraces(ctx, poison); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the re-sent poison span upstream", func() bool { return up.has(map[[24]byte]bool{poisonID: true}) })
	d.g.stop(t)
	total, unique, _ := up.counts()
	t.Logf("%d spans acknowledged before the refusal; upstream got %d (%d distinct)", len(acked)+1, total, unique)
	if total != unique || unique != len(acked)+1 {
		t.Fatalf("upstream got %d spans (%d distinct), want each of %d once: only the poison span was re-sent and passed", total, unique, len(acked)+1)
	}
}
