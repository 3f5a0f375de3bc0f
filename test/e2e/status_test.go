package e2e

import (
	"bytes"
	"encoding/json"
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
		ElectedStart *time.Time `json:"elected_start"`
		OtherStart   *time.Time `json:"other_start"`
		Elections    int64      `json:"elections"`
		Points       int64      `json:"points"`
		Diagnosis    string     `json:"diagnosis"`
	} `json:"streams"`
	Windows []struct {
		Signal string `json:"signal"`
	} `json:"windows"`
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
// service exports once, two processes share one metric identity, and a
// service names itself with markup, control characters and 10 kB: the
// double exporter and the collided stream are on top with their diagnoses,
// the hostile name is escaped and cut, and /status.json says the same.
// STATUS_SCREENSHOT=path keeps the screenshot (docs/status-page.png).
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	jsClient(t)
	d := startDefault(t)
	base := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + d.http, "CLIENT_PROTOCOL=http/protobuf",
		"CLIENT_ROLLOUTS=20", "CLIENT_ROLLOUT_MS=50"}
	runJS(t, append(base, "CLIENT_SERVICE=checkout", "CLIENT_MODE=traces-single")...)
	runJS(t, append(base, "CLIENT_SERVICE=payments", "CLIENT_MODE=traces-double")...)
	sendCollision(t, d.http, "inventory", "jobs_done")
	hostile := "<img src=x onerror=alert(1)><script>alert(2)</script>\x1b[2J\u202e" + strings.Repeat("x", 10<<10)
	postSpanTwice(t, d.http, hostile)

	var s statusJSON
	waitFor(t, 30*time.Second, "the status page to show every service and the stream", func() bool {
		if err := json.Unmarshal([]byte(get(t, "http://"+d.status+"/status.json")), &s); err != nil {
			t.Fatalf("status.json: %v", err)
		}
		return len(s.Services) == 3 && len(s.Streams) == 1 && s.Services[0].Copies == 40
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
	if st.Service != "inventory" || st.Metric != "jobs_done" || st.Elections != 1 || st.Points < 4 ||
		st.ElectedStart == nil || st.OtherStart == nil || !st.ElectedStart.Before(*st.OtherStart) ||
		!strings.Contains(st.Diagnosis, "without a unique service.instance.id") {
		t.Errorf("stream %+v", st)
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
	if row := firstRow(t, dom, "streams"); !strings.Contains(row, ">inventory<") || !strings.Contains(row, ">jobs_done<") || !strings.Contains(row, "service.instance.id") {
		t.Errorf("first stream row: %s", row)
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
}
