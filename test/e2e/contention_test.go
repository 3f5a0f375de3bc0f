package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// burnCPUs starts one CPU-burning process per CPU for the rest of the
// test, so that the gateway, its senders and its upstream compete for
// every core.
func burnCPUs(t *testing.T) {
	t.Helper()
	for range runtime.NumCPU() {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting a CPU burner: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// TestDeliveryUnderContention runs the delivery guarantees' tests again
// with one CPU-burning process per CPU: kill -9 mid-stream, during an
// outage and its drain, during a direct send, and while a sender's retry
// waits for its original (spans, log records and metric points; direct,
// queue and local files; three moments of the wait); an upstream that turns
// slow and then away, and a 60 s outage; permanent refusals, after the
// queue and on the direct path (with a restart); oversized requests; a
// full queue's refusals before decoding, and their retries; a full data
// dir (per signal, freed by hand, kill -9 while full).
// DOUBLETAKE_CONTENTION_ROUNDS (default 1) repeats the quick ones.
func TestDeliveryUnderContention(t *testing.T) {
	rounds := 1
	if v := os.Getenv("DOUBLETAKE_CONTENTION_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DOUBLETAKE_CONTENTION_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	burnCPUs(t)
	quick := []struct {
		name string
		test func(*testing.T)
	}{
		{"Kill9MidStream", TestKill9MidStream},
		{"Kill9sDuringOutageAndDrain", TestKill9sDuringOutageAndDrain},
		{"DirectKill9DuringForward", TestDirectKill9DuringForward},
		{"RetryOfAnInFlightRequestSurvivesKill9", TestRetryOfAnInFlightRequestSurvivesKill9},
		{"DirectUpstreamSlowThenAway", TestDirectUpstreamSlowThenAway},
		{"UpstreamPermanentRefusalTakesBack", TestUpstreamPermanentRefusalTakesBack},
		{"DirectRefusalSurvivesARestart", TestDirectRefusalSurvivesARestart},
		{"UpstreamLimitWithOversizedRequests", TestUpstreamLimitWithOversizedRequests},
		{"FullQueueRefusesBeforeDecoding", TestFullQueueRefusesBeforeDecoding},
		{"FullDataDir", TestFullDataDir},
		{"FullDataDirFreedByHand", TestFullDataDirFreedByHand},
		{"FullDataDirKill9", TestFullDataDirKill9},
	}
	for r := 1; r <= rounds; r++ {
		for _, tc := range quick {
			t.Run(fmt.Sprintf("%s/round%d", tc.name, r), tc.test)
		}
	}
	t.Run("UpstreamOutage", TestUpstreamOutage)
}
