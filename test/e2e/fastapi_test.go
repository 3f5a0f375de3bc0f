package e2e

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Issue 36: the seed's failure with the seed's own stack. test/python/
// seed_app.py registers its own tracer, meter and logger providers with
// OTLP/HTTP exporters, records its counter before startup and serves under
// uvicorn with OTEL_EXPORTER_OTLP_ENDPOINT pointing at `doubletake run`.
// The gateway feeds every signal to two pipelines, one without dedup and
// one with it: traces and logs to OTLP-JSON files, metrics to a real
// Prometheus by remote write (told apart by a pipeline label). The truth
// is what the test asked the app to do.

// seedConfig is the side-by-side gateway: the OTLP/HTTP receiver on http,
// each signal without and with dedup, traces and logs to files in dir,
// metrics to Prometheus, the dedup status page on status. dedupExtra are
// more lines of dedup's config (indented as its keys).
func seedConfig(health, httpAddr, writeURL, status, dir string, dedupExtra ...string) string {
	var files strings.Builder
	for _, sig := range []string{"traces", "logs"} {
		for _, p := range []string{"plain", "dedup"} {
			fmt.Fprintf(&files, "  file/%s-%s:\n    path: %s\n", sig, p, filepath.Join(dir, sig+"-"+p+".jsonl"))
		}
	}
	return fmt.Sprintf(`
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  dedup:
    status: {http: {endpoint: %s}}
    telemetry: {summary_interval: 1s}
%sexporters:
%s  prometheusremotewrite/plain:
    endpoint: %s
    external_labels: {pipeline: plain}
    tls: {insecure: true}
    target_info: {enabled: false}
  prometheusremotewrite/dedup:
    endpoint: %s
    external_labels: {pipeline: dedup}
    tls: {insecure: true}
    target_info: {enabled: false}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    traces/plain:
      receivers: [otlp]
      exporters: [file/traces-plain]
    traces/dedup:
      receivers: [otlp]
      processors: [dedup]
      exporters: [file/traces-dedup]
    logs/plain:
      receivers: [otlp]
      exporters: [file/logs-plain]
    logs/dedup:
      receivers: [otlp]
      processors: [dedup]
      exporters: [file/logs-dedup]
    metrics/plain:
      receivers: [otlp]
      exporters: [prometheusremotewrite/plain]
    metrics/dedup:
      receivers: [otlp]
      processors: [dedup]
      exporters: [prometheusremotewrite/dedup]
`, health, httpAddr, status, strings.Join(dedupExtra, ""), files.String(), writeURL, writeURL)
}

// seedRun is the gateway and Prometheus the seed's processes export to.
type seedRun struct {
	prom     *prometheus
	g        *gateway
	httpAddr string
	status   string
	dir      string
}

func startSeedRun(t *testing.T, dedupExtra ...string) *seedRun {
	t.Helper()
	prom := startPrometheus(t)
	r := &seedRun{prom: prom, httpAddr: freePort(t), status: freePort(t), dir: t.TempDir()}
	health := freePort(t)
	r.g = startGatewayConfig(t, health, seedConfig(health, r.httpAddr, prom.writeURL(), r.status, r.dir, dedupExtra...))
	return r
}

// statusJSON is the dedup status page's /status.json, or why not.
func (r *seedRun) statusJSON() string {
	c := http.Client{Timeout: time.Minute}
	resp, err := c.Get("http://" + r.status + "/status.json")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The seed app's workload (test/python/seed_app.py): the counter seed.jobs
// holds seedPrestart before startup and adds 1 per GET /items/N, which also
// records N to the histogram seed.job.duration (whose pre-startup sample
// is seedPrestart too); one GET /items/abc fails validation.
const (
	seedPrestart = 7
	seedRequests = 24
	seedEvery    = 100 * time.Millisecond // 2.4 s of requests
	// seedInterval: both readers export every second (FastAPI's reader
	// reads the same variable).
	seedInterval = "OTEL_METRIC_EXPORT_INTERVAL=1000"
	// Prometheus' names for the app's instruments and FastAPI's own.
	seedCounter      = "seed_jobs_total"
	seedHistSum      = "seed_job_duration_milliseconds_sum"
	seedHistCount    = "seed_job_duration_milliseconds_count"
	fastapiDurCount  = "http_server_request_duration_seconds_count"
	seedItemSpan     = "GET /items/{item_id}"
	seedValidationEv = "fastapi.validation.failed"
)

// seedTruth is what one process was asked to record.
type seedTruth struct {
	jobs    int     // the counter's final value: seedPrestart + requests served
	samples int     // the histogram's count: 1 (seedPrestart) + requests served
	histSum float64 // the histogram's sum: seedPrestart + every item id
	served  int     // GET /items/N answered 200
	invalid int     // GET /items/abc answered 422
}

// seedWorkload sends the requests to s, every seedEvery, and returns the
// truth per serving process (the answers name their pid). It may run on
// its own goroutine: it returns an error instead of failing the test.
func seedWorkload(s *pyServer, requests int) (map[string]*seedTruth, error) {
	truth := map[string]*seedTruth{}
	for i := 1; i <= requests; i++ {
		code, body, err := s.get("/items/" + strconv.Itoa(i))
		var ans struct {
			ItemID int `json:"item_id"`
			PID    int `json:"pid"`
		}
		if err != nil || code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.ItemID != i {
			return nil, fmt.Errorf("%s GET /items/%d: %d %s: %w", s.name, i, code, body, err)
		}
		pid := strconv.Itoa(ans.PID)
		if truth[pid] == nil {
			truth[pid] = &seedTruth{jobs: seedPrestart, samples: 1, histSum: seedPrestart}
		}
		truth[pid].jobs++
		truth[pid].samples++
		truth[pid].histSum += float64(i)
		truth[pid].served++
		if i == requests/2 {
			if code, body, err := s.get("/items/abc"); err != nil || code != 422 {
				return nil, fmt.Errorf("%s GET /items/abc: %d %s, want 422: %w", s.name, code, body, err)
			}
			truth[pid].invalid++ // counted against the process that answered last; only the total is asserted
		}
		time.Sleep(seedEvery) // the workload's pace, not synchronization
	}
	return truth, nil
}

// seedFile counts what one OTLP-JSON file holds for one service.
type seedFile struct {
	total, unique int            // spans or log records, and distinct ones
	names         map[string]int // distinct items per span name or log event/body
}

// readSeedTraces reads a traces file: spans per (trace_id, span_id),
// distinct spans per name, for service.
func readSeedTraces(t *testing.T, path, service string) seedFile {
	t.Helper()
	f := seedFile{names: map[string]int{}}
	seen := map[string]bool{}
	var u ptrace.JSONUnmarshaler
	readJSONLines(t, path, func(line []byte) {
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			if v, _ := rs.Resource().Attributes().Get("service.name"); v.Str() != service {
				continue
			}
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					tid, sid := sp.TraceID(), sp.SpanID()
					key := hex.EncodeToString(tid[:]) + hex.EncodeToString(sid[:])
					f.total++
					if !seen[key] {
						seen[key] = true
						f.unique++
						f.names[sp.Name()]++
					}
				}
			}
		}
	})
	return f
}

// readSeedLogs reads a logs file: records per (time, observed time, trace,
// span, event name, body), distinct records per event name (or body).
func readSeedLogs(t *testing.T, path, service string) seedFile {
	t.Helper()
	f := seedFile{names: map[string]int{}}
	seen := map[string]bool{}
	var u plog.JSONUnmarshaler
	readJSONLines(t, path, func(line []byte) {
		ld, err := u.UnmarshalLogs(line)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			if v, _ := rl.Resource().Attributes().Get("service.name"); v.Str() != service {
				continue
			}
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				recs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < recs.Len(); k++ {
					lr := recs.At(k)
					name := lr.EventName()
					if name == "" {
						name = lr.Body().AsString()
					}
					tid, sid := lr.TraceID(), lr.SpanID()
					key := fmt.Sprintf("%d/%d/%x/%x/%s/%s", lr.Timestamp(), lr.ObservedTimestamp(), tid[:], sid[:], lr.EventName(), lr.Body().AsString())
					f.total++
					if !seen[key] {
						seen[key] = true
						f.unique++
						f.names[name]++
					}
				}
			}
		}
	})
	return f
}

// seedCase is one app configuration of the seed test.
type seedCase struct {
	name    string
	venv    string   // requirements file name
	env     []string // besides the endpoint
	doubled bool     // FastAPI adds a second exporter to each provider
}

var seedCases = []seedCase{
	{"fastapi-0.142", "fastapi-0.142", nil, true},
	{"fastapi-0.143-auto", "fastapi-0.143", []string{"FASTAPI_OTEL_AUTO_CONFIGURE=true"}, true},
	{"fastapi-0.143", "fastapi-0.143", nil, false},
}

// TestFastAPISeed: the seed, exactly (case 1). FastAPI 0.142.4, and 0.143.5
// with FASTAPI_OTEL_AUTO_CONFIGURE=true, export every span, log record and
// metric point twice; with dedup every span and log record is stored once,
// each metric stream has one series (one writer), nothing resets and the
// counts are the truth. FastAPI 0.143.5 by default exports once. All three
// apps run at once against one gateway and one Prometheus, told apart by
// service.name. An app whose reader exports before its first request (a
// start-up that outlasts an export interval, on a loaded machine) makes
// FastAPI's reader's first point look like a restart: it is held until the
// app's next point shows it a second writer (docs/metrics.md, "Restarts"),
// so that timing too leaves no reset.
func TestFastAPISeed(t *testing.T) {
	venvs := map[string]string{}
	for _, c := range seedCases {
		venvs[c.venv] = pyVenv(t, c.venv)
	}
	r, truths, statusJSON := runSeed(t, venvs)
	for i, c := range seedCases {
		t.Run(c.name, func(t *testing.T) {
			if len(truths[i]) != 1 {
				t.Fatalf("answers from %d processes, want 1", len(truths[i]))
			}
			var truth *seedTruth
			for _, v := range truths[i] {
				truth = v
			}
			checkSeed(t, r, c, "seed-"+c.name, truth)
		})
	}
	checkSeedNamed(t, r, statusJSON)
}

// seedFix is verify's advice for fastapi 0.142.4 installed, and
// seedNamed the gateway's diagnosis of copies under its scope.
const (
	seedFix   = "upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment"
	seedNamed = "copies from fastapi 0.142.4" + releaseKnown + seedFix
)

// checkSeedNamed: the gateway names the release (case 4). FastAPI 0.142.4
// records its spans and its validation event under scope fastapi 0.142.4:
// the status page's rows of its service name the release with verify's
// advice (every span copy under that scope; the log copies are mostly the
// app's records, FastAPI's event one of them), and so do the warning for
// its spans and the summary line. 0.143.5 with auto-configure exports
// twice too, but it is no release known to: its rows keep the guess from
// the copies' shape; 0.143.5 by default sends no copies.
func checkSeedNamed(t *testing.T, r *seedRun, statusJSON string) {
	t.Helper()
	var st struct {
		Services []struct {
			Service       string `json:"service"`
			Signal        string `json:"signal"`
			Received      int64  `json:"received"`
			Copies        int64  `json:"copies"`
			Diagnosis     string `json:"diagnosis"`
			Release       string `json:"release"`
			ReleaseCopies int64  `json:"release_copies"`
			Fix           string `json:"fix"`
		} `json:"services"`
		Streams []struct {
			Service   string `json:"service"`
			Metric    string `json:"metric"`
			Class     string `json:"class"`
			Release   string `json:"release"`
			Diagnosis string `json:"diagnosis"`
		} `json:"streams"`
	}
	if err := json.Unmarshal([]byte(statusJSON), &st); err != nil {
		t.Fatalf("status.json: %v\n%s", err, statusJSON)
	}
	seen := map[string]bool{}
	for _, row := range st.Services {
		t.Logf("status page: %s %s: %d received, %d copies (%d under %q): %s", row.Service, row.Signal, row.Received, row.Copies, row.ReleaseCopies, row.Release, row.Diagnosis)
		seen[row.Service+"/"+row.Signal] = true
		switch row.Service {
		case "seed-fastapi-0.142":
			ok := row.Copies > 0 && row.Release == "fastapi 0.142.4" && row.Fix == seedFix && row.Diagnosis == seedNamed && row.ReleaseCopies > 0
			if row.Signal == "traces" {
				ok = ok && row.ReleaseCopies == row.Copies // every span is FastAPI's
			} else {
				ok = ok && row.ReleaseCopies == 1 // fastapi.validation.failed
			}
			if !ok {
				t.Errorf("status page, %s %s: %+v; want the release named with verify's advice", row.Service, row.Signal, row)
			}
		case "seed-fastapi-0.143-auto":
			if row.Copies == 0 || row.Release != "" || row.Fix != "" || strings.Contains(row.Diagnosis, "fastapi") {
				t.Errorf("status page, %s %s: %+v; want copies without a release named", row.Service, row.Signal, row)
			}
		case "seed-fastapi-0.143":
			if row.Copies != 0 || row.Release != "" {
				t.Errorf("status page, %s %s: %+v; want no copies", row.Service, row.Signal, row)
			}
		}
	}
	// Metric streams whose second writer is a copy: FastAPI 0.142's
	// reader sends the app's meters beside FastAPI's own (scope fastapi
	// 0.142.4), so the release is named from the scopes of its requests.
	for _, row := range st.Streams {
		if row.Class != "copy" {
			continue
		}
		t.Logf("status page: stream %s %s: a copy, release %q: %s", row.Service, row.Metric, row.Release, row.Diagnosis)
		switch row.Service {
		case "seed-fastapi-0.142":
			if row.Release != "fastapi 0.142.4" || row.Diagnosis != seedNamed {
				t.Errorf("status page, stream %s %s: %+v; want the release named with verify's advice", row.Service, row.Metric, row)
			}
		default:
			if row.Release != "" || strings.Contains(row.Diagnosis, "fastapi") {
				t.Errorf("status page, stream %s %s: %+v; want no release named", row.Service, row.Metric, row)
			}
		}
	}
	for _, k := range []string{"seed-fastapi-0.142/traces", "seed-fastapi-0.142/logs", "seed-fastapi-0.143-auto/traces"} {
		if !seen[k] {
			t.Errorf("status page: no row %s", k)
		}
	}
	// The warning for the spans (the first copies are FastAPI's) and a
	// summary line name it too.
	var warned, summed bool
	for _, line := range strings.Split(r.g.stderr.String(), "\n") {
		switch {
		case strings.Contains(line, "duplicate spans received") && strings.Contains(line, "seed-fastapi-0.142\""):
			warned = strings.Contains(line, "fastapi 0.142.4") && strings.Contains(line, seedNamed)
			t.Logf("warning: %s", line)
		case strings.Contains(line, "dedup summary") && strings.Contains(line, "release_suggests"):
			if !summed {
				t.Logf("summary: %s", line)
			}
			summed = summed || strings.Contains(line, seedNamed)
		}
	}
	if !warned || !summed {
		t.Errorf("the release named in the spans' warning %v, in a summary line %v; want both", warned, summed)
	}
	if t.Failed() {
		t.Logf("status.json: %s", statusJSON)
	}
}

// runSeed runs the seed cases' apps at once against one gateway and
// Prometheus, stops them and the gateway, and returns the truth per case
// and the status page as it was at the end.
func runSeed(t *testing.T, venvs map[string]string) (*seedRun, []map[string]*seedTruth, string) {
	t.Helper()
	r := startSeedRun(t)
	truths := make([]map[string]*seedTruth, len(seedCases))
	errs := make([]error, len(seedCases))
	var wg sync.WaitGroup
	var servers []*pyServer
	for i, c := range seedCases {
		addr := freePort(t)
		_, port, _ := net.SplitHostPort(addr)
		env := pyEnv(venvs[c.venv], append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.httpAddr, "SEED_SERVICE=seed-" + c.name, seedInterval}, c.env...)...)
		s := startPyServer(t, "uvicorn "+c.name, addr, env,
			filepath.Join(venvs[c.venv], "bin", "python"), "-m", "uvicorn", "seed_app:app", "--host", "127.0.0.1", "--port", port, "--no-access-log")
		servers = append(servers, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			truths[i], errs[i] = seedWorkload(s, seedRequests)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	stopAll(t, servers)
	statusJSON := r.statusJSON()
	r.g.stop(t) // flushes the files and the remote-write queue
	return r, truths, statusJSON
}

// exportedBeforeServing reports whether service's app exported its
// counter before any request: its first stored value (without dedup) is
// the pre-start value alone.
func exportedBeforeServing(t *testing.T, r *seedRun, service string) bool {
	t.Helper()
	for _, s := range r.prom.storedIn(t, seedCounter, service, "plain") {
		if s.values[0] == seedPrestart {
			return true
		}
	}
	return false
}

// checkSeed asserts what one app left in the files and in Prometheus.
func checkSeed(t *testing.T, r *seedRun, c seedCase, service string, truth *seedTruth) {
	t.Helper()
	copies := 1
	if c.doubled {
		copies = 2
	}
	tp := readSeedTraces(t, filepath.Join(r.dir, "traces-plain.jsonl"), service)
	td := readSeedTraces(t, filepath.Join(r.dir, "traces-dedup.jsonl"), service)
	t.Logf("spans: without dedup %d stored (%d distinct), with dedup %d stored (%d distinct); distinct per name %v", tp.total, tp.unique, td.total, td.unique, td.names)
	if tp.unique == 0 || tp.total != copies*tp.unique {
		t.Errorf("without dedup: %d spans stored, %d distinct; want %d copies of each", tp.total, tp.unique, copies)
	}
	if td.total != tp.unique || td.unique != tp.unique {
		t.Errorf("with dedup: %d spans stored, %d distinct; want each of %d once", td.total, td.unique, tp.unique)
	}
	if n := td.names[seedItemSpan]; n != truth.served+truth.invalid {
		t.Errorf("with dedup: %d distinct %q spans, want %d (one per request)", n, seedItemSpan, truth.served+truth.invalid)
	}

	lp := readSeedLogs(t, filepath.Join(r.dir, "logs-plain.jsonl"), service)
	ld := readSeedLogs(t, filepath.Join(r.dir, "logs-dedup.jsonl"), service)
	t.Logf("log records: without dedup %d stored (%d distinct), with dedup %d stored (%d distinct); distinct per event/body %v", lp.total, lp.unique, ld.total, ld.unique, ld.names)
	if lp.unique == 0 || lp.total != copies*lp.unique {
		t.Errorf("without dedup: %d log records stored, %d distinct; want %d copies of each", lp.total, lp.unique, copies)
	}
	if ld.total != lp.unique || ld.unique != lp.unique {
		t.Errorf("with dedup: %d log records stored, %d distinct; want each of %d once", ld.total, ld.unique, lp.unique)
	}
	if n := ld.names[seedValidationEv]; n != truth.invalid {
		t.Errorf("with dedup: %d %s events, want %d", n, seedValidationEv, truth.invalid)
	}
	served := 0
	for name, n := range ld.names {
		if strings.HasPrefix(name, "item ") && strings.HasSuffix(name, " served") {
			served += n
		}
	}
	if served != truth.served {
		t.Errorf("with dedup: %d app log records, want %d", served, truth.served)
	}

	early := c.doubled && exportedBeforeServing(t, r, service)
	if early {
		// The interleaving that made one reset before held restarts
		// (docs/metrics.md, "Restarts"): held now, no reset.
		t.Logf("the app's reader exported before its first request: FastAPI's reader's first point looked like a restart (held)")
	}
	// Metrics: the app's counter and histogram (the pre-startup value makes
	// the second reader's cumulative values lower: resets without dedup),
	// and FastAPI's own request-duration histogram (both readers start
	// at startup: the same values twice).
	for _, m := range []struct {
		name string
		want float64
	}{{seedCounter, float64(truth.jobs)}, {seedHistCount, float64(truth.samples)}, {seedHistSum, truth.histSum}} {
		plain := r.prom.storedIn(t, m.name, service, "plain")
		dedup := r.prom.storedIn(t, m.name, service, "dedup")
		pTotal, pResets := countedAll(plain)
		dTotal, dResets := countedAll(dedup)
		pInc := r.prom.increase(t, m.name, service, "plain")
		dInc := r.prom.increase(t, m.name, service, "dedup")
		t.Logf("%s (truth %v): without dedup %d series, %d samples, %d resets, counted %v, increase() %.4g; with dedup %d series, %d samples, %d resets, counted %v, increase() %.4g",
			m.name, m.want, len(plain), samples(plain), pResets, pTotal, pInc, len(dedup), samples(dedup), dResets, dTotal, dInc)
		if len(dedup) != 1 {
			t.Errorf("%s with dedup: %d series, want 1", m.name, len(dedup))
			continue
		}
		t.Logf("%s samples: without dedup %v; with dedup %v", m.name, plain[0].values, dedup[0].values)
		if len(dedup) != 1 {
			continue
		}
		if dedup[0].last() != m.want {
			t.Errorf("%s with dedup: ends at %v, want %v", m.name, dedup[0].last(), m.want)
		}
		if pr := r.prom.promResetsIn(t, m.name, service, "dedup"); dResets != 0 || dTotal != m.want || pr != 0 {
			t.Errorf("%s with dedup: counted %v with %d resets (Prometheus' resets() %v); want %v with 0 (the app exported before it served: %v)", m.name, dTotal, dResets, pr, m.want, early)
		}
		if c.doubled && m.name == seedCounter && pResets == 0 {
			t.Errorf("%s without dedup: no resets; the second reader's lower values must show as resets (the failure this test must see)", m.name)
		}
		if !c.doubled && (pResets != 0 || pTotal != m.want) {
			t.Errorf("%s without dedup, one exporter: counted %v with %d resets, want %v with 0", m.name, pTotal, pResets, m.want)
		}
	}
	fp := r.prom.storedIn(t, fastapiDurCount, service, "plain")
	fd := r.prom.storedIn(t, fastapiDurCount, service, "dedup")
	fpTotal, fpResets := countedAll(fp)
	fdTotal, fdResets := countedAll(fd)
	t.Logf("%s (FastAPI's own; truth %d requests besides readiness probes): without dedup %d series, %d samples, %d resets, counted %v; with dedup %d series, %d samples, %d resets, counted %v",
		fastapiDurCount, truth.served+truth.invalid, len(fp), samples(fp), fpResets, fpTotal, len(fd), samples(fd), fdResets, fdTotal)
	if len(fd) == 0 || fdResets != 0 || len(fd) != len(fp) {
		t.Errorf("%s with dedup: %d series (%d without), %d resets; want one per route and status, 0 resets", fastapiDurCount, len(fd), len(fp), fdResets)
	}
	var items float64
	for _, s := range fd {
		if string(s.labels["http_route"]) == "/items/{item_id}" {
			items += s.last()
		}
	}
	if items != float64(truth.served+truth.invalid) {
		t.Errorf("%s with dedup: %v requests to /items/{item_id}, want %d", fastapiDurCount, items, truth.served+truth.invalid)
	}
}

// storedIn is stored for one pipeline's series.
func (p *prometheus) storedIn(t *testing.T, metric, service, pipeline string) []storedSeries {
	t.Helper()
	var out []storedSeries
	for _, s := range p.stored(t, metric, service) {
		if string(s.labels["pipeline"]) == pipeline {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].labels.String() < out[j].labels.String() })
	return out
}

// promResetsIn is Prometheus' resets() over one pipeline's series.
func (p *prometheus) promResetsIn(t *testing.T, metric, service, pipeline string) float64 {
	t.Helper()
	v, _ := p.scalar(t, fmt.Sprintf(`sum(resets(%s{job=%q,pipeline=%q}[1h]))`, metric, service, pipeline))
	return v
}

// increase is Prometheus' own increase() over the run (extrapolated to the
// range's edges, as a dashboard shows it), summed over one pipeline's
// series.
func (p *prometheus) increase(t *testing.T, metric, service, pipeline string) float64 {
	t.Helper()
	v, _ := p.scalar(t, fmt.Sprintf(`sum(increase(%s{job=%q,pipeline=%q}[1h]))`, metric, service, pipeline))
	return v
}

// countedAll is counted summed over series.
func countedAll(ss []storedSeries) (total float64, resets int) {
	for _, s := range ss {
		n, r := s.counted()
		total += n
		resets += r
	}
	return total, resets
}

func samples(ss []storedSeries) int {
	n := 0
	for _, s := range ss {
		n += len(s.values)
	}
	return n
}

// seedFinding is the line verify prints for the seed's environment
// (its wording is the hazard database's and scan's).
func seedFinding(venv string) string {
	return "fastapi 0.142.4 is installed in " + venv + releaseKnown +
		"upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment"
}

// TestFastAPIVerify: `verify -- uvicorn ...` and `verify -- pytest ...`
// (FastAPI's TestClient, test/python/test_seed_app.py) on the seed app,
// from a working directory of their own: with FastAPI 0.142.4 exit 1 and
// the finding names the installed release and the fix; with 0.143.5 (its
// default) exit 0.
func TestFastAPIVerify(t *testing.T) {
	for _, c := range []struct {
		venv    string
		doubled bool
	}{{"fastapi-0.142", true}, {"fastapi-0.143", false}} {
		venv := pyVenv(t, c.venv)
		t.Run(c.venv, func(t *testing.T) {
			t.Run("uvicorn", func(t *testing.T) {
				t.Parallel()
				addr := freePort(t)
				_, port, _ := net.SplitHostPort(addr)
				const requests = 6
				// uvicorn exits (normally, running every exit handler)
				// after --limit-max-requests: the readiness probe, the
				// requests and the one that fails validation.
				done := make(chan verifyRun, 1)
				go func() {
					done <- runVerify(t, t.TempDir(), pyEnv(venv, "SEED_SERVICE=verify-uvicorn"), "--format", "json", "--grace", "1s", "--",
						"uvicorn", "seed_app:app", "--app-dir", pyDir(), "--host", "127.0.0.1", "--port", port,
						"--no-access-log", "--limit-max-requests", strconv.Itoa(requests+2))
				}()
				s := &pyServer{name: "uvicorn", addr: addr}
				var r verifyRun
				waitFor(t, 90*time.Second, "uvicorn under verify to serve", func() bool {
					select {
					case r = <-done:
						t.Fatalf("verify ended before uvicorn served:\n%s", r)
					default:
					}
					code, _, err := s.get("/openapi.json")
					return err == nil && code == 200
				})
				if _, err := seedWorkloadN(s, requests); err != nil {
					t.Fatal(err)
				}
				r = <-done
				checkSeedVerify(t, r, venv, c.doubled)
			})
			t.Run("pytest", func(t *testing.T) {
				t.Parallel()
				r := runVerify(t, t.TempDir(), pyEnv(venv, "SEED_SERVICE=verify-pytest"), "--format", "json", "--grace", "1s", "--",
					"pytest", "-q", "-p", "no:cacheprovider", filepath.Join(pyDir(), "test_seed_app.py"))
				checkSeedVerify(t, r, venv, c.doubled)
			})
		})
	}
}

// seedWorkloadN is seedWorkload without the pace: requests GET /items/N
// and one GET /items/abc, as fast as they are answered.
func seedWorkloadN(s *pyServer, requests int) (*seedTruth, error) {
	truth := &seedTruth{jobs: seedPrestart, samples: 1, histSum: seedPrestart}
	for i := 1; i <= requests; i++ {
		if code, body, err := s.get("/items/" + strconv.Itoa(i)); err != nil || code != 200 {
			return nil, fmt.Errorf("GET /items/%d: %d %s: %w", i, code, body, err)
		}
		truth.jobs++
		truth.samples++
		truth.histSum += float64(i)
		truth.served++
	}
	if code, body, err := s.get("/items/abc"); err != nil || code != 422 {
		return nil, fmt.Errorf("GET /items/abc: %d %s, want 422: %w", code, body, err)
	}
	truth.invalid++
	return truth, nil
}

// checkSeedVerify asserts verify's verdict on the seed app.
func checkSeedVerify(t *testing.T, r verifyRun, venv string, doubled bool) {
	t.Helper()
	var v releaseReport
	if err := json.Unmarshal([]byte(r.report), &v); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, r)
	}
	var vj verifyJSON
	_ = json.Unmarshal([]byte(r.report), &vj)
	var diag []string
	for _, f := range v.Findings {
		diag = append(diag, f.Signal+": "+f.Diagnosis)
	}
	t.Logf("exit %d, verdict %s; spans %d received (%d unique), log records %d received (%d extra), metric points %d (%d extra); findings %v",
		r.code, v.Verdict, vj.Spans.Received, vj.Spans.Unique, vj.Logs.Received, vj.Logs.ExtraCopies, vj.Metrics.Points, vj.Metrics.ExtraPoints, diag)
	if !doubled {
		if r.code != 0 || v.Verdict != "clean" || v.ReleaseScan != nil || vj.Spans.Received == 0 {
			t.Errorf("want exit 0, verdict clean, spans received and nothing scanned:\n%s", r)
		}
		return
	}
	if r.code != 1 || v.Verdict != "duplicates" {
		t.Fatalf("want exit 1, verdict duplicates:\n%s", r)
	}
	signals := map[string]string{}
	for _, f := range v.Findings {
		signals[f.Signal] = f.Diagnosis
	}
	for _, sig := range []string{"spans", "metrics", "logs"} {
		if signals[sig] != "two-exporters" {
			t.Errorf("%s diagnosed %q, want two-exporters:\n%s", sig, signals[sig], r)
		}
	}
	if v.ReleaseScan == nil || !slices.Contains(v.ReleaseScan.Lines, seedFinding(venv)) {
		t.Errorf("the release scan does not name %q:\n%s", seedFinding(venv), r)
	}
}

// scanFinding is the part of scan's JSON report these tests read.
type scanFinding struct {
	Kind    string  `json:"kind"`
	Path    string  `json:"path"`
	Version *string `json:"version"`
	Fix     string  `json:"fix"`
}

// runScan runs `doubletake scan --format json` on paths from dir and
// returns its exit code and findings.
func runScan(t *testing.T, dir string, paths ...string) (int, []scanFinding) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"scan", "--format", "json"}, paths...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Findings []scanFinding `json:"findings"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("scan %v: %v\n%s", paths, err, out)
	}
	return code, rep.Findings
}

// seedPyproject is a project that depends on what the seed's requirements
// file pins at the top, with fastapiSpec.
func seedPyproject(fastapiSpec string) string {
	return `[project]
name = "seed"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["fastapi[opentelemetry]` + fastapiSpec + `", "uvicorn==0.55.0"]
`
}

// lock runs a locker of the lockers' virtualenv in dir.
func lock(t *testing.T, lockers, dir string, argv ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(lockers, "bin", argv[0]), argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(pyEnv(lockers), "POETRY_VIRTUALENVS_CREATE=false")
	out, err := cmd.CombinedOutput()
	requireDep(t, err, fmt.Sprintf("%s (resolving the seed's requirements from the package index)\n%s", strings.Join(argv, " "), out))
}

// TestFastAPIScan: scan on what the real tools wrote. The virtualenv pip
// built from requirements-fastapi-0.142.txt has fastapi 0.142.4 installed;
// uv lock and poetry lock (run here, into temporary directories: their
// lockfiles name the index) lock it for a project that pins it; the same
// project with the seed's fix, fastapi!=0.142.*, resolves to a later
// release, and scan finds nothing there, nor in the 0.143.5 virtualenv.
func TestFastAPIScan(t *testing.T) {
	v142, v143 := pyVenv(t, "fastapi-0.142"), pyVenv(t, "fastapi-0.143")
	lockers := pyVenv(t, "lockers")
	t.Run("venv", func(t *testing.T) {
		code, fs := runScan(t, t.TempDir(), v142)
		t.Logf("scan %s: exit %d, %+v", filepath.Base(v142), code, fs)
		if code != 1 || len(fs) != 1 || fs[0].Kind != "installed" || fs[0].Version == nil || *fs[0].Version != "0.142.4" ||
			fs[0].Fix != "upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment" {
			t.Errorf("scan of the 0.142 virtualenv: exit %d, %+v; want exit 1 and fastapi 0.142.4 installed", code, fs)
		}
		if code, fs := runScan(t, t.TempDir(), v143); code != 0 || len(fs) != 0 {
			t.Errorf("scan of the 0.143 virtualenv: exit %d, %+v; want exit 0, nothing", code, fs)
		}
	})
	for _, c := range []struct {
		name, lockfile, fix string
		argv                []string
	}{
		{"uv", "uv.lock", `add "fastapi!=0.142.*" to the project's dependencies (or [tool.uv] constraint-dependencies), run uv lock --upgrade-package fastapi, then uv sync`, []string{"uv", "lock", "--quiet"}},
		{"poetry", "poetry.lock", `add "!=0.142.*" to fastapi's constraint in pyproject.toml, then run poetry update fastapi`, []string{"poetry", "lock", "--no-interaction"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"pyproject.toml": seedPyproject("==0.142.4")})
			lock(t, lockers, dir, c.argv...)
			code, fs := runScan(t, dir, ".")
			t.Logf("scan of a %s project pinning fastapi==0.142.4: exit %d, %+v", c.lockfile, code, fs)
			locked := false
			for _, f := range fs {
				if f.Kind == "locked" && f.Path == c.lockfile && f.Version != nil && *f.Version == "0.142.4" && f.Fix == c.fix {
					locked = true
				}
			}
			if code != 1 || !locked {
				t.Errorf("want exit 1 and fastapi 0.142.4 locked in %s with the fix %q", c.lockfile, c.fix)
			}
		})
	}
	t.Run("fix", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"pyproject.toml": seedPyproject("!=0.142.*")})
		code, fs := runScan(t, dir, ".")
		if code != 0 || len(fs) != 0 {
			t.Errorf("scan of the seed's fix before locking: exit %d, %+v; want exit 0, nothing", code, fs)
		}
		lock(t, lockers, dir, "uv", "lock", "--quiet")
		b, err := os.ReadFile(filepath.Join(dir, "uv.lock"))
		if err != nil {
			t.Fatal(err)
		}
		version := ""
		if i := strings.Index(string(b), "name = \"fastapi\"\nversion = \""); i >= 0 {
			rest := string(b)[i+len("name = \"fastapi\"\nversion = \""):]
			version = rest[:strings.IndexByte(rest, '"')]
		}
		code, fs = runScan(t, dir, ".")
		t.Logf("the seed's fix, fastapi!=0.142.*, locked by uv: fastapi %s; scan exit %d, %+v", version, code, fs)
		if version == "" || strings.HasPrefix(version, "0.142.") || code != 0 || len(fs) != 0 {
			t.Errorf("the fix locked fastapi %q, scan exit %d, %+v; want a release past 0.142, exit 0, nothing", version, code, fs)
		}
	})
}
