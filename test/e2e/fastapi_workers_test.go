package e2e

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// Issue 36, case 5: the seed app under gunicorn -w 4 with uvicorn's
// worker, its Resource built by hand with no service.instance.id: the four
// workers share one identity. FastAPI 0.143.5 by default (one exporter per
// process): the writers are peers, not copies.

const seedWorkers = 4

// runWorkersCase runs the app under gunicorn (extra: more flags) against
// r, sends the workload and stops it; it returns the truth per serving
// worker.
func runWorkersCase(t *testing.T, r *seedRun, venv, service string, extra ...string) map[string]*seedTruth {
	t.Helper()
	addr := freePort(t)
	argv := append([]string{filepath.Join(venv, "bin", "python"), "-m", "gunicorn", "-w", strconv.Itoa(seedWorkers), "-k", "uvicorn.workers.UvicornWorker",
		"--bind", addr, "--graceful-timeout", "20"}, extra...)
	argv = append(argv, "seed_app:app")
	s := startPyServer(t, "gunicorn "+service, addr, pyEnv(venv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+r.httpAddr, "SEED_SERVICE="+service,
		"SEED_RESOURCE=hand", seedInterval), argv...)
	truths, err := seedWorkload(s, 2*seedRequests)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	return truths
}

// TestFastAPIWorkers: each worker sets up its SDK after the fork (the
// module is imported in each worker): every worker's counts reach
// Prometheus, one series per worker ending at that worker's count, so the
// series add up to the truth. With --preload the SDK is set up once before the fork: every
// worker inherits the pre-start count and the streams' start times, so the
// workers are one writer to anything reading OTLP; the figures are logged
// (docs/metrics.md, "What the rule cannot do").
func TestFastAPIWorkers(t *testing.T) {
	venv := pyVenv(t, "fastapi-0.143")
	r := startSeedRun(t)
	const postfork, preload = "seed-workers", "seed-workers-preload"
	truthPost := runWorkersCase(t, r, venv, postfork)
	truthPre := runWorkersCase(t, r, venv, preload, "--preload")
	r.g.stop(t)

	t.Run("postfork", func(t *testing.T) {
		// Every worker records the pre-start value at import; workers that
		// served no request report it alone.
		total := seedWorkers * seedPrestart
		var wantLasts []float64
		for _, tr := range truthPost {
			total += tr.served
			wantLasts = append(wantLasts, float64(tr.jobs))
		}
		for range seedWorkers - len(truthPost) {
			wantLasts = append(wantLasts, seedPrestart)
		}
		slices.Sort(wantLasts)
		for _, pipeline := range []string{"plain", "dedup"} {
			ss := r.prom.storedIn(t, seedCounter, postfork, pipeline)
			sum, resets := countedAll(ss)
			var lasts []float64
			for _, s := range ss {
				lasts = append(lasts, s.last())
			}
			slices.Sort(lasts)
			t.Logf("%s %s (%d workers, %d served requests, truth %d): %d series ending at %v, counted %v, %d resets",
				seedCounter, pipeline, seedWorkers, len(truthPost), total, len(ss), lasts, sum, resets)
			// Every worker's series is kept, ending at its own count, and
			// none resets: a worker's first point that looks like a restart
			// of another's is held until the evidence says (docs/metrics.md,
			// "Held restarts"), so increase() adds up to the truth.
			if pipeline != "dedup" {
				continue
			}
			if !slices.Equal(lasts, wantLasts) {
				t.Errorf("with dedup: series end at %v; want one per worker ending at %v (%d in all)", lasts, wantLasts, total)
			}
			if resets != 0 || sum != float64(total) {
				t.Errorf("with dedup: %d resets, counted %v; want 0 resets and the truth %d", resets, sum, total)
			}
		}
	})
	t.Run("preload", func(t *testing.T) {
		served := 0
		for _, tr := range truthPre {
			served += tr.served
		}
		// The Python SDK (1.45) gives a MeterProvider set up before a fork
		// a new service.instance.id in each child: the workers do not share
		// an identity, and the master, still holding its reader, writes a
		// fifth series. Every series is its own writer: dedup changes
		// nothing.
		plain := r.prom.storedIn(t, seedCounter, preload, "plain")
		dedup := r.prom.storedIn(t, seedCounter, preload, "dedup")
		if len(plain) != len(dedup) {
			t.Errorf("--preload: %d series without dedup, %d with", len(plain), len(dedup))
		}
		for i := range min(len(plain), len(dedup)) {
			if !slices.Equal(plain[i].values, dedup[i].values) {
				t.Errorf("--preload: series %d differs with dedup: %v, without %v", i, dedup[i].values, plain[i].values)
			}
		}
		for _, pipeline := range []string{"plain", "dedup"} {
			ss := r.prom.storedIn(t, seedCounter, preload, pipeline)
			sum, resets := countedAll(ss)
			var lasts []float64
			for _, s := range ss {
				lasts = append(lasts, s.last())
			}
			t.Logf("%s %s (--preload, %d workers served %d requests; recorded: %d before the fork, %d after): %d series ending at %v, counted %v, %d resets; series %v",
				seedCounter, pipeline, len(truthPre), served, seedPrestart, served, len(ss), lasts, sum, resets, seriesLabels(ss))
		}
	})
}
