package nested

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/doubletake/doubletake/internal/capture"
)

// Tests that run test/nestedserver, a real net/http server whose handler
// is wrapped twice (or once) with otelhttp, against an in-process OTLP
// receiver.

var (
	serverOnce sync.Once
	serverBin  string
	serverErr  error
)

func nestedServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs test/nestedserver")
	}
	serverOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			serverErr = fmt.Errorf("finding the module root: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "nestedserver-")
		if err != nil {
			serverErr = err
			return
		}
		serverBin = filepath.Join(dir, "nestedserver")
		cmd := exec.Command("go", "build", "-o", serverBin, "./test/nestedserver")
		cmd.Dir = strings.TrimSpace(string(out))
		if b, err := cmd.CombinedOutput(); err != nil {
			serverErr = fmt.Errorf("building test/nestedserver: %w\n%s", err, b)
		}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if serverBin != "" {
		os.RemoveAll(filepath.Dir(serverBin))
	}
	os.Exit(code)
}

type serverRun struct {
	batches []ptrace.Traces // in arrival order, one per export request
	summary struct {
		Requests int   `json:"requests"`
		Spans    int64 `json:"spans"`
		Exports  int64 `json:"exports"`
		Errors   int64 `json:"errors"`
	}
}

// runServer runs test/nestedserver with args against a fresh receiver.
func runServer(t *testing.T, protocol string, args ...string) serverRun {
	t.Helper()
	bin := nestedServer(t)
	var (
		mu  sync.Mutex
		run serverRun
	)
	srv, err := capture.Listen("127.0.0.1:0", func(r *capture.Request) error {
		if r.Signal != capture.Traces {
			return nil
		}
		td := ptrace.NewTraces()
		r.Traces.CopyTo(td)
		mu.Lock()
		run.batches = append(run.batches, td)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 250ms in the handler: scheduling noise under load between the two
	// wrappers' starts or ends stays inside the 10% the default
	// MinCoverage allows. With 50ms, one 19ms stall of the outer wrapper on
	// a loaded CI machine (inner 50.7ms, outer 69.9ms) fell outside it.
	cmd := exec.CommandContext(ctx, bin, append([]string{"-work", "250ms"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "NESTEDSERVER_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+srv.Endpoint(),
		"OTEL_EXPORTER_OTLP_PROTOCOL="+protocol,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nestedserver %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &run.summary); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	// Shutdown exported everything before the program exited, and the
	// receiver answered each export only after handing it over.
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, td := range run.batches {
		n += td.SpanCount()
	}
	if int64(n) != run.summary.Spans || int64(len(run.batches)) != run.summary.Exports || run.summary.Errors != 0 {
		t.Fatalf("received %d spans in %d requests; the program says %+v", n, len(run.batches), run.summary)
	}
	return run
}

var otelhttpScopeNow = Scope{Name: otelhttp.ScopeName, Version: otelhttp.Version}

// tree is the spans of every batch, by trace.
type tree map[pcommon.TraceID][]ptrace.Span

func spanTree(batches ...ptrace.Traces) tree {
	out := tree{}
	for _, td := range batches {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out[sp.TraceID()] = append(out[sp.TraceID()], sp)
				}
			}
		}
	}
	return out
}

func (tr tree) byKind(trace pcommon.TraceID, kind ptrace.SpanKind) []ptrace.Span {
	var out []ptrace.Span
	for _, sp := range tr[trace] {
		if sp.Kind() == kind {
			out = append(out, sp)
		}
	}
	return out
}

func (tr tree) named(trace pcommon.TraceID, name string) []ptrace.Span {
	var out []ptrace.Span
	for _, sp := range tr[trace] {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// checkCollapsed: one server span per request, every handler child kept
// with the server span as parent, and no span pointing at a span that is
// not there.
func checkCollapsed(t *testing.T, tr tree, children ...string) {
	t.Helper()
	if len(tr) != requests {
		t.Fatalf("%d traces, want %d", len(tr), requests)
	}
	for trace, spans := range tr {
		srv := tr.byKind(trace, ptrace.SpanKindServer)
		if len(srv) != 1 {
			t.Fatalf("trace %s: %d server spans after collapsing", trace, len(srv))
		}
		if v, ok := srv[0].Attributes().Get(AttrCollapsedScopeName); !ok || v.Str() != otelhttp.ScopeName {
			t.Fatalf("trace %s: %s = %q", trace, AttrCollapsedScopeName, v.AsString())
		}
		for _, name := range children {
			c := tr.named(trace, name)
			if len(c) != 1 || c[0].ParentSpanID() != srv[0].SpanID() {
				t.Fatalf("trace %s: %d %q spans, want one under the server span", trace, len(c), name)
			}
		}
		ids := map[pcommon.SpanID]bool{}
		for _, sp := range spans {
			ids[sp.SpanID()] = true
		}
		for _, sp := range spans {
			if p := sp.ParentSpanID(); !p.IsEmpty() && !ids[p] {
				t.Fatalf("trace %s: %q points at missing span %s", trace, sp.Name(), p)
			}
		}
	}
}

type detected struct {
	Report
	batches []ptrace.Traces
}

func detectAll(batches []ptrace.Traces) detected {
	d := NewDetector(Options{})
	for _, td := range batches {
		d.Add(td)
	}
	return detected{d.Report(), batches}
}

// dumpServerSpans logs every server span's timing, to tell why a pair
// was not found.
func dumpServerSpans(t *testing.T, batches []ptrace.Traces) {
	tr := spanTree(batches...)
	for trace := range tr {
		for _, sp := range tr.byKind(trace, ptrace.SpanKindServer) {
			t.Logf("trace %s span %s parent %s %q start %d dur %s", trace, sp.SpanID(), sp.ParentSpanID(), sp.Name(),
				sp.StartTimestamp(), time.Duration(sp.EndTimestamp()-sp.StartTimestamp()))
		}
	}
}

func collapseAll(batches []ptrace.Traces) (CollapseResult, *State) {
	st := NewState(0, 0)
	var sum CollapseResult
	for _, td := range batches {
		r := Collapse(td, Options{}, st)
		sum.Collapsed += r.Collapsed
		sum.Reparented += r.Reparented
		sum.Remapped += r.Remapped
		sum.KeptEarlierChildren += r.KeptEarlierChildren
	}
	return sum, st
}

func wantDoubled(t *testing.T, rep detected, siblings int, by, name, innerName string) {
	t.Helper()
	if len(rep.Findings) != 1 {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	f := rep.Findings[0]
	want := Finding{
		Key: Key{
			Service:    "nestedserver",
			Kind:       "SERVER",
			Name:       name,
			OuterScope: otelhttpScopeNow,
			InnerScope: otelhttpScopeNow,
		},
		InnerName:     innerName,
		MatchedBy:     by,
		Traces:        requests,
		Occurrences:   requests,
		Siblings:      siblings,
		AffectedSpans: 2 * requests,
		KindSpans:     2 * requests,
		Share:         1,
		Diagnosis: fmt.Sprintf(`%s inside %s: one request recorded twice (%s, 100%% of server spans): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one`,
			otelhttpScopeNow, otelhttpScopeNow, quoteNames(name, innerName)),
	}
	f.Examples = nil
	if !equalFinding(f, want) {
		t.Errorf("finding:\n got %+v\nwant %+v", f, want)
		dumpServerSpans(t, rep.batches)
		t.FailNow()
	}
	t.Logf("diagnosis: %s", f.Diagnosis)
}

func quoteNames(name, inner string) string {
	if inner == "" {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q and %q", name, inner)
}

func equalFinding(a, b Finding) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

const requests = 8

func TestServerDoubleWrapSiblings(t *testing.T) {
	// The client propagates its context and each otelhttp handler
	// extracts it: the two server spans are siblings under the client
	// span, and the handler's child hangs under the inner one.
	run := runServer(t, "grpc", "-wrap", "double", "-requests", fmt.Sprint(requests))
	if len(run.batches) != 1 || run.summary.Spans != 4*requests {
		t.Fatalf("%d batches, %d spans", len(run.batches), run.summary.Spans)
	}
	wantDoubled(t, detectAll(run.batches), requests, ByName, "POST /rollouts/{id}", "")

	res, _ := collapseAll(run.batches)
	if res.Collapsed != requests || res.Reparented != requests || res.KeptEarlierChildren != 0 {
		t.Fatalf("collapse: %+v", res)
	}
	tr := spanTree(run.batches...)
	checkCollapsed(t, tr, "load rollout")
	for trace := range tr {
		if c := tr.byKind(trace, ptrace.SpanKindClient); len(c) != 1 || tr.byKind(trace, ptrace.SpanKindServer)[0].ParentSpanID() != c[0].SpanID() {
			t.Fatalf("trace %s: the server span is not under the client span", trace)
		}
	}
	if got := detectAll(run.batches); len(got.Findings) != 0 {
		t.Fatalf("findings after collapsing: %+v", got.Findings)
	}
}

func TestServerDoubleWrapNested(t *testing.T) {
	// Without propagation the inner handler's span is a child of the
	// outer one's.
	run := runServer(t, "http/protobuf", "-wrap", "double", "-propagate=false", "-requests", fmt.Sprint(requests))
	wantDoubled(t, detectAll(run.batches), 0, ByName, "POST /rollouts/{id}", "")
	res, _ := collapseAll(run.batches)
	if res.Collapsed != requests || res.Reparented != requests {
		t.Fatalf("collapse: %+v", res)
	}
	// The client spans are traces of their own here.
	tr := spanTree(run.batches...)
	for trace := range tr {
		if len(tr.byKind(trace, ptrace.SpanKindClient)) == 1 {
			delete(tr, trace)
		}
	}
	checkCollapsed(t, tr, "load rollout")
}

func TestServerSingleWrapClean(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			run := runServer(t, protocol, "-wrap", "single", "-requests", fmt.Sprint(requests))
			if run.summary.Spans != 3*requests {
				t.Fatalf("%d spans", run.summary.Spans)
			}
			rep := detectAll(run.batches)
			if len(rep.Findings) != 0 || rep.Stats.Pairs != 0 {
				t.Fatalf("single wrap flagged: %+v", rep)
			}
			before := marshal(t, run.batches[0])
			res, _ := collapseAll(run.batches)
			if res.Collapsed+res.Reparented+res.Remapped+res.KeptEarlierChildren != 0 || !bytes.Equal(before, marshal(t, run.batches[0])) {
				t.Fatalf("collapse changed a clean batch: %+v", res)
			}
		})
	}
}

func TestServerMuxWrappedTwice(t *testing.T) {
	// Both wrappers sit outside the ServeMux: the outer span never
	// learns the route ("POST"), the inner one is renamed once the mux
	// has matched ("POST /rollouts/{id}"); neither carries http.route.
	run := runServer(t, "grpc", "-wrap", "mux", "-requests", fmt.Sprint(requests))
	wantDoubled(t, detectAll(run.batches), requests, ByMethod, "POST", "POST /rollouts/{id}")
	res, _ := collapseAll(run.batches)
	if res.Collapsed != requests {
		t.Fatalf("collapse: %+v", res)
	}
	tr := spanTree(run.batches...)
	checkCollapsed(t, tr, "load rollout")
	for trace := range tr {
		if n := tr.byKind(trace, ptrace.SpanKindServer)[0].Name(); n != "POST /rollouts/{id}" {
			t.Fatalf("server span named %q", n)
		}
	}
}

func TestServerLateChildrenRemapped(t *testing.T) {
	// One export per request; "notify rollout" ends after the response
	// and arrives in the next batch, after its server span was removed.
	run := runServer(t, "http/protobuf", "-wrap", "double", "-flush", "request", "-late-child", "-requests", fmt.Sprint(requests))
	if len(run.batches) != requests+1 {
		t.Fatalf("%d batches", len(run.batches))
	}
	wantDoubled(t, detectAll(run.batches), requests, ByName, "POST /rollouts/{id}", "")
	res, st := collapseAll(run.batches)
	if res.Collapsed != requests || res.Reparented != requests || res.Remapped != requests {
		t.Fatalf("collapse: %+v", res)
	}
	if s := st.Stats(); s.Remap != requests || s.RemapEvicted != 0 {
		t.Fatalf("state: %+v", s)
	}
	checkCollapsed(t, spanTree(run.batches...), "load rollout", "notify rollout")
}

func TestServerEarlierChildrenKeepInner(t *testing.T) {
	// The handler flushes right after its child span ends: the child is
	// exported before both server spans. Removing the inner one would
	// orphan it, so Collapse keeps both; the detector still sees them.
	run := runServer(t, "grpc", "-wrap", "double", "-flush", "child", "-requests", fmt.Sprint(requests))
	if len(run.batches) != requests+1 {
		t.Fatalf("%d batches", len(run.batches))
	}
	wantDoubled(t, detectAll(run.batches), requests, ByName, "POST /rollouts/{id}", "")
	res, _ := collapseAll(run.batches)
	if res.Collapsed != 0 || res.KeptEarlierChildren != requests {
		t.Fatalf("collapse: %+v", res)
	}
	tr := spanTree(run.batches...)
	for trace, spans := range tr {
		if n := len(tr.byKind(trace, ptrace.SpanKindServer)); n != 2 {
			t.Fatalf("trace %s: %d server spans", trace, n)
		}
		if len(spans) != 4 {
			t.Fatalf("trace %s: %d spans", trace, len(spans))
		}
	}
}
