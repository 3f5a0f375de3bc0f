package e2e

import (
	le "encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/doubletake/doubletake/internal/capture"
)

// The log_storage extension holds its directory, checks and salvages
// file_storage's files and moves them into its clients at its Start,
// whatever config runs it: these tests run the embedded default's config,
// rendered, with --config, as the Helm chart and the Operator run the
// image (their configs keep the same layout on the volume claim:
// deploy/manifests_test.go).

// TestConfigUpgradeFromFileStorage: TestUpgradeFromFileStorage with
// --config: file_storage's queue and journal, written by the previous
// default and left by kill -9, are moved into log_storage, every
// acknowledged span delivered once and copies of them still dropped.
func TestConfigUpgradeFromFileStorage(t *testing.T) {
	d, bl, upstream, current := fileStorageBacklog(t)
	upgradedDelivers(t, d, bl, upstream, func() *gateway { return startGatewayConfig(t, d.health, current) })
}

// TestConfigSalvagesDamagedFileStorage: the previous default's queue
// file (file_storage, bbolt) holding an acknowledged backlog, cut to 60%
// of its size after kill -9, then the current config run with --config
// and the upstream back: the file is checked in a child process, kept as
// FILE.damaged-TIME, salvaged (a warn line, the status page and
// otelcol_processor_dedup_storage_recovered_items say what was salvaged
// and lost), the salvage moved into log_storage; exactly the salvaged
// spans are delivered, each once, and salvaged + lost = acknowledged
// unless the loss is reported as uncountable.
func TestConfigSalvagesDamagedFileStorage(t *testing.T) {
	d, bl, upstream, current := fileStorageBacklog(t)
	file := filepath.Join(d.dataDir, "queue", queueClient)
	used := boltUsedBytes(t, file)
	if err := os.Truncate(file, used*6/10); err != nil {
		t.Fatal(err)
	}

	sk := &sink{spans: map[[24]byte]int{}}
	srv, err := capture.Listen(upstream, sk.handle)
	if err != nil {
		t.Fatalf("the upstream's port was taken meanwhile: %v", err)
	}
	sk.srv = srv
	t.Cleanup(func() { _ = srv.Close() })
	d.g = startGatewayConfig(t, d.health, current)
	waitFor(t, 2*time.Minute, "the queue to empty", func() bool { return d.queueSize(t) == 0 })
	delivered := sk.snapshot()

	log := d.g.stderr.String()
	warn := grepLines(log, "damaged storage file "+file)
	if strings.Count(warn, "\n") != 0 || !strings.Contains(warn, "\twarn\t") || !strings.Contains(warn, "traces queue: salvaged") {
		t.Errorf("want one warn line saying %s was damaged and what was salvaged, got:\n%s", file, warn)
	}
	var status struct {
		Storage []storageRecovered `json:"storage_recovered"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+d.status+"/status.json")), &status); err != nil {
		t.Fatal(err)
	}
	if len(status.Storage) != 1 || status.Storage[0].File != file || status.Storage[0].Store != "queue" {
		t.Fatalf("the status page's storage_recovered is %+v, want one entry for %s", status.Storage, file)
	}
	rec := status.Storage[0]
	if !strings.HasPrefix(rec.KeptAs, file+".damaged-") {
		t.Errorf("kept as %q, want %s.damaged-TIME", rec.KeptAs, file)
	}
	if _, err := os.Stat(rec.KeptAs); err != nil {
		t.Errorf("the damaged file was not kept: %v", err)
	}
	// The salvage, not the damaged file, was moved into log_storage.
	if line := grepLines(log, "migrated file_storage file "+file+" to log_storage"); strings.Count(line, "\n") != 0 {
		t.Errorf("want one info line saying the salvage of %s was migrated, got:\n%s", file, line)
	}
	m := get(t, "http://"+d.tel+"/metrics")
	if v, _ := promValue(m, `otelcol_processor_dedup_storage_recovered_items{outcome="salvaged",store="queue"}`); int64(v) != rec.Salvaged {
		t.Errorf("storage_recovered_items{outcome=salvaged,store=queue} is %v, the status page says %d:\n%s", v, rec.Salvaged, grepLines(m, "storage_recovered"))
	}

	backlogSpans := map[[24]byte]bool{}
	for _, keys := range bl.keys {
		for _, k := range keys {
			backlogSpans[k] = true
		}
	}
	var extra, twice int
	for k, n := range delivered {
		switch {
		case !backlogSpans[k]:
			extra++
		case n > 1:
			twice++
		}
	}
	if extra+twice > 0 || len(delivered) == 0 || len(delivered) >= acknowledged {
		t.Errorf("%d spans delivered, %d not of the backlog, %d more than once: want part of the %d acknowledged, each once", len(delivered), extra, twice, acknowledged)
	}
	if int64(len(delivered)) != rec.Salvaged {
		t.Errorf("%d spans delivered, the salvage said %d", len(delivered), rec.Salvaged)
	}
	if !rec.LostUncounted && rec.Salvaged+rec.Lost != acknowledged {
		t.Errorf("salvaged %d + lost %d spans != %d acknowledged, and the loss is not reported as uncountable: %+v", rec.Salvaged, rec.Lost, acknowledged, rec)
	}
	t.Logf("cut to %d of the %d bytes in use: %d spans salvaged and delivered, %d lost (%d entries), uncounted %t; %s",
		used*6/10, used, rec.Salvaged, rec.Lost, rec.LostEntries, rec.LostUncounted, rec.Line)
}

// boltUsedBytes is how much of the bbolt file at path is in use: its
// newest meta page's high water mark (pages below it are in use or free;
// bbolt grows a file ahead of them), times its page size. A meta page
// (bbolt v1 format, pages 0 and 1): a 16-byte page header, then magic,
// version, page size and flags (u32 each), the root bucket (16 bytes),
// the freelist page, the high water mark and the txid (u64 each).
func boltUsedBytes(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := func(off int) (pageSize uint32, high, txid uint64, ok bool) {
		if off+16+64 > len(data) {
			return 0, 0, 0, false
		}
		m := data[off+16:]
		if le.LittleEndian.Uint32(m) != 0xED0CDAED {
			return 0, 0, 0, false
		}
		return le.LittleEndian.Uint32(m[8:]), le.LittleEndian.Uint64(m[40:]), le.LittleEndian.Uint64(m[48:]), true
	}
	pageSize, high, txid, ok := meta(0)
	if !ok {
		t.Fatalf("%s: no bbolt meta page at 0", path)
	}
	if ps, h, tx, ok := meta(int(pageSize)); ok && tx > txid {
		pageSize, high = ps, h
	}
	used := int64(high) * int64(pageSize)
	if used <= 0 || used > int64(len(data)) {
		t.Fatalf("%s: %d bytes in use of %d", path, used, len(data))
	}
	return used
}

// TestSecondConfigSameLogStorage: a second gateway run with --config on
// the log_storage directory a running one holds (other ports) fails at
// log_storage's Start, exit 4, its last line naming the directory and the
// PID holding it; the first goes on serving, still the holder. Once the
// first has stopped, another one starts on it.
func TestSecondConfigSameLogStorage(t *testing.T) {
	dataDir := t.TempDir()
	render := func() (*defaultGateway, string) {
		d := newDefault(t, dataDir)
		r := runCLI(t, append([]string{"run", "default-config"}, d.args...)...)
		if r.code != 0 {
			t.Fatalf("default-config: exit %d: %s", r.code, r.stderr)
		}
		return d, r.stdout
	}
	first, config := render()
	first.g = startGatewayConfig(t, first.health, config)
	logDir := filepath.Join(dataDir, "log")

	_, secondConfig := render()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(secondConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Bounded: a second gateway that did start would run until killed.
	cmd := exec.CommandContext(ctxTimeout(t, time.Minute), binary, "run", "--config", path)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	r := result{stderr: stderr.String()}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the second gateway: %v, want an exit with an error\n%s", err, r.stderr)
	}
	r.code = ee.ExitCode()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	pid := strconv.Itoa(first.g.cmd.Process.Pid)
	if r.code != 4 || !strings.HasPrefix(last, "doubletake: ") || !strings.Contains(last, "log_storage: directory "+logDir+" is in use by another gateway (pid "+pid+")") {
		t.Errorf("exit %d; want 4 and a last line naming %s and pid %s, got:\n%s", r.code, logDir, pid, r.stderr)
	}
	get(t, "http://"+first.health+"/") // still serving
	if b, err := os.ReadFile(filepath.Join(logDir, "LOCK")); err != nil || strings.TrimSpace(string(b)) != pid {
		t.Errorf("%s/LOCK holds %q (%v), want the first gateway's pid %s", logDir, b, err, pid)
	}

	first.g.stop(t)
	// On ports free now: the refused gateway's may have been taken since.
	next, nextConfig := render()
	next.g = startGatewayConfig(t, next.health, nextConfig)
	if b, err := os.ReadFile(filepath.Join(logDir, "LOCK")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(next.g.cmd.Process.Pid) {
		t.Errorf("%s/LOCK holds %q (%v), want the next gateway's pid %d", logDir, b, err, next.g.cmd.Process.Pid)
	}
}

// TestHelmUpgradeFromFileStorage: deploy/helm/values.yaml's
// alternateConfig (the Operator's resource holds the same config), run
// with --config as the chart runs it, on a volume written by the chart's
// earlier config (the same with file_storage in /var/lib/doubletake/queue)
// holding an acknowledged backlog left by kill -9: log_storage moves the
// files in, every acknowledged span is delivered once and copies are
// still dropped (upgradedDelivers).
func TestHelmUpgradeFromFileStorage(t *testing.T) {
	upstream := freePort(t)
	d := newDefault(t, t.TempDir())
	current := helmConfig(t, d, upstream)
	bl := queueInFileStorage(t, d, chartWithFileStorage(t, current, d.dataDir))
	upgradedDelivers(t, d, bl, upstream, func() *gateway { return startGatewayConfig(t, d.health, current) })
}

// helmConfig is the chart values' alternateConfig with the pod's
// addresses moved to d's (free loopback ports), its upstream at upstream
// and its volume at d.dataDir.
func helmConfig(t *testing.T, d *defaultGateway, upstream string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "helm", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		AlternateConfig map[string]any `yaml:"alternateConfig"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(values.AlternateConfig)
	if err != nil {
		t.Fatal(err)
	}
	config := string(out)
	_, telPort, _ := strings.Cut(d.tel, ":")
	for _, r := range []struct{ from, to string }{
		{"${env:MY_POD_IP}:4317", d.grpc}, {"${env:MY_POD_IP}:4318", d.http},
		{"${env:MY_POD_IP}:13133", d.health}, {"${env:MY_POD_IP}:8890", d.status},
		{"port: 8888", "port: " + telPort}, {"host: ${env:MY_POD_IP}", "host: 127.0.0.1"},
		{"${env:UPSTREAM_ENDPOINT}", upstream}, {"/var/lib/doubletake/", d.dataDir + "/"},
	} {
		if !strings.Contains(config, r.from) {
			t.Fatalf("the chart's config has no %q: helmConfig needs updating\n%s", r.from, config)
		}
		config = strings.ReplaceAll(config, r.from, r.to)
	}
	if strings.Contains(config, "${env:") || strings.Contains(config, "/var/lib/doubletake") {
		t.Fatalf("the chart's config still needs the pod's environment or volume:\n%s", config)
	}
	return config
}

// chartWithFileStorage is the chart's config as it was before log_storage:
// file_storage in DATA_DIR/queue wherever log_storage is.
func chartWithFileStorage(t *testing.T, current, dataDir string) string {
	t.Helper()
	replace := func(s, from, to string, n int) string {
		if c := strings.Count(s, from); c != n {
			t.Fatalf("the chart's config has %q %d times, want %d: chartWithFileStorage needs updating\n%s", from, c, n, s)
		}
		return strings.ReplaceAll(s, from, to)
	}
	old := replace(current, "    log_storage:\n        directory: "+dataDir+"/log\n        file_storage_directory: "+dataDir+"/queue\n",
		"    file_storage:\n        directory: "+dataDir+"/queue\n        create_directory: true\n", 1)
	old = replace(old, "storage: log_storage\n", "storage: file_storage\n", 2)
	old = replace(old, "- log_storage\n", "- file_storage\n", 1)
	return old
}
