package deploy

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// imageConfig is what `podman image inspect` says of the image's config.
type imageConfig struct {
	User         string              `json:"User"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	WorkingDir   string              `json:"WorkingDir"`
	Volumes      map[string]struct{} `json:"Volumes"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Labels       map[string]string   `json:"Labels"`
}

// TestImage builds the image with scripts/image.sh (podman; FROM scratch,
// so nothing is pulled), checks its config and every file in it, and runs
// its entrypoint as the Helm chart's and the Operator's container specs
// run it. Containers cannot be run on every machine (podman's runtime
// needs setrlimit): the entrypoint runs instead from the image's own
// files, exported, as its user 10001, in a network and mount namespace of
// its own with /proc, /sys and /dev mounted as a runtime would, the config
// at /conf and the data dir in the image's volume.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image; -short skips it")
	}
	podman := requireTool(t, "podman", "Debian package podman")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("localhost/doubletake-test:%d", os.Getpid())
	build := exec.Command(filepath.Join(root, "scripts", "image.sh"), "v0.0.0-test", tag)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "-f", tag).Run() })

	out, err := exec.Command(podman, "image", "inspect", "--format", "{{json .Config}}", tag).Output()
	if err != nil {
		t.Fatalf("podman image inspect: %v", err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.User != "10001:10001" {
		t.Errorf("image user %q, want 10001:10001 (as the collector's images)", cfg.User)
	}
	if !slices.Equal(cfg.Entrypoint, imageEntrypoint(t)) || !slices.Equal(cfg.Entrypoint, []string{"/doubletake"}) {
		t.Errorf("entrypoint %q, want [/doubletake]", cfg.Entrypoint)
	}
	if _, ok := cfg.Volumes[dataDir]; !ok || cfg.WorkingDir != dataDir {
		t.Errorf("volumes %v, working dir %q; want the data dir %s as both", cfg.Volumes, cfg.WorkingDir, dataDir)
	}
	for _, p := range []string{"4317", "4318", "8888", "8889", "8890", "13133"} {
		if _, ok := cfg.ExposedPorts[p+"/tcp"]; !ok {
			t.Errorf("port %s/tcp not exposed", p)
		}
	}
	if cfg.Labels["org.opencontainers.image.version"] != "v0.0.0-test" {
		t.Errorf("labels %v: no version", cfg.Labels)
	}

	rootfs := exportImage(t, podman, tag)

	// The binary is static (no interpreter: nothing else in the image
	// could serve it) and says the version it was built as.
	f, err := elf.Open(filepath.Join(rootfs, "doubletake"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/doubletake is dynamically linked")
		}
	}
	f.Close()

	t.Run("chart", func(t *testing.T) {
		v := readChartValues(t)
		command, args := chartContainer(v)
		runAsContainer(t, rootfs, cfg, command, args, "relay.yaml", toYAML(t, v.AlternateConfig), v.ExtraEnvs)
	})
	t.Run("operator", func(t *testing.T) {
		c := readOperatorCollector(t)
		command, args := operatorContainer(c)
		runAsContainer(t, rootfs, cfg, command, args, "collector.yaml", toYAML(t, c.Spec.Config), c.Spec.Env)
	})
	t.Run("default command", func(t *testing.T) {
		// The image's own CMD: the embedded default on every interface.
		runAsContainer(t, rootfs, cfg, nil, nil, "", "", nil)
	})
}

// wantFiles is every entry of the image: path -> mode and owner.
var wantFiles = map[string]string{
	"doubletake":                        "-rwxr-xr-x 0:0",
	"etc/":                              "drwxr-xr-x 0:0",
	"etc/group":                         "-rw-r--r-- 0:0",
	"etc/passwd":                        "-rw-r--r-- 0:0",
	"etc/ssl/":                          "drwxr-xr-x 0:0",
	"etc/ssl/certs/":                    "drwxr-xr-x 0:0",
	"etc/ssl/certs/ca-certificates.crt": "-rw-r--r-- 0:0",
	"tmp/":                              "dtrwxrwxrwx 0:0",
	"var/":                              "drwxr-xr-x 0:0",
	"var/lib/":                          "drwxr-xr-x 0:0",
	"var/lib/doubletake/":               "drwxr-xr-x 10001:10001",
}

// exportImage writes the image's files (podman create + export) into a
// directory, checking each against wantFiles.
func exportImage(t *testing.T, podman, tag string) string {
	t.Helper()
	id, err := exec.Command(podman, "create", tag).Output()
	if err != nil {
		t.Fatalf("podman create: %v", err)
	}
	cid := strings.TrimSpace(string(id))
	defer func() { _ = exec.Command(podman, "rm", "-f", cid).Run() }()
	export, err := exec.Command(podman, "export", cid).Output()
	if err != nil {
		t.Fatalf("podman export: %v", err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(export))
	seen := map[string]bool{}
	// podman export may name a directory after its files: modes and owners
	// are set once everything is written, deepest last-met entry first.
	type attrs struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}
	var set []attrs
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if name == "" {
			continue
		}
		if h.Typeflag == tar.TypeDir && !strings.HasSuffix(name, "/") {
			name += "/"
		}
		got := fmt.Sprintf("%v %d:%d", h.FileInfo().Mode(), h.Uid, h.Gid)
		if want, ok := wantFiles[name]; !ok {
			t.Errorf("the image holds %s (%s), which it should not", name, got)
		} else if got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
		seen[name] = true
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, h.FileInfo().Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		}
		set = append(set, attrs{path, h.FileInfo().Mode() & (os.ModePerm | os.ModeSticky), h.Uid, h.Gid})
	}
	for i := len(set) - 1; i >= 0; i-- {
		a := set[i]
		// Only root can give files away; without root the entrypoint is not
		// run (runAsContainer skips), so the owners are not needed.
		if os.Geteuid() == 0 {
			if err := os.Lchown(a.path, a.uid, a.gid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(a.path, a.mode); err != nil {
			t.Fatal(err)
		}
	}
	for name := range wantFiles {
		if !seen[name] {
			t.Errorf("the image lacks %s", name)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if !strings.Contains(string(passwd), "doubletake:x:10001:10001:") {
		t.Errorf("/etc/passwd has no doubletake user 10001:\n%s", passwd)
	}
	return dir
}

// insideScript runs in the namespaces: the entrypoint from the image's
// files as its user, then one span sent twice over OTLP/HTTP, then the
// status page's JSON on stdout. Every wait is a bounded poll.
const insideScript = `set -eu
ip link set lo up
for d in proc sys dev; do mkdir -p "$ROOTFS/$d"; mount --rbind "/$d" "$ROOTFS/$d"; done
chroot=$(command -v chroot)
env -i $CONTAINER_ENV "$chroot" --userspec=10001:10001 "$ROOTFS" "$@" >"$LOG" 2>&1 &
pid=$!
i=0
until curl -sf http://127.0.0.1:13133/ >/dev/null; do
  kill -0 $pid 2>/dev/null || { echo "the entrypoint exited" >&2; exit 1; }
  i=$((i+1)); [ $i -le 600 ] || { echo "not healthy after 60 s" >&2; exit 1; }
  sleep 0.1
done
span='{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"image-test"}}]},"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"hello","kind":2,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000"}]}]}]}'
for n in 1 2; do
  curl -sf -o /dev/null -H 'Content-Type: application/json' -d "$span" http://127.0.0.1:4318/v1/traces
done
curl -sf http://127.0.0.1:8890/status.json
kill $pid
wait $pid
`

// runAsContainer runs the image's entrypoint with a container spec's
// command and args (the image's ENTRYPOINT when command is empty, its CMD
// when args are too), the config mounted at /conf/configName, and the
// spec's environment, then checks that the span sent twice was received
// twice and copied once.
func runAsContainer(t *testing.T, rootfs string, cfg imageConfig, command, args []string, configName, config string, env []corev1.EnvVar) {
	t.Helper()
	for _, tool := range []string{"unshare", "chroot", "mount", "ip", "curl"} {
		requireTool(t, tool, "util-linux, coreutils, iproute2, curl")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("running the image's entrypoint in its namespaces needs root under CI=true")
		}
		t.Skip("running the image's entrypoint in its namespaces needs root (CI=true makes this a failure)")
	}
	argv := command
	if len(argv) == 0 {
		argv = cfg.Entrypoint
		if len(args) == 0 {
			args = cfg.Cmd
		}
	}
	argv = append(slices.Clone(argv), args...)
	confDir := filepath.Join(rootfs, "conf")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(confDir)
	if configName != "" {
		if err := os.WriteFile(filepath.Join(confDir, configName), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(rootfs, "var", "lib", "doubletake")
	defer func() {
		entries, _ := os.ReadDir(data)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(data, e.Name()))
		}
	}()

	// The pod's environment: the chart's MY_POD_IP and the spec's own;
	// the downward API's pod IP is the namespace's loopback. The upstream
	// is a port nothing listens on: the span waits in the queue.
	vars := []string{"MY_POD_IP=127.0.0.1"}
	for _, e := range env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			vars = append(vars, e.Name+"=127.0.0.1")
		case e.ValueFrom != nil:
			t.Fatalf("env %s: no test value for %v", e.Name, e.ValueFrom)
		case e.Name == "UPSTREAM_ENDPOINT":
			vars = append(vars, e.Name+"=127.0.0.1:9")
		default:
			vars = append(vars, e.Name+"="+e.Value)
		}
	}
	logFile := filepath.Join(t.TempDir(), "entrypoint.log")
	cmd := exec.Command("unshare", append([]string{"-nm", "--propagation", "private", "sh", "-c", insideScript, "sh"}, argv...)...)
	cmd.Env = append(os.Environ(), "ROOTFS="+rootfs, "LOG="+logFile, "CONTAINER_ENV="+strings.Join(vars, " "))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	log, _ := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("%q: %v\n%s\nentrypoint's log:\n%s", argv, err, &stderr, log)
	}
	var status struct {
		Services []struct {
			Service  string `json:"service"`
			Received int    `json:"received"`
			Copies   int    `json:"copies"`
		} `json:"services"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &status); err != nil {
		t.Fatalf("%q: status.json: %v\n%s", argv, err, &stdout)
	}
	if len(status.Services) != 1 || status.Services[0].Service != "image-test" || status.Services[0].Received != 2 || status.Services[0].Copies != 1 {
		t.Errorf("%q: status.json services %+v; want image-test received 2, copies 1", argv, status.Services)
	}
	// The gateway wrote its data dir as its own user.
	entries, err := os.ReadDir(data)
	if err != nil || len(entries) == 0 {
		t.Errorf("%q: nothing written to the data dir %s: %v\n%s", argv, dataDir, err, log)
	}
}
