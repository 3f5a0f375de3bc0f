package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDefaultSharedStart: 4 Go SDK processes share one identity and one
// start time (every cumulative point carries the same start, as a pre-fork
// server's workers whose SDK was set up before the fork), through the
// default config into Prometheus. Each counts its own events at its own
// rate (one every 60, 80, 110 and 150 ms, for about 12 s) and exports
// every 500 ms on its own timer and its own gRPC connection, the processes
// started 130 ms apart; each idles one interval before it exits, so that
// its last counts travel on its timer. The gateway splits the stream by
// the connections (docs/metrics.md, "Writers that share a start"), so
// that a final flush off its writer's timer, or an export a busy timer
// moved onto another writer's phase, goes to its own writer's series:
// Prometheus' sum over the 4 series equals the events recorded, and the
// status page names the split. (By export phase alone, before the
// connections were used, 3 runs in 5 gave the truth and the others were
// reported.)
func TestDefaultSharedStart(t *testing.T) {
	client := goClient(t)
	r := startPeersRun(t)
	const service = "shared-start-svc"
	start := time.Now().UnixNano()
	everies := []time.Duration{60 * time.Millisecond, 80 * time.Millisecond, 110 * time.Millisecond, 150 * time.Millisecond}
	events := make([]int, len(everies))
	var wg sync.WaitGroup
	for i, every := range everies {
		wg.Add(1)
		// The processes start 130 ms apart (their timers' phases), on a
		// schedule, not to wait for anything.
		time.AfterFunc(time.Duration(i)*130*time.Millisecond, func() {
			defer wg.Done()
			n := int(12 * time.Second / every)
			cmd := exec.Command(client, "-mode", "metrics-single", "-service", service, "-rollouts", strconv.Itoa(n),
				"-every", every.String(), "-interval", peersInterval.String(), "-pin-start", strconv.FormatInt(start, 10),
				"-linger", (2 * peersInterval).String())
			cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+r.grpcAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
			var out struct {
				Rollouts     int   `json:"rollouts"`
				FirstCounter int64 `json:"first_counter"`
			}
			runClientLine(t, cmd, &out)
			if out.Rollouts != n || out.FirstCounter != int64(n) {
				t.Errorf("process %d recorded %d events and exported %d last, want %d", i, out.Rollouts, out.FirstCounter, n)
			}
			events[i] = out.Rollouts
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	truth := 0
	for _, n := range events {
		truth += n
	}
	var st struct {
		Streams []struct {
			Metric   string `json:"metric"`
			Class    string `json:"class"`
			Evidence string `json:"evidence"`
		} `json:"streams"`
		WriterRules *struct {
			Split   int `json:"shared_start_split"`
			Unsplit int `json:"shared_start_unsplit"`
		} `json:"writer_rules"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+r.status+"/status.json")), &st); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	r.finish(t)
	if st.WriterRules == nil {
		t.Fatal("status.json has no writer_rules")
	}
	var evidence string
	for _, s := range st.Streams {
		t.Logf("status: %s: %s (%s)", s.Metric, s.Class, s.Evidence)
		if s.Metric == "rollouts" {
			evidence = s.Evidence
		}
	}
	t.Logf("writer rules: %+v", *st.WriterRules)
	if !strings.HasPrefix(evidence, "writers sharing one start") {
		t.Errorf("the status page does not name the shared start of rollouts: %q", evidence)
	}
	ss := r.prom.stored(t, peersCounter, service)
	for _, s := range ss {
		t.Logf("%s %s: %d samples, last %v: %v", peersCounter, s.labels["service_instance_id"], len(s.values), s.last(), s.values)
	}
	got := r.prom.mustScalar(t, fmt.Sprintf(`sum(%s{job=%q})`, peersCounter, service))
	t.Logf("sum(%s) = %v, truth %d (processes' events %v)", peersCounter, got, truth, events)
	if got != float64(truth) {
		t.Errorf("sum(%s) = %v, want the %d events recorded (writer rules %+v)", peersCounter, got, truth, *st.WriterRules)
	}
	if len(ss) != len(everies) || st.WriterRules.Split == 0 || !strings.Contains(evidence, "split by the connection each writer's points came on") {
		t.Errorf("%d series, writer rules %+v, evidence %q: want %d writers split by their connections", len(ss), *st.WriterRules, evidence, len(everies))
	}
}
