package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

// Short-lived processes sharing one resource identity (jobs, test runs,
// autoscaled workers) with cumulative temporality, exporting every second,
// through the default config into Prometheus: where the quiet rule can
// decide them (a process that ended while the elected writer goes on is
// a peer), every event is counted; where it cannot (every process ends
// together), what the gateway did not decide is reported, not lost
// silently (docs/metrics.md, "The quiet rule").

// quietInterval is the export interval of these cases: 1 s, as the
// issue's runs used (the SDKs' default, 60 s, would make them minutes
// long).
const quietInterval = time.Second

const (
	// quietShortEvents: the short-lived processes live 3 s.
	quietShortEvents = 30
	// quietShortAt: when they start, after the long-lived one.
	quietShortAt = 2 * time.Second
	// quietLongEvents: the long-lived process lives 12 s, 7 s after the
	// short ones end: the quiet rule waits 3 of their intervals after
	// their last point, then decides at the elected writer's next point.
	quietLongEvents = 120
	// togetherEvents: the processes that end together live 3.5 s.
	togetherEvents = 35
	// quietSpacing is how far apart the processes of one case start: one
	// beat of the workload (peersEvery), so that they count alike, far
	// enough apart that the gateway does not pool two of them as one
	// writer (starts within streams.PoolWindow, 10 ms, of one writer's,
	// whose windows reach up to 20 ms) when the machine delays one by
	// tens of milliseconds: otelcol_processor_dedup_writers then counts
	// one writer per process. At 50 ms, 3 of 10 JS runs had to be run
	// again.
	quietSpacing = peersEvery
)

// runQuietWorker runs one process of sdk ("js" or "go") recording events
// from startAt, one every peersEvery, exporting every quietInterval.
func runQuietWorker(t *testing.T, sdk, grpcAddr, service string, events int, startAt time.Time) workerResult {
	if sdk == "js" {
		// The JS client waits for startAt itself, once loaded.
		return runJSWorkerEvery(t, grpcAddr, "metrics-single", service, events, "0", quietInterval, startAt)
	}
	// The Go client starts its workload as it starts: it is started on
	// the schedule.
	time.Sleep(time.Until(startAt))
	return runGoWorkerEvery(t, grpcAddr, "metrics-single", service, events, "0", quietInterval)
}

// quietSchedule is one process of a case: its events and when it starts.
type quietSchedule struct {
	events int
	at     time.Duration // after the case's start
}

// runQuietWorkers runs the processes of one case at once, each on its
// schedule, and returns their results.
func runQuietWorkers(t *testing.T, sdk, grpcAddr, service string, sched []quietSchedule) []workerResult {
	t.Helper()
	results := make([]workerResult, len(sched))
	// Time for the JS processes to load; each process quietSpacing after
	// the one before it.
	t0 := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for i, s := range sched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runQuietWorker(t, sdk, grpcAddr, service, s.events, t0.Add(s.at+time.Duration(i)*quietSpacing))
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, w := range results {
		if w.events != sched[i].events || w.firstCounter != int64(sched[i].events) {
			t.Fatalf("process %d recorded %d events and exported %d last, want %d", i, w.events, w.firstCounter, sched[i].events)
		}
	}
	return results
}

// pooledStarts names two processes whose starts of one instrument are
// close enough for the gateway to pool them as one writer (within two
// streams.PoolWindow: a writer's window reaches that far), or "". Such
// processes are counted as one writer in otelcol_processor_dedup_writers
// (harmless among peers: their series are kept all the same), so the
// counts of writers these tests assert on are not one per process.
func pooledStarts(ws []workerResult) string {
	for k, name := range []string{"counter", "histogram"} {
		for i := range ws {
			for j := range i {
				a, errA := strconv.ParseInt(ws[i].starts[k], 10, 64)
				b, errB := strconv.ParseInt(ws[j].starts[k], 10, 64)
				if errA == nil && errB == nil && max(a-b, b-a) < int64(2*streams.PoolWindow) {
					return fmt.Sprintf("%s %d and %d", name, b, a)
				}
			}
		}
	}
	return ""
}

// notDistinct names why two processes of ws are not distinct writers to
// the gateway (one start in milliseconds, or pooled), or "".
func notDistinct(ws []workerResult) string {
	if same := sharedStarts(ws); same != "" {
		return "two processes' streams started in one millisecond (" + same + ")"
	}
	if pooled := pooledStarts(ws); pooled != "" {
		return "two processes' starts within the gateway's pooling window (" + pooled + ")"
	}
	return ""
}

// gatewayWriters is what the gateway says of the second writers it
// judged: otelcol_processor_dedup_writers by class (a writer counted once
// over its streams of one resource and scope: one per process here),
// otelcol_processor_dedup_held_points by outcome, and the status page's
// count of writers decided by the quiet rule.
type gatewayWriters struct {
	writers    map[string]int
	held       map[string]int
	quietPeers uint64
}

var heldRE = regexp.MustCompile(`(?m)^otelcol_processor_dedup_held_points\{[^}]*outcome="(\w+)"[^}]*\} (\d+)$`)

func (r *peersRun) writersNow(t *testing.T) gatewayWriters {
	t.Helper()
	g := gatewayWriters{writers: map[string]int{}, held: map[string]int{}}
	code, body := scrape(t, "http://"+r.tel+"/metrics")
	if code != 200 {
		t.Fatalf("the gateway's metrics: HTTP %d", code)
	}
	for _, m := range writersRE.FindAllStringSubmatch(body, -1) {
		g.writers[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, m := range heldRE.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		g.held[m[1]] += n
	}
	var st struct {
		WriterRules *struct {
			QuietPeers uint64 `json:"quiet_peers"`
		} `json:"writer_rules"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+r.status+"/status.json")), &st); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	if st.WriterRules != nil {
		g.quietPeers = st.WriterRules.QuietPeers
	}
	t.Logf("gateway: writers %v, held points %v, quiet peers %d", g.writers, g.held, g.quietPeers)
	return g
}

// TestDefaultQuietPeers: one process lives 12 s; 2 s after it starts, 3
// more sharing its resource identity (no service.instance.id) live 3 s,
// each recording one event every 100 ms, as the long-lived one does. The
// short ones are peers, decided by their values or, when those cannot
// tell them from copies, by the quiet rule once they have ended while the
// long-lived process goes on: Prometheus holds one series per process,
// the sum over them is every event recorded, and nothing resets.
func TestDefaultQuietPeers(t *testing.T) {
	jsClient(t)
	goClient(t)
	sched := []quietSchedule{{quietLongEvents, 0}}
	for range 3 {
		sched = append(sched, quietSchedule{quietShortEvents, quietShortAt})
	}
	for _, sdk := range []string{"js", "go"} {
		t.Run(sdk, func(t *testing.T) {
			const service = "quiet-peers-svc"
			r, ws := runDistinctWorkers(t, sdk, service, sched)
			g := r.writersNow(t)
			checkQuietDecided(t, g, r.finish(t))
			checkPeerSeries(t, r, service, ws)
		})
	}
}

// runDistinctWorkers starts a gateway and runs sched's processes of sdk
// into it, again (at most three runs in all) when two of them were not
// distinct writers: as in TestDefaultSharedIdentity, two JS processes
// whose streams started in one millisecond are one writer, and two
// processes the gateway pools are counted as one.
func runDistinctWorkers(t *testing.T, sdk, service string, sched []quietSchedule) (*peersRun, []workerResult) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r := startPeersRun(t)
		ws := runQuietWorkers(t, sdk, r.grpcAddr, service, sched)
		why := notDistinct(ws)
		if why == "" {
			return r, ws
		}
		if attempt == 3 {
			t.Fatalf("three runs with processes that are not distinct writers: %s", why)
		}
		t.Logf("%s: not distinct writers, running again", why)
		r.finish(t)
	}
}

// checkQuietDecided asserts that each short-lived process was decided a
// peer, by its values or by the quiet rule, and none a copy. A writer
// decided by its values is counted a peer in
// otelcol_processor_dedup_writers; the quiet rule decides each of a
// writer's pairs on its own (a writer may stop writing one stream and not
// another) and leaves the writer's count undecided: so each writer counted
// undecided must have been decided a peer by the quiet rule on both its
// streams (the counter and the histogram), its held points released.
func checkQuietDecided(t *testing.T, g gatewayWriters, ds []decision) {
	t.Helper()
	const short, streams = 3, 2
	if g.writers["copy"] != 0 || g.writers["peer"]+g.writers["undecided"] != short {
		t.Errorf("writers by class %v, want the %d short-lived processes, none a copy", g.writers, short)
	}
	if want := uint64(streams * g.writers["undecided"]); g.quietPeers != want {
		t.Errorf("%d pairs decided by the quiet rule, want %d: both streams of each of the %d writers not decided by their values", g.quietPeers, want, g.writers["undecided"])
	}
	if g.quietPeers > 0 && g.held["released"] == 0 {
		t.Errorf("%d pairs decided peers by the quiet rule, and no held point released", g.quietPeers)
	}
	if g.held["expired"] != 0 || g.held["refused"] != 0 {
		t.Errorf("held points %v, want none expired or refused", g.held)
	}
	for _, d := range ds {
		if d.class == "copy" {
			t.Errorf("%s: a second writer judged a copy (%s)", d.metric, d.evidence)
		}
	}
}

// TestDefaultPeersEndTogether: 4 processes sharing one resource identity
// each record one event every 100 ms for 3.5 s and end together (the
// issue's row: 51 of 60 counted in a run of JS processes). A writer
// still undecided when every process has stopped has nothing left to
// decide it: the quiet rule waits for the elected writer to go on, which
// it does not (a second reader of one process ends with it too). Such a
// writer is not lost silently: the gateway counts it undecided
// (otelcol_processor_dedup_writers{class="undecided"}), and its counts
// are exactly what Prometheus lacks (its held points expire after
// max_stale; a gateway stopped before that drops them at shutdown,
// counted expired and warned about). So the
// series stored, one per process decided (or elected), each ending at its
// process's count, plus the undecided writers' counts, are every event
// recorded; and no stored series resets.
func TestDefaultPeersEndTogether(t *testing.T) {
	jsClient(t)
	goClient(t)
	sched := make([]quietSchedule, 4)
	for i := range sched {
		sched[i] = quietSchedule{togetherEvents, 0}
	}
	for _, sdk := range []string{"js", "go"} {
		t.Run(sdk, func(t *testing.T) {
			const service = "together-svc"
			r, ws := runDistinctWorkers(t, sdk, service, sched)
			g := r.writersNow(t)
			r.finish(t)
			checkEndTogether(t, r, service, ws, g)
		})
	}
}

// checkEndTogether asserts that the stored series and the writers the
// gateway reports undecided account for every event: every process
// recorded togetherEvents.
func checkEndTogether(t *testing.T, r *peersRun, service string, ws []workerResult, g gatewayWriters) {
	t.Helper()
	truth := len(ws) * togetherEvents
	undecided := g.writers["undecided"]
	if got := g.writers["undecided"] + g.writers["copy"] + g.writers["peer"]; got != len(ws)-1 {
		t.Errorf("%d second writers judged (%v), want %d: every process but the elected one", got, g.writers, len(ws)-1)
	}
	if g.writers["copy"] != 0 {
		t.Errorf("%d processes judged copies", g.writers["copy"])
	}
	for _, metric := range []string{peersCounter, peersCount} {
		ss := r.prom.stored(t, metric, service)
		sum, resets := 0.0, 0
		var lasts []float64
		for _, s := range ss {
			total, n := s.counted()
			sum += total
			resets += n
			lasts = append(lasts, s.last())
		}
		t.Logf("%s: %d series ending at %v, counted %v, %d resets; %d writers undecided (truth %d events, %d processes)",
			metric, len(ss), lasts, sum, resets, undecided, truth, len(ws))
		if len(ss) != len(ws)-undecided || resets != 0 {
			t.Errorf("%s: %d series with %d resets, want %d (a process each, but the %d undecided) with 0", metric, len(ss), resets, len(ws)-undecided, undecided)
		}
		for _, v := range lasts {
			if v != togetherEvents {
				t.Errorf("%s: a series ends at %v, want a process's %d", metric, v, togetherEvents)
			}
		}
		if sum+float64(undecided*togetherEvents) != float64(truth) {
			t.Errorf("%s: %v counted and %d undecided writers of %d events each, want %d in all", metric, sum, undecided, togetherEvents, truth)
		}
	}
	if undecided > 0 {
		t.Logf("not the truth, and reported: %d of %d processes undecided at their end (%d of %d events not stored)", undecided, len(ws), undecided*togetherEvents, truth)
	}
}
