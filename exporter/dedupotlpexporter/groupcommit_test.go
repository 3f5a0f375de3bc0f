package dedupotlpexporter

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/storagetest"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// blockingUpstream is a real OTLP/gRPC trace server that counts the spans
// it receives by name; its first Export waits for release.
type blockingUpstream struct {
	ptraceotlp.UnimplementedGRPCServer
	mu      sync.Mutex
	calls   int
	spans   map[string]int
	entered chan struct{}
	release chan struct{}
}

func (u *blockingUpstream) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	u.mu.Lock()
	u.calls++
	first := u.calls == 1
	for _, n := range names(req.Traces()) {
		u.spans[n]++
	}
	u.mu.Unlock()
	if first {
		close(u.entered)
		<-u.release
	}
	return ptraceotlp.NewExportResponse(), nil
}

func (u *blockingUpstream) received() (total int, copies int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.spans {
		total += c
		copies += c - 1
	}
	return total, copies
}

// startGroupedExporter starts a dedup_otlp_grpc exporter with a persistent
// queue in a real file_storage, one consumer, and group_commit gc, sending
// to a blockingUpstream; metrics false runs it with the service's metrics
// off.
func startGroupedExporter(t *testing.T, gc map[string]any, metrics bool) (*tracesExporter, *blockingUpstream) {
	t.Helper()
	up := &blockingUpstream{spans: map[string]int{}, entered: make(chan struct{}), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, up)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	sf := filestorage.NewFactory()
	scfg := sf.CreateDefaultConfig().(*filestorage.Config)
	scfg.Directory = t.TempDir()
	ext, err := sf.Create(context.Background(), extensiontest.NewNopSettings(sf.Type()), scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	host := storagetest.NewStorageHost().WithExtension(component.NewID(sf.Type()), ext)

	var tel *componenttest.Telemetry
	if metrics {
		// Real telemetry: the queue's size is read through its metrics.
		tel = componenttest.NewTelemetry()
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	}
	exp, _ := newUpstreamTraces(t, map[string]any{
		"endpoint": ln.Addr().String(), "tls": map[string]any{"insecure": true}, "dedup": "dedup",
		"sending_queue": map[string]any{"enabled": true, "storage": "file_storage", "num_consumers": 1},
		"group_commit":  gc,
	}, tel)
	if err := exp.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-up.release:
		default:
			close(up.release)
		}
		_ = exp.Shutdown(context.Background())
	})
	return exp.(*tracesExporter), up
}

// TestGroupCommitHoldsWhileTheQueueIsBusy: while the queue holds a request
// being exported, requests that arrive wait, unanswered, and are written
// together as one queue entry once it is done; every span reaches the
// upstream once.
func TestGroupCommitHoldsWhileTheQueueIsBusy(t *testing.T) {
	g, up := startGroupedExporter(t, map[string]any{"max_items": 1000, "max_delay": "1m"}, true)
	if g.group == nil {
		t.Fatal("group_commit on, with a queue, made no group")
	}
	ctx := context.Background()
	if err := g.ConsumeTraces(ctx, spansOf(10, func(i int) string { return fmt.Sprintf("r0-%d", i) })); err != nil {
		t.Fatal(err)
	}
	<-up.entered // the first request is out of the queue, its export held upstream

	// Each request is sent once the one before it is in the group; the
	// first of them leads the next commit, and the others are sent only
	// once it has found the queue busy and is holding (Held), so that all
	// of them arrive while it gathers, however late it is scheduled.
	const n = 5
	done := make(chan error, n)
	for r := 1; r <= n; r++ {
		go func() {
			done <- g.ConsumeTraces(ctx, spansOf(10, func(i int) string { return fmt.Sprintf("r%d-%d", r, i) }))
		}()
		deadline := time.Now().Add(time.Minute)
		for st := g.group.Stats(); st.Calls < uint64(r+1) || st.Held < 1; st = g.group.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("stats %+v a minute after request %d was sent: it did not reach the group, or the first did not hold for the busy queue", st, r)
			}
			runtime.Gosched()
		}
	}
	select {
	case err := <-done:
		t.Fatalf("a request was answered (%v) while the queue was still exporting the first", err)
	default:
	}
	close(up.release)
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if st := g.group.Stats(); st.Calls != n+1 || st.Commits != 2 || st.Held != 1 {
		t.Fatalf("stats %+v, want %d calls in 2 commits: the first alone, the %d that waited together", st, n+1, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		total, copies := up.received()
		if copies != 0 {
			t.Fatalf("the upstream received %d copies", copies)
		}
		if total == 10*(n+1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream received %d of %d spans", total, 10*(n+1))
		}
		time.Sleep(10 * time.Millisecond) // polling the upstream's count, bounded by the deadline
	}
}

// TestGroupCommitLeavesClientMetadataAlone: a request whose context carries
// client metadata or authentication data is never merged with others (the
// exporter may take headers from its context); it is queued on its own.
func TestGroupCommitLeavesClientMetadataAlone(t *testing.T) {
	g, up := startGroupedExporter(t, map[string]any{"max_items": 1000}, true)
	close(up.release)
	tenant := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"x-tenant": {"a"}})})
	if err := g.ConsumeTraces(tenant, spansOf(3, func(i int) string { return fmt.Sprintf("t-%d", i) })); err != nil {
		t.Fatal(err)
	}
	if st := g.group.Stats(); st.Calls != 0 {
		t.Fatalf("a request with client metadata went through the group: %+v", st)
	}
	if err := g.ConsumeTraces(context.Background(), spansOf(3, func(i int) string { return fmt.Sprintf("p-%d", i) })); err != nil {
		t.Fatal(err)
	}
	if st := g.group.Stats(); st.Calls != 1 {
		t.Fatalf("a plain request did not go through the group: %+v", st)
	}
	if mergeable(client.NewContext(context.Background(), client.Info{Auth: fakeAuth{}})) {
		t.Fatal("a request with authentication data is mergeable")
	}
}

type fakeAuth struct{}

func (fakeAuth) GetAttribute(string) any     { return "sub" }
func (fakeAuth) GetAttributeNames() []string { return []string{"subject"} }

// TestGroupCommitOff: max_items 0, or no sending queue, writes each request
// alone, as before.
func TestGroupCommitOff(t *testing.T) {
	g, _ := startGroupedExporter(t, map[string]any{"max_items": 0}, true)
	if g.group != nil {
		t.Fatal("max_items 0 made a group")
	}
}

// TestGroupCommitWithoutQueueMetricsDoesNotWait: max_delay reads the
// queue's size through its metrics; with the service's metrics off it
// cannot, and a request is written at once (as README says), not held
// for max_delay.
func TestGroupCommitWithoutQueueMetricsDoesNotWait(t *testing.T) {
	g, up := startGroupedExporter(t, map[string]any{"max_items": 1000, "max_delay": "1m"}, false)
	ctx := context.Background()
	if err := g.ConsumeTraces(ctx, spansOf(10, func(i int) string { return fmt.Sprintf("a-%d", i) })); err != nil {
		t.Fatal(err)
	}
	<-up.entered // the queue holds the first request, its export held upstream
	done := make(chan error, 1)
	go func() {
		done <- g.ConsumeTraces(ctx, spansOf(10, func(i int) string { return fmt.Sprintf("b-%d", i) }))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // only a failing run waits: the hold would last a minute
		t.Fatal("with the service's metrics off a request waited for the queue")
	}
}
