package dedupprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/doubletake/doubletake/internal/buildinfo"
	"github.com/doubletake/doubletake/internal/storagestate"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

func statusOn(cfg *Config) {
	cfg.Status.HTTP.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Status.MaxRows = 2
}

func getStatus(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, string(b)
}

// TestStatusPageWorstFirstAndEscaped: the page puts the service with the
// most copies on top with its diagnosis, bounds its tables at max_rows, and
// shows a hostile service name (markup, control characters, 10 kB) escaped
// and cut; the JSON holds the same.
func TestStatusPageWorstFirstAndEscaped(t *testing.T) {
	h := newHarness(t, statusOn)
	st := h.traces.(*tracesProcessor).st
	if st.status == nil || st.status.Addr() == "" {
		t.Fatal("status.http.endpoint set, but no status server started")
	}
	hostile := "<script>alert(1)</script>\x1b[31m\u2028" + strings.Repeat("A", 10<<10)
	// "twice" sends every span again in its own request; "mixed" once
	// among new ones; "clean" never; hostile once, whole.
	for _, svc := range []string{"twice", hostile} {
		for range 2 {
			if err := h.sendTraces(traces(spanSpec{service: svc, trace: byte(len(svc)), span: 1, name: "a"}, spanSpec{service: svc, trace: byte(len(svc)), span: 2, name: "b"})); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.sendTraces(traces(spanSpec{service: "twice", trace: 9, span: 1, name: "c"})); err != nil {
		t.Fatal(err)
	}
	if err := h.sendTraces(traces(spanSpec{service: "twice", trace: 9, span: 1, name: "c"})); err != nil {
		t.Fatal(err)
	}
	if err := h.sendTraces(traces(spanSpec{service: "clean", trace: 7, span: 1, name: "d"})); err != nil {
		t.Fatal(err)
	}

	code, hdr, page := getStatus(t, st.status.Handler(), "/")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(page, `<meta http-equiv="refresh"`) || strings.Contains(page, "<script>") {
		t.Errorf("page lacks its refresh or carries a script:\n%.2000s", page)
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[31m\\u2028AAA") {
		t.Errorf("hostile name not shown escaped:\n%.3000s", page)
	}
	// The name is a label: cut to 256 bytes where it is taken from the
	// data (internal/sanitize), marked by an ellipsis.
	if strings.Contains(page, strings.Repeat("A", statuspage.NameBytes+1)) || !strings.Contains(page, "AAA…") {
		t.Errorf("hostile name not cut at %d bytes", statuspage.NameBytes)
	}
	if strings.ContainsAny(page, "\x1b\u2028") {
		t.Error("page carries raw control characters")
	}
	first := strings.Index(page, "<td class=\"name\">twice</td>")
	if first < 0 || first > strings.Index(page, "&lt;script") {
		t.Errorf("the service with the most copies is not on top:\n%.3000s", page)
	}
	if !strings.Contains(page, "1 more services not shown") {
		t.Errorf("max_rows 2 does not bound the services table:\n%.3000s", page)
	}

	code, hdr, body := getStatus(t, st.status.Handler(), "/status.json")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status.json: %d %s", code, hdr.Get("Content-Type"))
	}
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Services) != 2 || s.ServicesNotShown != 1 {
		t.Fatalf("services %+v (%d not shown), want 2 shown and 1 not", s.Services, s.ServicesNotShown)
	}
	top := s.Services[0]
	if top.Service != "twice" || top.Received != 6 || top.Copies != 3 || top.Share != 0.5 || top.Action != "dropped" ||
		!strings.Contains(top.Diagnosis, "whole requests arrive again") || top.FirstSeen.IsZero() || top.LastSeen.Before(top.FirstSeen) {
		t.Errorf("top service %+v", top)
	}
	if len(s.Services[1].Service) > statuspage.NameBytes+64 || !strings.HasPrefix(s.Services[1].Service, `<script>alert(1)</script>\x1b[31m\u2028AAA`) {
		t.Errorf("second service %q", s.Services[1].Service)
	}
	if len(s.Windows) != 3 || s.Windows[0].Signal != "traces" || s.Windows[0].Entries != 6 || s.Windows[0].Configured != 300 {
		t.Errorf("windows %+v", s.Windows)
	}

	if code, _, _ := getStatus(t, st.status.Handler(), "/other"); code != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404", code)
	}
}

// TestStatusPageStreams: a metric stream written by two processes of one
// identity is listed with both start times, its points and the diagnosis;
// past status.max_streams the events of other streams are counted, not kept.
func TestStatusPageStreams(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	cfg.Status.MaxStreams = 1
	cfg.Metrics.Overlap = OverlapKeepOne // it elects the earlier start at once
	set := processortest.NewNopSettings(Type)
	sink := new(consumertest.MetricsSink)
	p, err := NewFactory().CreateMetrics(context.Background(), set, cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	now := time.Now()
	early, late := now.Add(-time.Minute), now.Add(-time.Second)
	send := func(metric string, start, at time.Time, v int64) {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "collider")
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(metric)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetIntValue(v)
		dp.Attributes().PutStr("queue", "<b>q1</b>\x1b")
		dp.Attributes().PutInt("shard", 3)
		if err := p.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	for _, metric := range []string{"jobs_done", "second_stream"} {
		for i := range 3 {
			at := now.Add(time.Duration(i) * time.Second)
			send(metric, late, at, int64(i+1))
			send(metric, early, at.Add(time.Millisecond), int64(100+i))
		}
	}
	st := p.(*metricsProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Streams) != 1 || s.StreamsRefused != 3 {
		t.Fatalf("streams %+v, refused %d; want jobs_done kept and second_stream's election and 2 overlaps refused", s.Streams, s.StreamsRefused)
	}
	got := s.Streams[0]
	if got.Service != "collider" || got.Metric != "jobs_done" || got.ElectedStart == nil || got.OtherStart == nil ||
		got.Elections != 1 || got.Points < 2 || !strings.Contains(got.Diagnosis, "service.instance.id") {
		t.Errorf("stream %+v", got)
	}
	if !got.ElectedStart.Equal(early) || !got.OtherStart.Equal(late) {
		t.Errorf("start times elected %v, other %v; want %v (the earlier start), %v", got.ElectedStart, got.OtherStart, early, late)
	}
	// The stream's point attributes, sorted by key, cleaned, and escaped
	// on the page.
	if got.Attributes != `queue=<b>q1</b>\x1b, shard=3` {
		t.Errorf("stream attributes %q", got.Attributes)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, `<td class="name">queue=&lt;b&gt;q1&lt;/b&gt;\x1b, shard=3</td>`) {
		t.Errorf("stream attributes not on the page, escaped:\n%.4000s", page)
	}
	// Names break after their separators, not mid-word.
	if !strings.Contains(page, `<td class="name">jobs_<wbr>done</td>`) || strings.Contains(page, "break-all") {
		t.Errorf("metric name without break points, or broken anywhere:\n%.4000s", page)
	}
}

// TestStatusPageMetricsRow: the metric signal's row of the state table
// says what bounds it: streams idle for max_stale are forgotten, and at
// max_streams new streams pass unjudged. It names no oldest entry, which
// streams do not have (the span window's row does).
func TestStatusPageMetricsRow(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	cfg.Metrics.MaxStreams = 1
	p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(Type), cfg, new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	st := p.(*metricsProcessor).st
	row := func() (statuspage.WindowStatus, string) {
		t.Helper()
		_, _, body := getStatus(t, st.status.Handler(), "/status.json")
		var s statuspage.Status
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Windows) != 3 || s.Windows[2].Signal != "metrics" || s.Windows[0].Signal != "traces" {
			t.Fatalf("windows %+v, want traces, logs, metrics", s.Windows)
		}
		if strings.Count(body, `"oldest_entry_age_seconds"`) != 2 || strings.Count(body, `"entries_are_streams"`) != 1 ||
			s.Windows[0].Streams || s.Windows[0].OldestAge == nil || s.Windows[1].Streams || s.Windows[1].OldestAge == nil {
			t.Errorf("want an oldest entry's age for the traces and logs windows only, and the metrics window alone of streams:\n%s", body)
		}
		_, _, page := getStatus(t, st.status.Handler(), "/")
		i := strings.Index(page, "<td>metrics</td>")
		if i < 0 {
			t.Fatalf("no metrics row in the state table:\n%.4000s", page)
		}
		return s.Windows[2], page[i : i+strings.Index(page[i:], "</tr>")]
	}
	const stale = "(max_stale: a stream idle this long is forgotten"
	w, html := row()
	if !w.Streams || !w.NotFull || w.OldestAge != nil || w.Effective != cfg.Metrics.MaxStale.Seconds() ||
		!strings.Contains(html, stale+")") || strings.Contains(html, "oldest") {
		t.Errorf("no stream held: %+v\n%s", w, html)
	}
	now := uint64(time.Now().UnixNano())
	if err := p.ConsumeMetrics(context.Background(), sumPoint(now-uint64(time.Minute), now, 1)); err != nil {
		t.Fatal(err)
	}
	w, html = row()
	if !w.Streams || w.NotFull || w.Entries != 1 || w.Limit != 1 ||
		!strings.Contains(html, stale+`; <span class="warn">at max_streams: new streams pass unjudged</span>)`) || strings.Contains(html, "oldest") {
		t.Errorf("max_streams streams held: %+v\n%s", w, html)
	}
}

// TestStreamAttrsBounded: a stream's attributes as the page keeps them are
// bounded in number and bytes whatever the point carries, sorted by key,
// and keep nothing of the request's strings.
func TestStreamAttrsBounded(t *testing.T) {
	m := pcommon.NewMap()
	for i := range 100 {
		m.PutStr(fmt.Sprintf("k%03d", 99-i), strings.Repeat("v", 10<<10))
	}
	m.PutEmptyMap("nested").PutStr("a", "b")
	got := streamAttrs(m)
	if len(got) > streamAttrBytes+streamAttrBytes+64 || !strings.HasPrefix(got, "k068=vvv") || !strings.HasSuffix(got, ", +69 more") {
		t.Errorf("%d bytes: %.100q ... %.100q", len(got), got, got[max(len(got)-100, 0):])
	}
	small := pcommon.NewMap()
	small.PutStr("b", "2")
	small.PutEmptyMap("a").PutStr("x", "y")
	small.PutEmptyBytes("c").FromRaw([]byte{1, 2, 3})
	if got := streamAttrs(small); got != "a={1 keys}, b=2, c=(3 bytes)" {
		t.Errorf("streamAttrs = %q", got)
	}
}

// TestStatusPageNested: with traces.nested.detect, the page lists each
// service's nested duplicates by scope pair with the latest span and the
// diagnosis; without it, it says they are not looked for.
func TestStatusPageNested(t *testing.T) {
	h := newHarness(t, func(c *Config) { statusOn(c); c.Traces.Nested.Detect = true })
	for i := range 3 {
		if err := h.sendTraces(doubleWrapped(byte(i + 1))); err != nil {
			t.Fatal(err)
		}
	}
	st := h.traces.(*tracesProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if !s.NestedDetect || len(s.Nested) != 1 {
		t.Fatalf("nested %+v (detect %v), want one row", s.Nested, s.NestedDetect)
	}
	n := s.Nested[0]
	want := statuspage.NestedStatus{Service: "api", OuterScope: "otelhttp 0.71.0", InnerScope: "otelhttp 0.71.0", Spans: 3, Action: "counted",
		Kind: "SERVER", Name: "GET /rollouts", LastSeen: n.LastSeen,
		Diagnosis: `otelhttp 0.71.0 inside otelhttp 0.71.0: one request recorded twice ("GET /rollouts"): the same instrumentation is applied twice (a handler or client wrapped twice?); keep one`}
	if n != want || n.LastSeen.IsZero() {
		t.Errorf("nested row\n got %+v\nwant %+v", n, want)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, `<table id="nested">`) || !strings.Contains(page, "3 counted") || !strings.Contains(page, "SERVER GET /rollouts") {
		t.Errorf("nested table not on the page:\n%.5000s", page)
	}

	off := newHarness(t, statusOn)
	_, _, page = getStatus(t, off.traces.(*tracesProcessor).st.status.Handler(), "/")
	if !strings.Contains(page, "Not looked for: traces.nested.detect is off.") {
		t.Errorf("page without nested detection:\n%.5000s", page)
	}
}

// TestStatusPageQueues: a sending queue an exporter reports through the
// TakeBack is on the page while it is watched, read when the page is.
func TestStatusPageQueues(t *testing.T) {
	f, tb := NewFactoryWithTakeBack()
	cfg := createDefaultConfig()
	statusOn(cfg)
	set := processortest.NewNopSettings(Type)
	p, err := f.CreateTraces(context.Background(), set, cfg, new(consumertest.TracesSink))
	if err != nil {
		t.Fatal(err)
	}
	// The exporter starts first, as in a collector.
	var size atomic.Int64
	size.Store(600)
	unwatch := tb.WatchQueue(set.ID, component.MustNewIDWithName("dedup_otlp_grpc", "upstream"), "traces", "bytes",
		func() (int64, int64) { return size.Load(), 1000 })
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	st := p.(*tracesProcessor).st
	read := func() statuspage.Status {
		_, _, body := getStatus(t, st.status.Handler(), "/status.json")
		var s statuspage.Status
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := QueueStatus{Exporter: "dedup_otlp_grpc/upstream", Signal: "traces", Sizer: "bytes", Size: 600, Capacity: 1000, Fill: 0.6}
	if s := read(); len(s.Queues) != 1 || s.Queues[0] != want {
		t.Fatalf("queues %+v, want %+v", s.Queues, want)
	}
	size.Store(900)
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, `<tr class="bad"><td class="name">dedup_otlp_grpc/upstream</td><td>traces</td><td class="n">900 bytes</td><td class="n">1000 bytes</td><td class="n">90.0%</td><td></td><td></td><td></td><td></td></tr>`) {
		t.Errorf("queue row not on the page, or not marked at 90%%:\n%.6000s", page)
	}
	unwatch()
	unwatch()
	if s := read(); len(s.Queues) != 0 {
		t.Errorf("queues %+v after the exporter stopped watching", s.Queues)
	}
	if _, _, page := getStatus(t, st.status.Handler(), "/"); !strings.Contains(page, "No exporter after dedup reports a sending queue") {
		t.Errorf("page without queues:\n%.6000s", page)
	}
}

func TestStatusConfigValidate(t *testing.T) {
	cfg := createDefaultConfig()
	if cfg.Status.Enabled() {
		t.Fatal("status page on by default; it is opt-in")
	}
	cfg.Status.MaxRows = 0 // ignored while off
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	statusOn(cfg)
	cfg.Status.MaxRows, cfg.Status.MaxStreams = 0, statuspage.MaxMaxStreams+1
	err := confmap.Validate(cfg)
	if err == nil || !strings.Contains(err.Error(), "status: max_rows must be between 1 and 1000, got 0\nmax_streams must be between 1 and 100000, got 100001") {
		t.Fatalf("Validate: %v", err)
	}
}

// TestStatusPageWhileConsuming reads the page while spans arrive; run with
// -race (scripts/test.sh does) it shows the reads copy under the locks.
func TestStatusPageWhileConsuming(t *testing.T) {
	h := newHarness(t, func(c *Config) { statusOn(c); c.Traces.Nested.Detect = true })
	st := h.traces.(*tracesProcessor).st
	done := make(chan struct{})
	// The sender waits halfway for the first read, so that pages are read
	// while it consumes however the two are scheduled.
	firstRead := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		for i := range 200 {
			if i == 100 {
				<-firstRead
			}
			_ = h.sendTraces(traces(spanSpec{service: "svc" + strconv.Itoa(i%5), trace: byte(i), span: 1, name: "a"}))
			_ = h.sendTraces(doubleWrapped(byte(i))) // nested duplicates
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			if reads == 0 {
				t.Fatal("no page read while consuming")
			}
			code, _, _ := getStatus(t, st.status.Handler(), "/status.json")
			if code != http.StatusOK {
				t.Fatalf("status.json: %d", code)
			}
			return
		default:
		}
		if code, _, _ := getStatus(t, st.status.Handler(), "/"); code != http.StatusOK {
			t.Fatalf("GET /: %d", code)
		}
		reads++
		once.Do(func() { close(firstRead) })
	}
}

// FuzzStreamAttrs: whatever attributes a point carries, what the page
// keeps of them is bounded, and what it shows is valid UTF-8 without
// control characters.
func FuzzStreamAttrs(f *testing.F) {
	f.Add("queue", "<b>jobs</b>", 3, int64(7))
	f.Add("\x1b[2J", "\u202e\xff", 100, int64(-1))
	f.Add(strings.Repeat("k", 600), strings.Repeat("\u4e16", 300), 40, int64(0))
	f.Fuzz(func(t *testing.T, key, val string, n int, i int64) {
		m := pcommon.NewMap()
		for j := range min(max(n, 0), 200) {
			m.PutStr(key+strconv.Itoa(j), val)
		}
		m.PutInt(key, i)
		m.PutEmptySlice(val).AppendEmpty().SetStr(val)
		kept := streamAttrs(m)
		if len(kept) > 3*streamAttrBytes+64 {
			t.Fatalf("%d attributes of %d+%d bytes kept as %d bytes", m.Len(), len(key), len(val), len(kept))
		}
		shown := statuspage.CleanNameBytes(kept, streamAttrBytes)
		if !utf8.ValidString(shown) || len(shown) > streamAttrBytes+6+64 {
			t.Fatalf("shown as %d bytes: %q", len(shown), shown)
		}
		for _, r := range shown {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("shown %q keeps %U", shown, r)
			}
		}
	})
}

// TestStatusPageCopiesTableOnlyCopies: a service that sent no copies is
// not listed under "Services sending copies" but in the table of other
// services; status.json lists every service either way.
func TestStatusPageCopiesTableOnlyCopies(t *testing.T) {
	h := newHarness(t, func(c *Config) { statusOn(c); c.Status.MaxRows = 10 })
	st := h.traces.(*tracesProcessor).st
	for range 2 {
		if err := h.sendTraces(traces(spanSpec{service: "twice", trace: 1, span: 1, name: "a"})); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.sendTraces(traces(spanSpec{service: "clean", trace: 7, span: 1, name: "d"})); err != nil {
		t.Fatal(err)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	copies := page[strings.Index(page, "<h2>Services sending copies</h2>"):]
	copies = copies[:strings.Index(copies, "</table>")]
	if !strings.Contains(copies, ">twice<") || strings.Contains(copies, ">clean<") {
		t.Errorf("copies table:\n%s", copies)
	}
	i := strings.Index(page, `<table id="quiet-services">`)
	if i < 0 || !strings.Contains(page[i:], ">clean<") {
		t.Errorf("no table of services without copies listing clean:\n%.3000s", page)
	}
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Services) != 2 || s.Services[1].Service != "clean" || s.Services[1].Copies != 0 {
		t.Errorf("status.json services %+v, want twice and clean", s.Services)
	}
}

// TestStatusPageHeader: the page and its JSON say which build serves them
// (the collector's version and the commit internal/buildinfo knows, here
// one linked in as scripts/release.sh links it), since when, and on which
// endpoint.
func TestStatusPageHeader(t *testing.T) {
	defer func(c, m string) { buildinfo.Commit, buildinfo.Modified = c, m }(buildinfo.Commit, buildinfo.Modified)
	const commit = "0123456789abcdef0123456789abcdef01234567"
	buildinfo.Commit, buildinfo.Modified = commit, "true"
	h := newHarness(t, statusOn)
	st := h.traces.(*tracesProcessor).st
	want := component.NewDefaultBuildInfo().Version
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Header.Version != want || s.Header.Commit != commit || !s.Header.Modified ||
		s.Header.Started.IsZero() || s.Header.Started.After(s.Generated) ||
		s.Header.UptimeSeconds < 0 || s.Header.Endpoint != "127.0.0.1:0" {
		t.Errorf("header %+v, want version %q, commit %s with local changes, a start before %v, endpoint 127.0.0.1:0", s.Header, want, commit, s.Generated)
	}
	_, _, page := getStatus(t, st.status.Handler(), "/")
	if !strings.Contains(page, `<p id="header">Version `+want+` (commit 0123456789ab with local changes);`) ||
		!strings.Contains(page, "status page on 127.0.0.1:0; upstream not reported.") {
		t.Errorf("page header:\n%.1500s", page)
	}
}

// fakeDataDir is a storage extension reporting its data dir's room, as
// log_storage does (its own tests fill a real filesystem).
type fakeDataDir struct {
	component.StartFunc
	component.ShutdownFunc
	st atomic.Pointer[storagestate.State]
}

func (f *fakeDataDir) StorageState() storagestate.State { return *f.st.Load() }

type extHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h extHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// A storage extension found through the host that reports its data dir
// full is named on the page and in status.json, with the room left and
// what was refused; once it has room again the line goes.
func TestStatusPageDataDirFull(t *testing.T) {
	cfg := createDefaultConfig()
	statusOn(cfg)
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), cfg, new(consumertest.TracesSink))
	if err != nil {
		t.Fatal(err)
	}
	dd := &fakeDataDir{}
	dd.st.Store(&storagestate.State{Directory: "/var/lib/doubletake", FreeBytes: 4096, FullClients: []string{"exporter_dedup_otlp_grpc_upstream_traces"}, RefusedWrites: 17})
	host := extHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{component.MustNewID("log_storage"): dd}}
	if err := p.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	st := p.(*tracesProcessor).st
	_, _, body := getStatus(t, st.status.Handler(), "/status.json")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.DataDirs) != 1 || !s.DataDirs[0].Full || s.DataDirs[0].FreeBytes != 4096 || s.DataDirs[0].RefusedWrites != 17 {
		t.Fatalf("data dirs %+v", s.DataDirs)
	}
	want := "data dir full: 4096 bytes free on the filesystem of /var/lib/doubletake, new data refused (retryably: HTTP 503, gRPC Unavailable) by exporter_dedup_otlp_grpc_upstream_traces until the queue drains or room is freed; 17 writes refused so far."
	if _, _, page := getStatus(t, st.status.Handler(), "/"); !strings.Contains(page, want) {
		t.Fatalf("the page does not say the data dir is full:\n%.3000s", page)
	}
	dd.st.Store(&storagestate.State{Directory: "/var/lib/doubletake", FreeBytes: 1 << 30, RefusedWrites: 17})
	if _, _, page := getStatus(t, st.status.Handler(), "/"); strings.Contains(page, "data dir full") {
		t.Fatalf("the page still says the data dir is full:\n%.3000s", page)
	}
}
