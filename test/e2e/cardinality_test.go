package e2e

import (
	"bufio"
	bin "encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/doubletake/doubletake/internal/capture"
)

// TestCardinality: millions of distinct spans and hundreds of thousands of
// distinct metric streams, far past the configured bounds. The gateway's
// peak resident memory stays bounded, every eviction and unjudged point is
// counted, nothing is lost, and it does not crash.
func TestCardinality(t *testing.T) {
	const (
		maxSpans   = 1_000_000
		maxStreams = 50_000
		spanReqs   = 3000 // x 1000 spans: 3M distinct spans
		metricReqs = 200  // x 1000 points: 200k distinct streams
		perReq     = 1000
		rssBound   = 512 << 20
	)
	var spans, points atomic.Int64
	sinkSrv, err := capture.Listen("127.0.0.1:0", func(r *capture.Request) error {
		switch r.Signal {
		case capture.Traces:
			spans.Add(int64(r.Traces.SpanCount()))
		case capture.Metrics:
			points.Add(int64(r.Metrics.DataPointCount()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sinkSrv.Close()
	grpcAddr, health, tel := freePort(t), freePort(t), freePort(t)
	telHost, telPort, _ := strings.Cut(tel, ":")
	g := startGatewayConfig(t, health, fmt.Sprintf(`
extensions:
  health_check: {endpoint: %s}
receivers:
  otlp:
    protocols:
      grpc: {endpoint: %s}
processors:
  dedup:
    traces: {max_spans: %d}
    metrics: {max_streams: %d}
exporters:
  otlp_grpc/sink:
    endpoint: %s
    tls: {insecure: true}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus: {host: %s, port: %s, without_scope_info: true, without_units: true, without_type_suffix: true}
  pipelines:
    traces: {receivers: [otlp], processors: [dedup], exporters: [otlp_grpc/sink]}
    metrics: {receivers: [otlp], processors: [dedup], exporters: [otlp_grpc/sink]}
`, health, grpcAddr, maxSpans, maxStreams, sinkSrv.Addr(), telHost, telPort))

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxTimeout(t, 10*time.Minute)

	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for range perReq {
		s := ss.AppendEmpty()
		s.SetName("op")
		s.SetStartTimestamp(1)
		s.SetEndTimestamp(2)
	}
	tc := ptraceotlp.NewGRPCClient(conn)
	var n uint64
	for range spanReqs {
		for i := range perReq {
			n++
			var tid pcommon.TraceID
			bin.LittleEndian.PutUint64(tid[:], n)
			bin.LittleEndian.PutUint64(tid[8:], n*0x9e3779b97f4a7c15)
			ss.At(i).SetTraceID(tid)
			ss.At(i).SetSpanID(pcommon.SpanID(tid[8:]))
		}
		if _, err := tc.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
			t.Fatalf("span request: %v", err)
		}
	}

	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	sum := ms.AppendEmpty()
	sum.SetName("requests")
	sum.SetEmptySum().SetIsMonotonic(true)
	sum.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for range perReq {
		dp := sum.Sum().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(1)
		dp.SetTimestamp(2)
		dp.SetIntValue(1)
		dp.Attributes().PutStr("user", "")
	}
	mc := pmetricotlp.NewGRPCClient(conn)
	var user int
	for range metricReqs {
		dps := sum.Sum().DataPoints()
		for i := range perReq {
			user++
			dps.At(i).Attributes().PutStr("user", strconv.Itoa(user))
		}
		if _, err := mc.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md)); err != nil {
			t.Fatalf("metric request: %v", err)
		}
	}

	waitFor(t, 2*time.Minute, "every span and point at the sink", func() bool {
		return spans.Load() >= spanReqs*perReq && points.Load() >= metricReqs*perReq
	})
	self := get(t, "http://"+tel+"/metrics")
	peak := vmHWM(t, g.cmd.Process.Pid)
	g.stop(t)

	t.Logf("peak RSS %.0f MiB with max_spans=%d and max_streams=%d after %d spans and %d streams", float64(peak)/(1<<20), maxSpans, maxStreams, spanReqs*perReq, metricReqs*perReq)
	if got := spans.Load(); got != spanReqs*perReq {
		t.Errorf("sink got %d spans, want every one of %d (all distinct)", got, spanReqs*perReq)
	}
	if got := points.Load(); got != metricReqs*perReq {
		t.Errorf("sink got %d points, want %d (past max_streams they pass unjudged)", got, metricReqs*perReq)
	}
	if peak > rssBound {
		t.Errorf("peak RSS %d MiB, want under %d MiB", peak>>20, rssBound>>20)
	}
	for _, want := range []struct {
		metric string
		min    float64
	}{
		{`otelcol_processor_dedup_evicted_entries{reason="capacity",signal="traces"}`, spanReqs*perReq - maxSpans},
		{`otelcol_processor_dedup_unjudged_points{`, 1},
	} {
		v, ok := promValue(self, want.metric)
		if !ok || v < want.min {
			t.Errorf("%s = %v (found %v), want at least %v\n%s", want.metric, v, ok, want.min, grepLines(self, "dedup"))
		}
	}
	// Every span is either held or counted as evicted, once: the window is
	// full, and a key its index could not place (a probe run past the
	// slot's distance bits, a few per million) counts as an eviction, not as
	// an entry and not twice.
	held, _ := promValue(self, `otelcol_processor_dedup_entries{signal="traces"}`)
	evicted, _ := promValue(self, `otelcol_processor_dedup_evicted_entries{reason="capacity",signal="traces"}`)
	if held+evicted != spanReqs*perReq {
		t.Errorf("traces: %v held + %v evicted = %v, want every one of the %d spans counted once\n%s", held, evicted, held+evicted, spanReqs*perReq, grepLines(self, "dedup"))
	}
}

// vmHWM reads a process's peak resident set size, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// promValue finds the first sample whose line starts with prefix (a metric
// name and the start of its labels) in a Prometheus text exposition.
func promValue(text, prefix string) (float64, bool) {
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		return v, err == nil
	}
	return 0, false
}
