package e2e

import (
	"bytes"
	"errors"
	"fmt"
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

// The seed's own stack: the Python SDK, FastAPI, uvicorn and gunicorn from
// the pinned requirements files in test/python, installed by
// scripts/pyenv.sh into a cached virtualenv (scripts/test.sh builds them
// first; a test run on its own builds them the same way).

var (
	venvMu   sync.Mutex
	venvDirs = map[string]string{}
	venvErrs = map[string]error{}
)

// pyVenv returns the virtualenv built from test/python/requirements-NAME.txt.
func pyVenv(t *testing.T, name string) string {
	t.Helper()
	venvMu.Lock()
	defer venvMu.Unlock()
	dir, ok := venvDirs[name]
	err := venvErrs[name]
	if !ok && err == nil {
		req := filepath.Join(repoRoot, "test", "python", "requirements-"+name+".txt")
		cmd := exec.Command(filepath.Join(repoRoot, "scripts", "pyenv.sh"), req)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, runErr := cmd.Output()
		dir = strings.TrimSpace(string(out))
		switch {
		case runErr != nil:
			err = fmt.Errorf("scripts/pyenv.sh %s: %w\n%s", req, runErr, stderr.String())
		case dir == "":
			err = fmt.Errorf("scripts/pyenv.sh %s printed no directory", req)
		}
		venvDirs[name], venvErrs[name] = dir, err
	}
	requireDep(t, err, "the Python virtualenv for requirements-"+name+".txt (scripts/pyenv.sh)")
	return dir
}

// pyDir is test/python, the seed app's directory.
func pyDir() string { return filepath.Join(repoRoot, "test", "python") }

// pyEnv is the environment a Python process of the seed's stack runs in:
// the virtualenv first on PATH, every OTEL_ variable of the test's own
// environment removed, then env. Exports are frequent so a run is short.
func pyEnv(venv string, env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "FASTAPI_") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "VIRTUAL_ENV=") || strings.HasPrefix(kv, "PYTHON") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "PATH="+filepath.Join(venv, "bin")+":"+os.Getenv("PATH"), "VIRTUAL_ENV="+venv,
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
		"OTEL_METRIC_EXPORT_INTERVAL=500", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_BLRP_SCHEDULE_DELAY=100")
	return append(out, env...)
}

// pyServer is a running server process of the seed app.
type pyServer struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	addr string
	done chan struct{}
	err  error
	// stopErr says what went wrong stopping it ("" nothing).
	stopErr string
}

// startPyServer runs argv (a server of the seed app listening on addr) in
// test/python and waits until it serves /openapi.json (a request the
// counter does not count).
func startPyServer(t *testing.T, name, addr string, env []string, argv ...string) *pyServer {
	t.Helper()
	s := &pyServer{name: name, out: &syncBuffer{}, addr: addr, done: make(chan struct{})}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Dir = pyDir()
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, s.out.String())
		}
	})
	waitFor(t, 90*time.Second, name+" to serve", func() bool {
		select {
		case <-s.done:
			t.Fatalf("%s exited: %v\n%s", name, s.err, s.out.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/openapi.json")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// stop ends the server with SIGTERM (uvicorn and gunicorn shut down
// gracefully on it: ASGI lifespan shutdown, then the SDK's exit flush) and
// waits for it to exit.
func (s *pyServer) stop(t *testing.T) {
	t.Helper()
	s.stopQuiet()
	if s.stopErr != "" {
		t.Error(s.stopErr)
	}
}

// stopQuiet is stop, safe on any goroutine: what went wrong is in
// s.stopErr.
func (s *pyServer) stopQuiet() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.stopErr = s.name + " did not stop within 60s of SIGTERM"
		return
	}
	var ee *exec.ExitError
	if s.err != nil && !errors.As(s.err, &ee) {
		s.stopErr = fmt.Sprintf("%s: %v", s.name, s.err)
	}
}

// get requests path from the server and returns the status code and body.
func (s *pyServer) get(path string) (int, string, error) {
	// A connection per request, as independent clients make: under
	// gunicorn each is accepted by whichever worker is free.
	c := http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + s.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), err
}

// stopAll stops servers at once (each shutdown waits for its final
// exports) and waits for all of them.
func stopAll(t *testing.T, servers []*pyServer) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.stopQuiet() }()
	}
	wg.Wait()
	for _, s := range servers {
		if s.stopErr != "" {
			t.Error(s.stopErr)
		}
	}
}
