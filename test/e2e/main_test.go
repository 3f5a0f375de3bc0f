// Package e2e runs the real doubletake binary against real SDKs, real
// collector components and real backends. The binary is built once per run.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the doubletake binary built for this run; repoRoot the module
// root.
var binary, repoRoot string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: finding the module root:", err)
		return 1
	}
	repoRoot = strings.TrimSpace(string(out))
	dir, err := os.MkdirTemp("", "doubletake-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "doubletake")
	build := exec.Command("go", "build", "-o", binary, "./cmd/doubletake")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building doubletake:", err)
		return 1
	}
	return m.Run()
}

// inCI reports whether the run must fail, not skip, on a missing
// dependency.
func inCI() bool { return os.Getenv("CI") == "true" }

// requireDep fails the test (in CI) or skips it (on a developer's machine
// without the dependency) with one clear message.
func requireDep(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if inCI() {
		t.Fatalf("%s is required under CI=true: %v", what, err)
	}
	t.Skipf("%s not available: %v (CI=true makes this a failure)", what, err)
}

// freePort returns a loopback address with a port nothing listens on now,
// and one it has not returned before in this run: the kernel may hand a
// port just closed to the next bind, and a test that asks for two ports
// (a receiver and a status page) must not get one twice.
func freePort(t *testing.T) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		portsMu.Lock()
		seen := portsGiven[addr]
		portsGiven[addr] = true
		portsMu.Unlock()
		if !seen {
			return addr
		}
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[string]bool{}
)

// heldPort returns a loopback address whose port is bound and not
// listening, so that connections to it are refused (an upstream that is
// down) and no other process (another package's test, a gateway's
// receiver) can take the port while a test waits for minutes; free
// releases it just before the test listens there itself.
func heldPort(t *testing.T) (addr string, free func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// No SO_REUSEADDR: a socket that sets it cannot bind the port either.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		t.Fatal(err)
	}
	var once sync.Once
	free = func() { once.Do(func() { _ = syscall.Close(fd) }) }
	t.Cleanup(free)
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port), free
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test
// reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gateway is a running `doubletake run`.
type gateway struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// startGateway runs `doubletake run ARGS...` and waits until its health
// endpoint answers. health is the health_check address the args configure.
func startGateway(t *testing.T, health string, env []string, args ...string) *gateway {
	t.Helper()
	g := &gateway{stderr: &syncBuffer{}, done: make(chan struct{})}
	g.cmd = exec.Command(binary, append([]string{"run"}, args...)...)
	g.cmd.Stdout, g.cmd.Stderr = g.stderr, g.stderr
	g.cmd.Env = append(os.Environ(), env...)
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.err = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.stop(t)
		if t.Failed() {
			t.Logf("gateway output:\n%s", g.stderr.String())
		}
	})
	waitFor(t, 60*time.Second, "the gateway to report healthy", func() bool {
		select {
		case <-g.done:
			t.Fatalf("gateway exited early: %v\n%s", g.err, g.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + health + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// startGatewayConfig writes yaml to a file and runs the gateway with it.
func startGatewayConfig(t *testing.T, health, yaml string) *gateway {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return startGateway(t, health, nil, "--config", path)
}

// stop ends the gateway gracefully, so that it flushes what it holds.
func (g *gateway) stop(t *testing.T) {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
		t.Errorf("gateway did not stop within 30s of SIGINT")
	}
}

// waitFor polls cond until it holds or the deadline passes. It waits on a
// condition, never for a fixed time.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ctxTimeout is a context that ends with the test or after d.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var errNotFound = errors.New("not found")

// lookPath finds an executable or says why not.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, errNotFound)
	}
	return p, nil
}

// startService runs cmd in the background for the rest of the test and
// waits until GET readyURL answers 200. It is stopped with SIGINT (then
// SIGKILL after 20 s) at cleanup, and its output is logged if the test
// failed.
func startService(t *testing.T, name string, cmd *exec.Cmd, readyURL string) {
	t.Helper()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	waitFor(t, 60*time.Second, name+" to be ready", func() bool {
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", name, out.String())
		default:
		}
		resp, err := http.Get(readyURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
