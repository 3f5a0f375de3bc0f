package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// duplicatesJudged is how many items of service the gateway's dedup has
// taken for copies so far (dropped, or waiting for their originals): spans
// and log records, and metric points dropped as exact repeats.
func (d *defaultGateway) duplicatesJudged(t *testing.T, service string) float64 {
	t.Helper()
	var n float64
	for _, l := range strings.Split(get(t, "http://"+d.tel+"/metrics"), "\n") {
		items := strings.HasPrefix(l, "otelcol_processor_dedup_duplicate_items{")
		points := strings.HasPrefix(l, "otelcol_processor_dedup_metric_points{") && strings.Contains(l, `reason="duplicate"`)
		if !items && !points || !strings.Contains(l, `action="dropped"`) || !strings.Contains(l, `service_name="`+service+`"`) {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			n += v
		}
	}
	return n
}

// paddedLogs is a request of n log records of service, bodies
// prefix-from to prefix-(from+n-1), each with an attribute of pad bytes.
func paddedLogs(service, prefix string, from, n, pad int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	recs := rl.ScopeLogs().AppendEmpty().LogRecords()
	filler := strings.Repeat("p", pad)
	for i := range n {
		r := recs.AppendEmpty()
		r.Body().SetStr(fmt.Sprintf("%s-%d", prefix, from+i))
		r.SetTimestamp(pcommon.Timestamp(from + i + 1))
		r.Attributes().PutStr("pad", filler)
	}
	return ld
}

// TestRetryOfAnInFlightRequestSurvivesKill9: a sender with a 2 s timeout
// per attempt, whose request is held where the gateway delivers it (an
// upstream that turns slow and keeps only what it answers, a backend whose
// caller gave up; or a local file that takes nothing more, a disk that
// stalls). Its attempt times out and it sends the request again, a copy of
// a request still on its way; then the gateway is killed with SIGKILL,
// restarted on its data dir, and the way out is fast again. Every item the
// sender was told had arrived did arrive: the copy was not acknowledged
// ahead of its original, which died with the process. For spans, log
// records and metric points (exact repeats), at three moments of the
// copy's wait (kill), on each path:
//   - direct: 8000-item requests (over 1 MiB) go straight upstream;
//   - queue: 400-item requests go to the persistent queue, so the
//     original is settled (stored) at once and only its send upstream is
//     held at the kill; the sender's retry is of an acknowledged request
//     (its answer lost), dropped at once;
//   - file: without --upstream, into traces.jsonl and logs.jsonl, here
//     FIFOs that the test reads, so that it can stall the write (metrics
//     are served for scraping there, not written).
func TestRetryOfAnInFlightRequestSurvivesKill9(t *testing.T) {
	for _, c := range []copyCase{
		{path: "direct", kill: killJudged},
		{path: "direct", kill: killRetried},
		{path: "direct", kill: killRetriedTwice},
		{path: "direct", logs: true, kill: killRetried},
		// Killed after two retries, 6 s or more after the original was
		// judged: after a checkpoint of the streams (every 5 s).
		{path: "direct", metrics: true, kill: killRetriedTwice},
		{path: "queue"},
		{path: "queue", logs: true},
		{path: "queue", metrics: true},
		{path: "file", kill: killRetried},
		{path: "file", logs: true, kill: killJudged},
	} {
		t.Run(c.name(), func(t *testing.T) { testRetryOfAnInFlightRequest(t, c) })
	}
}

// killAt is when, in the copy's wait for its original, the gateway is
// killed.
type killAt int

const (
	killJudged       killAt = iota // the copy judged a copy, its attempt still waiting
	killRetried                    // its attempt timed out and the sender sent it again
	killRetriedTwice               // and again
)

var killNames = [...]string{"judged", "retried", "retried_twice"}

type copyCase struct {
	path    string // direct, queue or file
	logs    bool
	metrics bool   // metric points (direct and queue)
	kill    killAt // direct and file
}

func (c copyCase) name() string {
	sig := "traces"
	if c.logs {
		sig = "logs"
	}
	if c.metrics {
		sig = "metrics"
	}
	if c.path == "queue" {
		return c.path + "/" + sig
	}
	return c.path + "/" + sig + "/kill_" + killNames[c.kill]
}

// copyOut is where the gateway delivers: the upstream, or the local files.
type copyOut interface {
	hold()    // stop taking requests: the next one is held
	release() // take them again, at once
	held() int
	// delivered is what arrived: spans by id, log records by body, metric
	// points by name and attribute i.
	delivered(t *testing.T) (spans map[[24]byte]int, logs, points map[string]int)
}

type upstreamOut struct{ *collectorUpstream }

func (u upstreamOut) hold()     { u.holdAll() }
func (u upstreamOut) held() int { n, _ := u.heldCounts(); return n }
func (u upstreamOut) delivered(*testing.T) (map[[24]byte]int, map[string]int, map[string]int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.spans), maps.Clone(u.logs), maps.Clone(u.points)
}

func testRetryOfAnInFlightRequest(t *testing.T, c copyCase) {
	var d *defaultGateway
	var out copyOut
	signal, service, unit := "traces", "span-retrier", "spans"
	if c.logs {
		signal, service, unit = "logs", "log-retrier", "log records"
	}
	if c.metrics {
		signal, service, unit = "metrics", "point-retrier", "metric points"
	}
	if c.path == "file" {
		d = newDefault(t, t.TempDir())
		out = newFifoOut(t, d.dataDir)
		d.g = startGateway(t, d.health, d.env, d.args...)
	} else {
		up := newCollectorUpstream(t, freePort(t))
		up.dropAbandoned, up.holdLogs, up.holdMetrics = true, c.logs, c.metrics
		d = startDefault(t, "--upstream", "http://"+up.addr)
		out = upstreamOut{up}
	}
	ctx := ctxTimeout(t, 3*time.Minute)
	perRequest := 8000 // over 1 MiB: straight upstream
	if c.path == "queue" {
		perRequest = 400
	}
	s := newAckSender(t, d.grpc)
	s.attempt = 2 * time.Second
	g := &spanGen{prefix: 0x70}
	from := 0
	ackedPoints := map[string]bool{}
	next := func() func() error {
		if c.metrics {
			from += perRequest
			md := paddedPoints(service, from, perRequest, 100)
			return func() error { return sendPoints(ctx, s, md, ackedPoints) }
		}
		if c.logs {
			from += perRequest
			ld := paddedLogs(service, "retried", from, perRequest, 100)
			return func() error { return s.sendLogs(ctx, ld) }
		}
		td := g.request(service, perRequest, 100)
		return func() error { return s.sendTraces(ctx, td) }
	}
	if err := next()(); err != nil {
		t.Fatal(err)
	}
	out.hold()
	held, retries, dups := out.held(), s.retries.Load(), d.duplicatesJudged(t, service)
	send := next()
	done := make(chan error, 1)
	if c.path == "queue" {
		// Stored in the queue and acknowledged at once; the queue's send
		// upstream is held; the sender sends it again (its answer lost).
		if err := send(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the queue's send held upstream", func() bool { return out.held() > held })
		if err := send(); err != nil {
			t.Fatalf("the retry of a stored request: %v", err)
		}
		if n := d.duplicatesJudged(t, service); n < dups+float64(perRequest) {
			t.Fatalf("the retry's %d %s were not all judged copies (%v more counted)", perRequest, unit, n-dups)
		}
	} else {
		go func() { done <- send() }()
		// The request is held on its way out, and the sender's retry has
		// been judged a copy; then either that retry was answered, or it
		// waited for its original until its deadline and the sender tried
		// again.
		waitFor(t, time.Minute, "the request held on its way out and its retry judged a copy", func() bool {
			return (c.path == "file" || out.held() > held) && d.duplicatesJudged(t, service) >= dups+float64(perRequest)
		})
		if c.kill > killJudged {
			waitFor(t, time.Minute, "the retry answered, or timed out and tried again", func() bool {
				return len(done) > 0 || s.retries.Load() >= retries+int64(c.kill)+1
			})
		}
	}
	if err := d.g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.g.done
	d.restart(t)
	out.release() // fast again; what the upstream held counts for nothing: its caller is gone
	if c.path != "queue" {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("sender: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the sender's request was never acknowledged")
		}
	}
	if c.path != "file" {
		waitFor(t, time.Minute, "the queue to drain", func() bool { return d.queueSizeOf(t, signal) == 0 })
	}
	d.g.stop(t)
	spans, logs, points := out.delivered(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	acked, got := map[string]bool{}, map[string]int{}
	switch {
	case c.metrics:
		acked, got = ackedPoints, points
	case c.logs:
		acked, got = s.ackedLogs, logs
	default:
		for k := range s.acked {
			acked[fmt.Sprintf("%x/%x", k[:16], k[16:])] = true
		}
		for k, n := range spans {
			got[fmt.Sprintf("%x/%x", k[:16], k[16:])] = n
		}
	}
	lost := 0
	var some []string
	for k := range acked {
		if got[k] == 0 {
			if lost++; len(some) < 5 {
				some = append(some, k)
			}
		}
	}
	t.Logf("%d %s acknowledged (sender retries %d); delivered %d distinct", len(acked), unit, s.retries.Load()-retries, len(got))
	if lost > 0 {
		t.Fatalf("%d acknowledged %s never arrived, e.g. %v", lost, unit, some)
	}
	if len(got) != len(acked) {
		t.Fatalf("%d distinct %s delivered, want the %d acknowledged", len(got), unit, len(acked))
	}
}

// queueSizeOf is the sending queue's size the gateway reports for signal.
func (d *defaultGateway) queueSizeOf(t *testing.T, signal string) float64 {
	t.Helper()
	v, ok := promValue(get(t, "http://"+d.tel+"/metrics"), `otelcol_exporter_queue_size{data_type="`+signal+`"`)
	if !ok {
		t.Fatalf("the gateway reports no %s queue size", signal)
	}
	return v
}

// paddedPoints is a request of n cumulative points of service, each its
// own stream (metric retried, attribute i from from to from+n-1), with an
// attribute of pad bytes, timed now.
func paddedPoints(service string, from, n, pad int) pmetric.Metrics {
	now := time.Now()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", service)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("retried")
	sum := m.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sum.SetIsMonotonic(true)
	filler := strings.Repeat("p", pad)
	for i := range n {
		dp := sum.DataPoints().AppendEmpty()
		dp.Attributes().PutInt("i", int64(from+i))
		dp.Attributes().PutStr("pad", filler)
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Minute)))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(now))
		dp.SetIntValue(int64(from + i))
	}
	return md
}

// pointKeys calls f with each point's key: its metric's name and its
// attribute i.
func pointKeys(md pmetric.Metrics, f func(string)) {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Type() != pmetric.MetricTypeSum {
					continue
				}
				for _, dp := range m.Sum().DataPoints().All() {
					i, _ := dp.Attributes().Get("i")
					f(m.Name() + "/" + i.AsString())
				}
			}
		}
	}
}

// sendPoints sends md through s's retries and records its points in
// acked once the gateway acknowledged them.
func sendPoints(ctx context.Context, s *ackSender, md pmetric.Metrics, acked map[string]bool) error {
	req := pmetricotlp.NewExportRequestFromMetrics(md)
	client := pmetricotlp.NewGRPCClient(s.conn)
	err := s.retry(ctx, func(c context.Context) error { _, err := client.Export(c, req); return err })
	if err == nil {
		s.mu.Lock()
		pointKeys(md, func(k string) { acked[k] = true })
		s.mu.Unlock()
	}
	return err
}

// takeMetrics is the upstream's metrics consumer: held as takeTraces
// holds, when holdMetrics is set.
func (u *collectorUpstream) takeMetrics(ctx context.Context, md pmetric.Metrics) error {
	u.mu.Lock()
	if hold := u.hold; hold != nil && u.holdMetrics {
		u.held++
		u.mu.Unlock()
		<-hold
		u.mu.Lock()
	}
	defer u.mu.Unlock()
	if u.dropAbandoned && ctx.Err() != nil {
		return ctx.Err()
	}
	if u.points == nil {
		u.points = map[string]int{}
	}
	pointKeys(md, func(k string) { u.points[k]++ })
	return nil
}

func consumerMetrics(f func(context.Context, pmetric.Metrics) error) consumer.Metrics {
	c, _ := consumer.NewMetrics(f)
	return c
}
