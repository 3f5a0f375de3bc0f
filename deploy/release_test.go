package deploy

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestReleaseArchive runs scripts/release.sh for this machine's linux
// target (the script makes all four; one is enough to test it): the
// archive's sum is in SHA256SUMS, it holds exactly the binary and the
// three documents, and the binary names the version and the commit.
func TestReleaseArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release; -short skips it")
	}
	requireTool(t, "git", "Debian package git")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// What the script sees: its checks come first.
	head := gitOutput(t, root, "rev-parse", "HEAD")
	commit := head[:12]
	local := ""
	if gitOutput(t, root, "status", "--porcelain", "--untracked-files=no") != "" {
		local = " with local changes"
	}
	out := t.TempDir()
	target := "linux/" + runtime.GOARCH
	cmd := exec.Command(filepath.Join(root, "scripts", "release.sh"), "v0.0.0-test", out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TARGETS="+target, "ALLOW_DIRTY=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	name := "doubletake_v0.0.0-test_linux_" + runtime.GOARCH
	archive := filepath.Join(out, name+".tar.gz")
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]) + "  " + name + ".tar.gz\n"; string(sums) != want {
		t.Errorf("SHA256SUMS is %q, want %q", sums, want)
	}

	zr, err := gzip.NewReader(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	bin := filepath.Join(t.TempDir(), "doubletake")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == name+"/doubletake" {
			if h.Mode&0o111 == 0 {
				t.Errorf("the binary is not executable: %o", h.Mode)
			}
			f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	want := []string{name + "/", name + "/CHANGELOG.md", name + "/LICENSE", name + "/README.md", name + "/doubletake"}
	if !slices.Equal(names, want) {
		t.Errorf("archive holds %q, want %q", names, want)
	}
	got, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("doubletake version: %v", err)
	}
	if w := fmt.Sprintf("doubletake v0.0.0-test (commit %s%s, collector v0.161.0)\n", commit, local); string(got) != w {
		t.Errorf("version says %q, want %q", got, w)
	}
	// Its gateway's status page names the same version and commit.
	h := statusHeader(t, bin)
	if h.Version != "v0.0.0-test" || h.Commit != head || h.Modified != (local != "") {
		t.Errorf("status.json header %+v, want version v0.0.0-test, commit %s, modified %v", h, head, local != "")
	}

	// A version that is not semantic is refused before anything is built.
	bad := exec.Command(filepath.Join(root, "scripts", "release.sh"), "1.0", out)
	bad.Dir = root
	if b, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(b), "VERSION must be a semantic version") {
		t.Errorf("release.sh 1.0: %v\n%s", err, b)
	}
}

// TestVersionNamesTheCommit: a plain 'go build' of a git checkout (a clone
// of this one's HEAD, with VCS stamping on) names the commit, from the
// build info the toolchain records, and says when the checkout has local
// changes.
func TestVersionNamesTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds doubletake twice; -short skips it")
	}
	requireTool(t, "git", "Debian package git")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "doubletake")
	if b, err := exec.Command("git", "clone", "-q", "--shared", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, b)
	}
	head := gitOutput(t, clone, "rev-parse", "HEAD")
	build := func() string {
		bin := filepath.Join(t.TempDir(), "doubletake")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/doubletake")
		cmd.Dir = clone
		// -trimpath and CGO_ENABLED=0 as the release and image scripts
		// build: the same build cache serves all three.
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true -trimpath", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	// The version is the toolchain's pseudo-version of the commit (or
	// dev where it records none); the commit is named either way.
	line := func(about string) *regexp.Regexp {
		return regexp.MustCompile(`^doubletake (dev|v0\.0\.0-\d{14}-` + head[:12] + `(\+dirty)?) \(commit ` + head[:12] + about + `, collector v0\.161\.0\)\n$`)
	}
	if got := build(); !line("").MatchString(got) {
		t.Errorf("clean checkout: %q, want it to match %s", got, line(""))
	}
	f, err := os.OpenFile(filepath.Join(clone, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "a local change")
	f.Close()
	if got := build(); !line(" with local changes").MatchString(got) {
		t.Errorf("checkout with a local change: %q, want it to match %s", got, line(" with local changes"))
	}
}

// pageHeader is the build /status.json names.
type pageHeader struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
}

// statusHeader runs bin's gateway (the embedded default, every address a
// free loopback port) until its /status.json answers, and returns the
// page's header.
func statusHeader(t *testing.T, bin string) pageHeader {
	t.Helper()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	status := free()
	cmd := exec.Command(bin, "run", "--grpc-endpoint", free(), "--http-endpoint", free(), "--metrics-endpoint", free(),
		"--telemetry-endpoint", free(), "--health-endpoint", free(), "--status-endpoint", status, "--data-dir", t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	deadline := time.Now().Add(5 * time.Minute) // a bound on a start, never reached unless it hangs
	for {
		select {
		case <-exited:
			t.Fatalf("the gateway exited before its status page answered: %v\n%s", waitErr, stderr.String())
		default:
		}
		if resp, err := http.Get("http://" + status + "/status.json"); err == nil {
			var s struct {
				Header pageHeader `json:"header"`
			}
			err := json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("status.json: %v", err)
			}
			return s.Header
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited // its stderr is whole once it has exited
			t.Fatalf("no status page on %s after 5 minutes:\n%s", status, stderr.String())
		}
		time.Sleep(100 * time.Millisecond) // a poll interval, not a synchronization
	}
}
