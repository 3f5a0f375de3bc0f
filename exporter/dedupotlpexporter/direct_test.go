package dedupotlpexporter

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/doubletake/doubletake/extension/logstorageextension"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// directUpstream is a real OTLP/gRPC trace server whose answers a test
// controls: refuse decides the answer to each call from its span names
// (nil: taken), and while hold is set every call waits for it to close.
// It counts the spans it took by name, and the calls.
type directUpstream struct {
	ptraceotlp.UnimplementedGRPCServer
	entered chan struct{} // one value per call, when it arrives

	mu     sync.Mutex
	calls  int
	spans  map[string]int
	refuse func(names []string) error
	hold   chan struct{}
}

func (u *directUpstream) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	u.mu.Lock()
	u.calls++
	hold := u.hold
	u.mu.Unlock()
	select {
	case u.entered <- struct{}{}:
	default:
	}
	if hold != nil {
		<-hold
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	ns := names(req.Traces())
	if u.refuse != nil {
		if err := u.refuse(ns); err != nil {
			return ptraceotlp.NewExportResponse(), err
		}
	}
	for _, n := range ns {
		u.spans[n]++
	}
	return ptraceotlp.NewExportResponse(), nil
}

func (u *directUpstream) set(f func(u *directUpstream)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(u)
}

// has says whether every span of td was taken, and how many calls came.
func (u *directUpstream) has(td ptrace.Traces) (bool, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, n := range names(td) {
		if u.spans[n] == 0 {
			return false, u.calls
		}
	}
	return true, u.calls
}

// copies is how many spans were taken more than once.
func (u *directUpstream) copies() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.spans {
		n += c - 1
	}
	return n
}

// directRig is the dedup processor in front of a dedup_otlp_grpc exporter
// with direct sends on and a persistent queue in a real file_storage,
// both reporting to real telemetry (the queue's size is read through it).
type directRig struct {
	up   *directUpstream
	proc processor.Traces
	exp  *tracesExporter
	tel  *componenttest.Telemetry
	next int // the next span's number
}

func startDirect(t *testing.T, extra map[string]any) *directRig {
	t.Helper()
	return startRig(t, filestorage.NewFactory(), extra)
}

// startRig is startDirect with the queue in the storage sf makes (its
// default config in a temporary directory).
func startRig(t *testing.T, sf extension.Factory, extra map[string]any) *directRig {
	t.Helper()
	up := &directUpstream{spans: map[string]int{}, entered: make(chan struct{}, 1024)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, up)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		up.set(func(u *directUpstream) {
			if u.hold != nil {
				close(u.hold)
				u.hold = nil
			}
		})
		srv.Stop()
	})

	scfg := sf.CreateDefaultConfig()
	switch c := scfg.(type) {
	case *filestorage.Config:
		c.Directory = t.TempDir()
	case *logstorageextension.Config:
		c.Directory = t.TempDir()
	default:
		t.Fatalf("no directory for a %T", scfg)
	}
	ext, err := sf.Create(context.Background(), extensiontest.NewNopSettings(sf.Type()), scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	host := storagetest.NewStorageHost().WithExtension(component.NewID(sf.Type()), ext)
	tel := componenttest.NewTelemetry()

	pf, tb := dedupprocessor.NewFactoryWithTakeBack()
	f := NewGRPCFactory(tb)
	cfg := f.CreateDefaultConfig().(*Config)
	raw := map[string]any{
		"endpoint": ln.Addr().String(), "tls": map[string]any{"insecure": true}, "dedup": "dedup",
		"retry_on_failure": map[string]any{"enabled": true, "initial_interval": "10ms", "max_interval": "50ms", "max_elapsed_time": 0},
		"sending_queue":    map[string]any{"enabled": true, "storage": sf.Type().String(), "num_consumers": 1, "sizer": "bytes", "queue_size": 64 << 20},
		"direct":           map[string]any{"enabled": true},
	}
	for k, v := range extra {
		raw[k] = v
	}
	if err := confmap.NewFromStringMap(raw).Unmarshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	set := exportertest.NewNopSettings(Type)
	set.ID = component.MustNewIDWithName("dedup_otlp_grpc", "upstream")
	set.TelemetrySettings = tel.NewTelemetrySettings()
	exp, err := f.CreateTraces(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pset := processortest.NewNopSettings(dedupprocessor.Type)
	pset.TelemetrySettings = tel.NewTelemetrySettings()
	proc, err := pf.CreateTraces(context.Background(), pset, pf.CreateDefaultConfig(), exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proc.Shutdown(context.Background())
		_ = exp.Shutdown(context.Background())
		_ = ext.Shutdown(context.Background())
		_ = tel.Shutdown(context.Background())
	})
	return &directRig{up: up, proc: proc, exp: exp.(*tracesExporter), tel: tel}
}

// request makes n spans of their own ids, named by prefix and number.
func (r *directRig) request(prefix string, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for range n {
		r.next++
		s := ss.AppendEmpty()
		s.SetName(fmt.Sprintf("%s-%d", prefix, r.next))
		s.SetTraceID(pcommon.TraceID{2, byte(r.next >> 16), byte(r.next >> 8), byte(r.next)})
		s.SetSpanID(pcommon.SpanID{2, byte(r.next >> 16), byte(r.next >> 8), byte(r.next)})
	}
	return td
}

func cloneTraces(td ptrace.Traces) ptrace.Traces {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	return c
}

func (r *directRig) queueSize() int64 {
	size, _ := r.exp.up.queue.read()
	return size
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// TestDirectAnswersOnceTheUpstreamHasIt: with the queue empty, each request
// goes straight to the upstream and is answered once the upstream has
// taken it; nothing goes through the sending queue.
func TestDirectAnswersOnceTheUpstreamHasIt(t *testing.T) {
	r := startDirect(t, nil)
	for i := range 5 {
		td := r.request(fmt.Sprintf("r%d", i), 20)
		want := cloneTraces(td)
		if err := r.proc.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		if ok, calls := r.up.has(want); !ok || calls != i+1 {
			t.Fatalf("request %d answered before the upstream had it (%d calls so far)", i, calls)
		}
	}
	if st := r.exp.group.Stats(); st.Calls != 0 {
		t.Fatalf("requests went to the sending queue: %+v", st)
	}
	if st := r.exp.direct.Stats(); st.Calls != 5 || st.Commits != 5 {
		t.Fatalf("direct sends %+v, want 5 alone", st)
	}
	if c := r.up.copies(); c != 0 {
		t.Fatalf("%d copies upstream", c)
	}
}

// TestDirectMergesRequestsThatWait: requests that arrive while a direct
// send is under way wait, unanswered, and are sent together as one upstream
// request when it is done; each is answered once it is delivered.
func TestDirectMergesRequestsThatWait(t *testing.T) {
	// However long the test takes to send them, the requests wait for the
	// held send rather than go to the queue.
	r := startDirect(t, map[string]any{"direct": map[string]any{"enabled": true, "slow_after": "1m"}})
	hold := make(chan struct{})
	r.up.set(func(u *directUpstream) { u.hold = hold })
	first := r.request("first", 10)
	firstWant := cloneTraces(first)
	done := make(chan error, 8)
	go func() { done <- r.proc.ConsumeTraces(context.Background(), first) }()
	<-r.up.entered
	const n = 6
	var wants []ptrace.Traces
	for i := range n {
		td := r.request(fmt.Sprintf("w%d", i), 10)
		wants = append(wants, cloneTraces(td))
		go func() { done <- r.proc.ConsumeTraces(context.Background(), td) }()
	}
	waitUntil(t, "the requests to wait for the direct send", func() bool { return r.exp.direct.Waiting() == n })
	select {
	case err := <-done:
		t.Fatalf("a request was answered (%v) while the upstream held the first", err)
	default:
	}
	r.up.set(func(u *directUpstream) { u.hold = nil })
	close(hold)
	for range n + 1 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, td := range append(wants, firstWant) {
		if ok, _ := r.up.has(td); !ok {
			t.Fatal("an answered request is not upstream")
		}
	}
	if _, calls := r.up.has(first); calls != 2 {
		t.Fatalf("%d upstream calls, want 2: the first request, then the %d that waited together", calls, n)
	}
	if st := r.exp.group.Stats(); st.Calls != 0 {
		t.Fatalf("requests went to the sending queue: %+v", st)
	}
}

// TestDirectFallsBackToTheQueueAndBack: while the upstream refuses with a
// retryable error, a request goes to the persistent queue and is answered
// once stored there; so do the requests after it while the queue holds
// anything, without a direct attempt; the queue delivers them once the
// upstream is back, and then requests go straight to it again.
func TestDirectFallsBackToTheQueueAndBack(t *testing.T) {
	r := startDirect(t, nil)
	down := status.Error(codes.Unavailable, "upstream restarting")
	r.up.set(func(u *directUpstream) { u.refuse = func([]string) error { return down } })
	a, b := r.request("a", 10), r.request("b", 10)
	aWant, bWant := cloneTraces(a), cloneTraces(b)
	if err := r.proc.ConsumeTraces(context.Background(), a); err != nil {
		t.Fatalf("a request was refused while the queue had room: %v", err)
	}
	if st := r.exp.direct.Stats(); st.Calls != 1 {
		t.Fatalf("direct sends %+v, want the one attempt", st)
	}
	if r.queueSize() == 0 {
		t.Fatal("the request the upstream refused is not in the queue")
	}
	if err := r.proc.ConsumeTraces(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if st := r.exp.direct.Stats(); st.Calls != 1 {
		t.Fatalf("a request went direct (%+v) while the queue held an earlier one", st)
	}
	r.up.set(func(u *directUpstream) { u.refuse = nil })
	waitUntil(t, "the queue to deliver and empty", func() bool {
		okA, _ := r.up.has(aWant)
		okB, _ := r.up.has(bWant)
		return okA && okB && r.queueSize() == 0
	})
	c := r.request("c", 10)
	cWant := cloneTraces(c)
	if err := r.proc.ConsumeTraces(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.up.has(cWant); !ok {
		t.Fatal("with the queue empty again, a request was answered before the upstream had it")
	}
	if st := r.exp.direct.Stats(); st.Calls != 2 {
		t.Fatalf("direct sends %+v, want 2", st)
	}
	if n := r.up.copies(); n != 0 {
		t.Fatalf("%d copies upstream", n)
	}
}

// TestDirectSlowUpstreamMovesToTheQueue: while a direct send has run
// longer than direct::slow_after, the requests that arrive go to the
// queue and are answered once stored there, while the upstream still
// holds the direct send, which goes on and is delivered once the upstream
// answers: nothing is sent twice.
func TestDirectSlowUpstreamMovesToTheQueue(t *testing.T) {
	r := startDirect(t, map[string]any{"direct": map[string]any{"enabled": true, "slow_after": "50ms"}, "timeout": "1h"})
	hold := make(chan struct{})
	r.up.set(func(u *directUpstream) { u.hold = hold })
	a := r.request("slow", 10)
	aWant := cloneTraces(a)
	done := make(chan error, 1)
	go func() { done <- r.proc.ConsumeTraces(context.Background(), a) }()
	<-r.up.entered
	waitUntil(t, "the direct send to count as slow", r.exp.slow)
	b := r.request("after", 10)
	bWant := cloneTraces(b)
	if err := r.proc.ConsumeTraces(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held direct send was answered (%v) before the upstream answered", err)
	default:
	}
	if r.queueSize() == 0 {
		t.Fatal("the request that arrived during a slow direct send is not in the queue")
	}
	if st := r.exp.direct.Stats(); st.Calls != 1 {
		t.Fatalf("direct sends %+v, want only the held one", st)
	}
	r.up.set(func(u *directUpstream) { u.hold = nil })
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.up.has(aWant); !ok {
		t.Fatal("the direct send was answered before the upstream had it")
	}
	waitUntil(t, "the queue to deliver", func() bool { ok, _ := r.up.has(bWant); return ok && r.queueSize() == 0 })
	if c := r.up.copies(); c != 0 {
		t.Fatalf("%d copies upstream", c)
	}
}

// TestDirectTimeoutMovesToTheQueue: a direct send the upstream does not
// answer within the exporter's timeout goes to the queue, and is answered
// once stored there while the upstream still holds it; the queue delivers
// it once the upstream answers again (the upstream may then have it
// twice: the send it held had arrived).
func TestDirectTimeoutMovesToTheQueue(t *testing.T) {
	r := startDirect(t, map[string]any{"timeout": "100ms"})
	hold := make(chan struct{})
	r.up.set(func(u *directUpstream) { u.hold = hold })
	td := r.request("timeout", 10)
	want := cloneTraces(td)
	if err := r.proc.ConsumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.up.has(want); ok {
		t.Fatal("the upstream took the request while it was held")
	}
	if r.queueSize() == 0 {
		t.Fatal("the request was answered but is not in the queue")
	}
	r.up.set(func(u *directUpstream) { u.hold = nil })
	close(hold)
	waitUntil(t, "the queue to deliver", func() bool { ok, _ := r.up.has(want); return ok && r.queueSize() == 0 })
	if c := r.up.copies(); c > 10 {
		t.Fatalf("%d copies of 10 spans", c)
	}
}

// TestDirectPermanentRefusalHandsBackOnlyTheRefused: the upstream refuses
// for good a request holding a "poison" span; the direct send is split
// until only that span is refused, the rest is delivered, and the poison
// span alone is handed back to dedup (counted as lost), so that a re-send
// of the whole request delivers it, and only it, once the upstream takes
// it.
func TestDirectPermanentRefusalHandsBackOnlyTheRefused(t *testing.T) {
	r := startDirect(t, nil)
	poisonOK := false
	r.up.set(func(u *directUpstream) {
		u.refuse = func(ns []string) error {
			if !poisonOK && slices.ContainsFunc(ns, func(n string) bool { return n == "poison" }) {
				return status.Error(codes.InvalidArgument, "poison span refused")
			}
			return nil
		}
	})
	td := r.request("mixed", 20)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(13).SetName("poison")
	resend := cloneTraces(td)
	if err := r.proc.ConsumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	r.up.mu.Lock()
	delivered := len(r.up.spans)
	poisoned := r.up.spans["poison"]
	r.up.mu.Unlock()
	if delivered != 19 || poisoned != 0 {
		t.Fatalf("the upstream took %d spans (poison %d) when the request was answered, want the 19 others", delivered, poisoned)
	}
	m, err := r.tel.GetMetric("otelcol_processor_dedup_lost_items")
	if err != nil {
		t.Fatalf("no loss counted: %v", err)
	}
	if lost := m.Data.(metricdata.Sum[int64]).DataPoints[0].Value; lost != 1 {
		t.Fatalf("%d items counted as lost, want the poison span", lost)
	}
	r.up.set(func(*directUpstream) { poisonOK = true })
	if err := r.proc.ConsumeTraces(context.Background(), resend); err != nil {
		t.Fatal(err)
	}
	r.up.mu.Lock()
	defer r.up.mu.Unlock()
	if len(r.up.spans) != 20 || r.up.spans["poison"] != 1 {
		t.Fatalf("after the re-send the upstream has %d spans (poison %d), want all 20", len(r.up.spans), r.up.spans["poison"])
	}
	for n, c := range r.up.spans {
		if c != 1 {
			t.Fatalf("span %s arrived %d times: the re-send passed more than the refused span", n, c)
		}
	}
	if st := r.exp.group.Stats(); st.Calls != 0 {
		t.Fatalf("requests went to the sending queue: %+v", st)
	}
}

// TestDirectConfig: direct sends need a sending queue (what the upstream
// does not take goes there) and slow_after within bounds.
func TestDirectConfig(t *testing.T) {
	f := NewGRPCFactory(nil)
	for _, tc := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"sending_queue": map[string]any{"enabled": false}, "direct": map[string]any{"enabled": true}}, "direct::enabled needs sending_queue"},
		{map[string]any{"sending_queue": map[string]any{"enabled": true}, "direct": map[string]any{"enabled": true, "slow_after": "0s"}}, "direct::slow_after must be between"},
		{map[string]any{"sending_queue": map[string]any{"enabled": true}, "direct": map[string]any{"enabled": true, "slow_after": "2m"}}, "direct::slow_after must be between"},
		{map[string]any{"sending_queue": map[string]any{"enabled": true}, "direct": map[string]any{"enabled": true}}, ""},
		{map[string]any{"direct": map[string]any{"enabled": false, "slow_after": "0s"}}, ""},
	} {
		cfg := f.CreateDefaultConfig().(*Config)
		if err := confmap.NewFromStringMap(tc.raw).Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.raw, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.raw, err, tc.want)
		}
	}
}

// TestDirectOnlyForRequestsThatFillABatch: with a queue batcher, a request
// smaller than its min_size goes to the queue (which sends it upstream
// with others) and one at least that large goes straight to the upstream,
// the queue being empty. Both are delivered once.
func TestDirectOnlyForRequestsThatFillABatch(t *testing.T) {
	const minSize = 4096
	r := startDirect(t, map[string]any{
		"sending_queue": map[string]any{"enabled": true, "storage": "file_storage", "num_consumers": 1, "sizer": "bytes", "queue_size": 64 << 20,
			"batch": map[string]any{"sizer": "bytes", "min_size": minSize, "max_size": 1 << 20, "flush_timeout": "10ms"}},
	})
	if r.exp.up.directMin != minSize {
		t.Fatalf("directMin %d, want the batch's min_size %d", r.exp.up.directMin, minSize)
	}
	// A batch larger than directMinCap (the embedded default gathers the
	// upstream's limit): requests of directMinCap still go direct.
	big := startDirect(t, map[string]any{
		"max_request_bytes": 4 << 20,
		"sending_queue": map[string]any{"enabled": true, "storage": "file_storage", "num_consumers": 1, "sizer": "bytes", "queue_size": 64 << 20,
			"batch": map[string]any{"sizer": "bytes", "min_size": 4 << 20, "max_size": 4 << 20, "flush_timeout": "10ms"}},
	})
	if big.exp.up.directMin != directMinCap {
		t.Fatalf("directMin %d with a 4 MiB batch, want %d", big.exp.up.directMin, directMinCap)
	}
	small := r.request("small", 5)
	large := r.request("large", 400)
	if s := (&ptrace.ProtoMarshaler{}).TracesSize(small); s >= minSize {
		t.Fatalf("the small request is %d bytes", s)
	}
	if s := (&ptrace.ProtoMarshaler{}).TracesSize(large); s < minSize {
		t.Fatalf("the large request is %d bytes", s)
	}
	wantSmall, wantLarge := cloneTraces(small), cloneTraces(large)
	if err := r.proc.ConsumeTraces(context.Background(), small); err != nil {
		t.Fatal(err)
	}
	if st := r.exp.group.Stats(); st.Calls != 1 {
		t.Fatalf("the small request did not go to the queue: %+v", st)
	}
	waitUntil(t, "the small request upstream", func() bool { ok, _ := r.up.has(wantSmall); return ok })
	waitUntil(t, "an empty queue", func() bool { return r.queueSize() == 0 })
	if err := r.proc.ConsumeTraces(context.Background(), large); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.up.has(wantLarge); !ok {
		t.Fatal("the large request was answered before the upstream had it")
	}
	if st := r.exp.direct.Stats(); st.Calls != 1 {
		t.Fatalf("direct sends %+v, want the large request's", st)
	}
	if c := r.up.copies(); c != 0 {
		t.Fatalf("%d copies upstream", c)
	}
}
