package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/doubletake/doubletake/internal/capture"
)

// upstreamState reads the upstream's state from /status.json: the state
// each queue row reports (they share one upstream), and its last error.
func upstreamState(t *testing.T, statusAddr string) (states map[string]bool, lastError string) {
	t.Helper()
	var s struct {
		Queues []struct {
			Upstream *struct {
				Endpoint  string `json:"endpoint"`
				State     string `json:"state"`
				LastError string `json:"last_error"`
			} `json:"upstream"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+statusAddr+"/status.json")), &s); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	states = map[string]bool{}
	for _, q := range s.Queues {
		if q.Upstream != nil {
			states[q.Upstream.State] = true
			lastError = q.Upstream.LastError
		}
	}
	return states, lastError
}

var promLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// upstreamStateIs reads otelcol_exporter_dedup_upstream_state from the
// gateway's telemetry endpoint and reports whether it says, for each
// signal's exporter of dedup_otlp_grpc/upstream, that the upstream is in
// state: 1 for it, 0 for the three others.
func upstreamStateIs(t *testing.T, tel, state string) bool {
	t.Helper()
	seen := map[string]bool{} // data_type/state
	for _, l := range strings.Split(get(t, "http://"+tel+"/metrics"), "\n") {
		if !strings.HasPrefix(l, "otelcol_exporter_dedup_upstream_state{") {
			continue
		}
		labels := map[string]string{}
		for _, m := range promLabel.FindAllStringSubmatch(l[:strings.LastIndexByte(l, '}')], -1) {
			labels[m[1]] = m[2]
		}
		if labels["exporter"] != "dedup_otlp_grpc/upstream" {
			t.Fatalf("a state of another exporter: %s", l)
		}
		want := " 0"
		if labels["state"] == state {
			want = " 1"
		}
		if !strings.HasSuffix(l, want) {
			return false
		}
		seen[labels["data_type"]+"/"+labels["state"]] = true
	}
	return len(seen) == 12 // traces, metrics, logs × 4 states
}

// TestUpstreamUnreachableShown: with --upstream at a port nothing listens
// on, a span sent makes the status page, /status.json and the metric
// otelcol_exporter_dedup_upstream_state say the upstream is unreachable
// within seconds, the log says it once, and once an upstream listens there
// the state is reachable again and the page no longer says unreachable.
// When that upstream goes away with a span waiting, the metric says
// unreachable again, and reachable once it is back.
func TestUpstreamUnreachableShown(t *testing.T) {
	upstream := freePort(t)
	d := startDefault(t, "--upstream", "http://"+upstream)
	if !upstreamStateIs(t, d.tel, "unknown") {
		t.Errorf("before any send the metric does not say unknown:\n%s", grepLines(get(t, "http://"+d.tel+"/metrics"), "upstream_state"))
	}
	postSpanTwice(t, d.http, "health")

	waitFor(t, 10*time.Second, "status.json to say the upstream is unreachable", func() bool {
		states, _ := upstreamState(t, d.status)
		return states["unreachable"] && len(states) == 1
	})
	waitFor(t, 10*time.Second, "the metric to say the upstream is unreachable", func() bool {
		return upstreamStateIs(t, d.tel, "unreachable")
	})
	if _, lastErr := upstreamState(t, d.status); !strings.Contains(lastErr, "connection refused") {
		t.Errorf("last error %q does not say why", lastErr)
	}
	if raw := get(t, "http://"+d.status+"/status.json"); strings.Contains(raw, "null") {
		t.Errorf("status.json has a null where an empty list is []:\n%s", raw)
	}
	page := get(t, "http://"+d.status+"/")
	if !strings.Contains(page, `<span class="warn">unreachable</span>`) || !strings.Contains(page, upstream) {
		t.Errorf("the page does not show %s unreachable:\n%s", upstream, page)
	}

	// UPSTREAM_SCREENSHOT=path keeps the page, as headless Chromium draws
	// it, while the upstream is unreachable (docs/status-upstream.png).
	if shot := os.Getenv("UPSTREAM_SCREENSHOT"); shot != "" {
		bin, err := exec.LookPath("chromium")
		requireDep(t, err, "chromium")
		cmd := exec.CommandContext(ctxTimeout(t, 2*time.Minute), bin, "--headless", "--no-sandbox", "--disable-gpu",
			"--user-data-dir="+t.TempDir(), "--hide-scrollbars", "--window-size=1400,1000", "--screenshot="+shot, "http://"+d.status+"/")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("chromium: %v\n%s", err, out)
		}
	}

	sk := &sink{spans: map[[24]byte]int{}}
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	waitFor(t, 30*time.Second, "status.json to say the upstream is reachable", func() bool {
		states, _ := upstreamState(t, d.status)
		return states["reachable"] && len(states) == 1
	})
	if page := get(t, "http://"+d.status+"/"); strings.Contains(page, "unreachable") {
		t.Errorf("the page still says unreachable once the upstream is back")
	}
	waitFor(t, 10*time.Second, "the metric to say the upstream is reachable", func() bool {
		return upstreamStateIs(t, d.tel, "reachable")
	})
	if _, u := sk.counts(); u != 1 {
		t.Errorf("the upstream got %d distinct spans, want the one", u)
	}

	// The upstream goes away with a span waiting: unreachable within
	// seconds; back: reachable, and the span delivered.
	_ = srv.Close()
	if code := postProto(t, "http://"+d.http+"/v1/traces", tracesProto(t, oneSpan("health", "later", 7))); code != 200 {
		t.Fatalf("posting the later span: %d", code)
	}
	waitFor(t, 10*time.Second, "the metric to say the upstream is unreachable once it went away", func() bool {
		return upstreamStateIs(t, d.tel, "unreachable")
	})
	srv, err = capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	waitFor(t, 30*time.Second, "the metric to say the upstream is reachable once it is back", func() bool {
		return upstreamStateIs(t, d.tel, "reachable")
	})
	waitFor(t, 30*time.Second, "the later span upstream", func() bool {
		_, u := sk.counts()
		return u == 2
	})
	d.g.stop(t)
	log := d.g.stderr.String()
	if n := strings.Count(log, "doubletake: OTLP in on "+d.grpc+" (gRPC) and http://"+d.http+" (HTTP); everything to http://"+upstream+" over OTLP/grpc"); n != 1 {
		t.Errorf("%d startup lines naming the endpoints and the upstream, want 1", n)
	}
	if n := strings.Count(log, "Upstream unreachable"); n != 2 {
		t.Errorf("%d 'Upstream unreachable' warnings, want 2: one per outage", n)
	}
	if n := strings.Count(log, "Upstream reachable again"); n != 2 {
		t.Errorf("%d 'Upstream reachable again' lines, want 2: one per outage", n)
	}
	if strings.Contains(log, "Exporting failed. Will retry") {
		t.Errorf("the retry sender's per-attempt line was logged while the upstream was known to be down")
	}
}
