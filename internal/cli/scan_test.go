package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runScan runs the scan command with args through Main and returns its
// exit code, stdout and stderr.
func runScan(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append([]string{"scan"}, args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScanCommandFindings(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "app", "uv.lock"), "version = 1\n\n[[package]]\nname = \"fastapi\"\nversion = \"0.142.4\"\n")
	writeFile(t, filepath.Join(dir, "app", "pyproject.toml"), "[project]\nname = \"app\"\ndependencies = [\"fastapi>=0.135\"]\n")

	code, out, errOut := runScan(t, dir)
	if code != ExitFindings {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitFindings, errOut)
	}
	for _, want := range []string{
		filepath.ToSlash(filepath.Join(dir, "app", "uv.lock")) + ":5: fastapi 0.142.4 is locked",
		filepath.ToSlash(filepath.Join(dir, "app", "pyproject.toml")) + ":3: fastapi>=0.135 in project.dependencies admits fastapi 0.142.0",
		"  fix:    require fastapi>=0.135,!=0.142.*",
		"fastapi/fastapi#16476",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "doubletake scan: 2 findings, 0 problems, 0 not judged (2 files read, 1 hazard checked)") {
		t.Errorf("stderr: %q", errOut)
	}
}

func TestScanCommandClean(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pyproject.toml"), "[project]\nname = \"app\"\ndependencies = [\"fastapi>=0.135,!=0.142.*\"]\n")
	code, out, errOut := runScan(t, dir)
	if code != ExitOK || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestScanCommandJSON(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "requirements.txt"), "fastapi==0.142.0\n")
	writeFile(t, filepath.Join(dir, "broken", "uv.lock"), "version = [\n")
	code, out, errOut := runScan(t, "--format", "json", dir)
	if code != ExitFindings {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	var res struct {
		Findings []struct{ Kind, Package, Version, Suggest string }
		Problems []struct{ Path, Message string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if len(res.Findings) != 1 || res.Findings[0].Kind != "locked" || res.Findings[0].Suggest != "fastapi==0.143.0" {
		t.Errorf("findings = %+v", res.Findings)
	}
	if len(res.Problems) != 1 || !strings.HasSuffix(res.Problems[0].Path, "broken/uv.lock") {
		t.Errorf("problems = %+v", res.Problems)
	}
	if !strings.Contains(errOut, "broken/uv.lock:1: invalid TOML") {
		t.Errorf("stderr lacks the problem: %q", errOut)
	}
}

func TestScanCommandProblemsOnly(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pyproject.toml"), "[project\n")
	code, _, errOut := runScan(t, dir)
	if code != ExitInternal {
		t.Fatalf("exit %d, want %d (incomplete scan); stderr %s", code, ExitInternal, errOut)
	}
}

func TestScanCommandHazardsFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "requirements.txt"), "demo-exporter==2.0.1\n")
	good := writeFile(t, filepath.Join(dir, "extra.yaml"), `
hazards:
  - package: demo_exporter
    affected: ">=2.0,<2.1"
    fixed: "2.1"
    exclusion: "!=2.0.*"
    effect: registers its exporter twice
    reference: demo/demo#7
`)
	code, out, errOut := runScan(t, "--hazards", good, dir)
	if code != ExitFindings || !strings.Contains(out, "demo-exporter==2.0.1 is pinned") || !strings.Contains(errOut, "2 hazards checked") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "hazards:\n  - package: x\n    affected: '>=1'\n")
	code, _, errOut = runScan(t, "--hazards", bad, dir)
	if code != ExitUsage || !strings.Contains(errOut, "hazards[0] (x): effect: required") {
		t.Errorf("invalid hazards file: exit %d, stderr:\n%s", code, errOut)
	}

	code, _, errOut = runScan(t, "--hazards", filepath.Join(dir, "missing.yaml"), dir)
	if code != ExitInternal || !strings.Contains(errOut, "reading hazards file") {
		t.Errorf("unreadable hazards file: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestScanCommandUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--format", "xml", dir},
		{"--bogus", dir},
		{filepath.Join(dir, "does-not-exist")},
	} {
		code, _, errOut := runScan(t, args...)
		if code != ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, ExitUsage, errOut)
		}
	}
}

func TestScanCommandNotJudged(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pyproject.toml"), "[project]\nname = \"app\"\ndynamic = [\"dependencies\"]\n")
	writeFile(t, filepath.Join(dir, "requirements.txt"), "git+https://example.invalid/fastapi.git\n")
	if err := os.Symlink("/proc/self/environ", filepath.Join(dir, "uv.lock")); err != nil {
		t.Fatal(err)
	}

	// Listed, but by default not a failure.
	code, out, errOut := runScan(t, dir)
	if code != ExitOK {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitOK, errOut)
	}
	for _, want := range []string{
		"not judged (3): the scan saw these but could not check them\n",
		"pyproject.toml:3: dynamic: project.dynamic lists \"dependencies\"",
		"requirements.txt:1: vcs: version control reference",
		"uv.lock: outside-root: a symbolic link out of the scanned root (or to an absolute path); not followed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "0 findings, 0 problems, 3 not judged") {
		t.Errorf("stderr: %q", errOut)
	}

	code, _, errOut = runScan(t, "--fail-not-judged", dir)
	if code != ExitNotJudged {
		t.Errorf("--fail-not-judged: exit %d, want %d; stderr:\n%s", code, ExitNotJudged, errOut)
	}
	code, out, _ = runScan(t, "--fail-not-judged", "--format", "json", dir)
	var res struct {
		NotJudged []struct{ Path, Reason, Detail string } `json:"not_judged"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitNotJudged || len(res.NotJudged) != 3 {
		t.Errorf("json: exit %d, %v, %+v", code, err, res)
	}
	// The help names the code the flag exits with.
	if _, out, _ := runScan(t, "--help"); !strings.Contains(out, fmt.Sprintf("exit %d when nothing is found but something could not be judged", ExitNotJudged)) ||
		!strings.Contains(out, fmt.Sprintf("%d (with --fail-not-judged) nothing found", ExitNotJudged)) {
		t.Errorf("scan --help does not name exit %d for --fail-not-judged:\n%s", ExitNotJudged, out)
	}
	// Findings still take precedence.
	writeFile(t, filepath.Join(dir, "requirements-dev.txt"), "fastapi==0.142.1\n")
	if code, _, _ := runScan(t, "--fail-not-judged", dir); code != ExitFindings {
		t.Errorf("with a finding: exit %d, want %d", code, ExitFindings)
	}
}

func TestScanCommandLimits(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "requirements.txt"), strings.Repeat("fastapi==0.142.1\n", 50)+strings.Repeat("x", 300)+"==1\n")
	code, out, errOut := runScan(t, "--max-per-file", "3", "--max-line-bytes", "100", dir)
	if code != ExitFindings || strings.Count(out, "is pinned") != 3 {
		t.Errorf("exit %d, %d findings listed, want 3:\n%s", code, strings.Count(out, "is pinned"), out)
	}
	for _, want := range []string{"requirements.txt:51: line longer than 100 bytes", "not listed (--max-per-file 3): 47 more findings in this file"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	code, _, errOut = runScan(t, "--max-file-bytes", "100", dir)
	if !strings.Contains(errOut, "read only the first 100 bytes (--max-file-bytes)") || code != ExitFindings {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, flag := range []string{"--max-file-bytes", "--max-line-bytes", "--max-per-file", "--max-include-depth"} {
		if code, _, errOut := runScan(t, flag, "0", dir); code != ExitUsage {
			t.Errorf("%s 0: exit %d, want %d; stderr %s", flag, code, ExitUsage, errOut)
		}
	}
}
