package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doubletake/doubletake/internal/distro"
)

func runMain(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, Streams{Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// TestRootHelpListsEachCommandOnce: the top-level help has one line per
// command (cobra's list), not a second hand-written list.
func TestRootHelpListsEachCommandOnce(t *testing.T) {
	code, out, _ := runMain("--help")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, cmd := range []string{"run", "verify", "audit", "scan", "version"} {
		n := 0
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == cmd {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d help lines start with %q, want 1:\n%s", n, cmd, out)
		}
	}
}

// TestRunHelpForPeople: defaults said once, the collector's feature-gate
// list hidden (the flag still works), --version is doubletake's.
func TestRunHelpForPeople(t *testing.T) {
	code, out, _ := runMain("run", "--help")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, not := range []string{"(default: ", "Comma-delimited list of feature gate", "confmap.enableMergeAppendOption", "version for run", "--config --config", "(default [])"} {
		if strings.Contains(out, not) {
			t.Errorf("run --help shows %q:\n%s", not, out)
		}
	}
	for _, want := range []string{", half the memory available)", "--config URI", "-v, --version", "print doubletake's version"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("a default said twice: %s", line)
		}
	}
}

func TestRunVersion(t *testing.T) {
	_, want, _ := runMain("version")
	for _, flag := range []string{"--version", "-v"} {
		code, out, _ := runMain("run", flag)
		if code != ExitOK || out != want || !strings.HasPrefix(out, "doubletake ") {
			t.Errorf("run %s: exit %d, %q; want %q", flag, code, out, want)
		}
	}
}

// TestRunPortInUse: a second gateway on the same ports prints one line
// naming the address and the flag that moves it, and exits 4.
func TestRunPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	code, out, errs := runMain("run", "--grpc-endpoint", free(), "--http-endpoint", ln.Addr().String(),
		"--metrics-endpoint", free(), "--telemetry-endpoint", free(), "--health-endpoint", free(), "--data-dir", t.TempDir())
	want := "doubletake: run: " + ln.Addr().String() + " is already in use (another gateway running?); stop it or choose another address with --http-endpoint\n"
	if code != ExitInternal || errs != want || out != "" {
		t.Errorf("exit %d\nstdout %q\nstderr %q\nwant stderr %q", code, out, errs, want)
	}
}

// TestRunErrorsNameTheFlag: errors about what the user set name the flag
// or the file, not the collector component that tripped on it.
func TestRunErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("receivers:\n  otlp: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--data-dir", file}, ExitUsage, "doubletake: --data-dir " + file + " is a file, not a directory\n"},
		{[]string{"run", "--upstream-protocol", "foo"}, ExitUsage, "doubletake: --upstream-protocol \"foo\": want grpc or http\n"},
		{[]string{"run", "--config", broken}, ExitInternal, "doubletake: --config " + broken + " is not valid YAML: yaml: line 2: did not find expected node content\n"},
		{[]string{"run", "validate", "--config=file:" + broken}, ExitInternal, "doubletake: --config " + broken + " is not valid YAML: yaml: line 2: did not find expected node content\n"},
		{[]string{"--config=" + broken}, ExitInternal, "doubletake: --config " + broken + " is not valid YAML: yaml: line 2: did not find expected node content\n"},
	} {
		code, _, errs := runMain(tc.args...)
		if code != tc.code || errs != tc.want {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

func TestStartupLine(t *testing.T) {
	o := distro.DefaultOptions()
	if got, want := startupLine(o), "doubletake: OTLP in on 127.0.0.1:4317 (gRPC) and http://127.0.0.1:4318 (HTTP); traces and logs to doubletake-data/traces.jsonl and doubletake-data/logs.jsonl, metrics for scraping at http://127.0.0.1:8889/metrics; data dir ./doubletake-data; status page http://127.0.0.1:8890/; own metrics http://127.0.0.1:8888/metrics"; got != want {
		t.Errorf("local:\n%s\nwant\n%s", got, want)
	}
	o.Upstream, o.StatusEndpoint = "https://user:secret@backend:4317", ""
	got := startupLine(o)
	if strings.Contains(got, "secret") || !strings.Contains(got, "everything to https://") || !strings.Contains(got, "backend:4317 over OTLP/grpc") || !strings.Contains(got, "status page off") {
		t.Errorf("upstream: %s", got)
	}
}
