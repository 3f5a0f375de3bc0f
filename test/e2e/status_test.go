package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// statusJSON is the part of /status.json the test reads.
type statusJSON struct {
	Services []struct {
		Service   string  `json:"service"`
		Received  int64   `json:"received"`
		Copies    int64   `json:"copies"`
		Share     float64 `json:"duplicate_share"`
		Diagnosis string  `json:"diagnosis"`
	} `json:"services"`
	Streams []struct {
		Service      string     `json:"service"`
		Metric       string     `json:"metric"`
		Attributes   string     `json:"attributes"`
		ElectedStart *time.Time `json:"elected_start"`
		OtherStart   *time.Time `json:"other_start"`
		Elections    int64      `json:"elections"`
		Points       int64      `json:"points"`
		Diagnosis    string     `json:"diagnosis"`
	} `json:"streams"`
	Windows []struct {
		Signal string `json:"signal"`
	} `json:"windows"`
	Nested []struct {
		Service    string `json:"service"`
		OuterScope string `json:"outer_scope"`
		InnerScope string `json:"inner_scope"`
		Spans      int64  `json:"spans"`
		Action     string `json:"action"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		Diagnosis  string `json:"diagnosis"`
	} `json:"nested"`
	Queues []struct {
		Exporter string `json:"exporter"`
		Signal   string `json:"signal"`
		Sizer    string `json:"sizer"`
		Size     int64  `json:"size"`
		Capacity int64  `json:"capacity"`
	} `json:"queues"`
}

// postSpans sends one span of service twice, as OTLP/HTTP JSON.
func postSpanTwice(t *testing.T, addr, service string) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID([16]byte{0xee, 1})
	sp.SetSpanID([8]byte{0xee, 1})
	sp.SetName("op")
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code, body := post(t, "http://"+addr+"/v1/traces", "application/json", string(b)); code != 200 {
			t.Fatalf("posting spans: %d %s", code, body)
		}
	}
}

// firstRow returns the first data row of the table with id in an HTML
// document: the row after the header.
func firstRow(t *testing.T, dom, id string) string {
	t.Helper()
	i := strings.Index(dom, `<table id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no table %s in the page:\n%.3000s", id, dom)
	}
	rest := dom[i:]
	rows := strings.SplitN(rest, "<tr", 4)
	if len(rows) < 3 {
		t.Fatalf("table %s has no data row", id)
	}
	return rows[2][:strings.Index(rows[2], "</tr>")]
}

// TestStatusPageInChromium: the embedded default's status page, loaded in
// headless Chromium while the JS SDK exports every span twice, a clean
// service exports once, two processes share one metric identity (a stream
// with a point attribute carrying markup), a server instrumented twice by
// otelhttp (test/nestedserver) records each request twice, and a service
// names itself with markup, control characters and 10 kB: the double
// exporter, the collided stream with its attributes and the nested
// duplicates are on top with their diagnoses, the hostile name is escaped
// and cut, and /status.json says the same. A second gateway forwarding to
// an upstream that does not answer (--upstream) shows its persistent
// queue holding what it was sent; the local one says it has no queue.
// STATUS_SCREENSHOT=path keeps the screenshot (docs/status-page.png).
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	jsClient(t)
	d := startDefault(t)
	base := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + d.http, "CLIENT_PROTOCOL=http/protobuf",
		"CLIENT_ROLLOUTS=20", "CLIENT_ROLLOUT_MS=50"}
	runJS(t, append(base, "CLIENT_SERVICE=checkout", "CLIENT_MODE=traces-single")...)
	runJS(t, append(base, "CLIENT_SERVICE=payments", "CLIENT_MODE=traces-double")...)
	sendCollisionAttrs(t, d.http, "inventory", "jobs_done", map[string]string{"queue": "<b>jobs</b>"})
	nested := exec.CommandContext(ctxTimeout(t, 2*time.Minute), nestedServer(t), nestedServerArgs(t, "double", "-service", "doubled")[1:]...)
	nested.Env = append(os.Environ(), append(nestedProtocolEnv("http/protobuf"), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+d.http)...)
	out, err := nested.CombinedOutput()
	if err != nil {
		t.Fatalf("nestedserver: %v\n%s", err, out)
	}
	pairs, nestedRows := nestedPairs(t, string(out)), 1
	if pairs == 0 {
		nestedRows = 0
	}
	hostile := "<img src=x onerror=alert(1)><script>alert(2)</script>\x1b[2J\u202e" + strings.Repeat("x", 10<<10)
	postSpanTwice(t, d.http, hostile)

	var s statusJSON
	waitFor(t, 30*time.Second, "the status page to show every service and the stream", func() bool {
		if err := json.Unmarshal([]byte(get(t, "http://"+d.status+"/status.json")), &s); err != nil {
			t.Fatalf("status.json: %v", err)
		}
		return len(s.Services) == 4 && len(s.Streams) == 1 && s.Services[0].Copies == 40 &&
			len(s.Nested) == nestedRows && (pairs == 0 || s.Nested[0].Spans == int64(pairs))
	})
	top := s.Services[0]
	if top.Service != "payments" || top.Received != 80 || top.Share != 0.5 || !strings.Contains(top.Diagnosis, "process") {
		t.Errorf("top service %+v, want payments: 80 received, half of them copies, with a diagnosis", top)
	}
	if !strings.HasPrefix(s.Services[1].Service, `<img src=x onerror=alert(1)><script>alert(2)</script>\x1b[2J`) || len(s.Services[1].Service) > 400 {
		t.Errorf("hostile name in JSON not cleaned and cut: %.400q", s.Services[1].Service)
	}
	if s.Services[2].Service != "checkout" || s.Services[2].Copies != 0 || s.Services[2].Diagnosis != "" {
		t.Errorf("clean service %+v", s.Services[2])
	}
	st := s.Streams[0]
	// The embedded default judges the second writer (overlap: auto): two
	// writers counting apart are peers, each kept as its own series, so
	// the first one stays elected (no election) and the diagnosis asks
	// for a unique service.instance.id.
	if st.Service != "inventory" || st.Metric != "jobs_done" || st.Elections != 0 || st.Points < 4 ||
		st.ElectedStart == nil || st.OtherStart == nil || !st.OtherStart.Before(*st.ElectedStart) ||
		!strings.Contains(st.Diagnosis, "unique service.instance.id") || st.Attributes != "queue=<b>jobs</b>" {
		t.Errorf("stream %+v", st)
	}
	scope := otelhttpScope.Name + " " + otelhttpScope.Version
	if pairs == 0 {
		t.Logf("no nested row: no request of nestedserver nested within the rule's tolerance")
	} else if n := s.Nested[0]; n.Service != "doubled" || n.OuterScope != scope || n.InnerScope != scope ||
		n.Action != "counted" || n.Kind != "SERVER" || n.Name != "POST /rollouts/{id}" ||
		!strings.Contains(n.Diagnosis, "the same instrumentation is applied twice") {
		t.Errorf("nested duplicates %+v", n)
	}
	if len(s.Queues) != 0 {
		t.Errorf("queues %+v on the local gateway, which has none", s.Queues)
	}

	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--hide-scrollbars", "--window-size=1400,1000"}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctxTimeout(t, 2*time.Minute), bin, append(flags, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	url := "http://" + d.status + "/"
	dom := run("--dump-dom", url)
	if row := firstRow(t, dom, "services"); !strings.Contains(row, ">payments<") || !strings.Contains(row, "40 dropped") || !strings.Contains(row, "50.0%") {
		t.Errorf("first service row: %s", row)
	}
	if row := firstRow(t, dom, "streams"); !strings.Contains(row, ">inventory<") || !strings.Contains(row, ">jobs_<wbr>done<") ||
		!strings.Contains(row, ">queue=&lt;b&gt;jobs&lt;/b&gt;<") || !strings.Contains(row, "service.instance.id") {
		t.Errorf("first stream row: %s", row)
	}
	if pairs > 0 {
		if row := firstRow(t, dom, "nested"); !strings.Contains(row, ">doubled<") || !strings.Contains(row, fmt.Sprintf("%d counted", pairs)) ||
			!strings.Contains(row, "SERVER POST /rollouts/{id}") || !strings.Contains(row, "wrapped twice") {
			t.Errorf("first nested row: %s", row)
		}
	}
	if !strings.Contains(dom, "No exporter after dedup reports a sending queue") {
		t.Errorf("the local gateway's page does not say it has no queue")
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "<script") || strings.ContainsAny(dom, "\x1b\u202e") {
		t.Errorf("the hostile name became markup or kept its control characters")
	}
	if !strings.Contains(dom, "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;\\x1b[2J\\u202e") {
		i := strings.Index(dom, "onerror")
		t.Errorf("the hostile name is not shown escaped: %.300q", dom[max(i-100, 0):])
	}
	if strings.Contains(dom, strings.Repeat("x", 257)) || !strings.Contains(dom, "xxx…") {
		t.Errorf("the 10 kB name is not cut")
	}

	shot := filepath.Join(t.TempDir(), "status.png")
	if p := os.Getenv("STATUS_SCREENSHOT"); p != "" {
		shot = p
	}
	run("--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Rows of services sending copies and of the stream are tinted.
	if n := countColor(img, 0xff, 0xf1, 0xf0); n < 5000 {
		t.Errorf("screenshot %v: %d pixels of the offending rows' tint, want the rows drawn", img.Bounds().Size(), n)
	}

	// A gateway forwarding to an upstream that does not answer: its
	// persistent queue holds the span, on its page.
	du := startDefault(t, "--upstream", "http://"+freePort(t))
	postSpanTwice(t, du.http, "queued")
	var q statusJSON
	waitFor(t, 30*time.Second, "the upstream gateway's page to show its queue holding the span", func() bool {
		if err := json.Unmarshal([]byte(get(t, "http://"+du.status+"/status.json")), &q); err != nil {
			t.Fatalf("status.json: %v", err)
		}
		for _, e := range q.Queues {
			if e.Signal == "traces" && e.Size > 0 {
				return true
			}
		}
		return false
	})
	if len(q.Queues) != 3 {
		t.Errorf("queues %+v, want one per signal", q.Queues)
	}
	for _, e := range q.Queues {
		if e.Exporter != "dedup_otlp_grpc/upstream" || e.Sizer != "bytes" || e.Capacity != 536870912 {
			t.Errorf("queue %+v, want dedup_otlp_grpc/upstream's, 512 MiB in bytes", e)
		}
	}
	udom := run("--dump-dom", "http://"+du.status+"/")
	if !strings.Contains(udom, `<table id="queues">`) || !strings.Contains(udom, ">dedup_otlp_grpc/upstream<") || !strings.Contains(udom, "536870912 bytes") {
		i := strings.Index(udom, "Journals")
		t.Errorf("the upstream gateway's page does not show its queue: %.1500s", udom[max(i, 0):])
	}
}
