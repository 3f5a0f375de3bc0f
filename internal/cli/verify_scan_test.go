package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The scan after a double export: these tests run verify in process, in a
// working directory built in t.TempDir (t.Chdir: not parallel).

const fastapiLine = "fastapi 0.142.2 is installed in .venv (known to attach a second exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): pin fastapi!=0.142.*"

// writeTree writes files (path: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// venvFiles is a virtual environment named name with dist installed.
func venvFiles(name, dist, version string) map[string]string {
	sp := name + "/lib/python3.12/site-packages/"
	return map[string]string{
		name + "/pyvenv.cfg":                              "home = /usr/bin\nversion = 3.12.3\n",
		sp + dist + "-" + version + ".dist-info/METADATA": fmt.Sprintf("Metadata-Version: 2.4\nName: %s\nVersion: %s\n\n", dist, version),
	}
}

// inTree makes a working directory holding files and enters it, with no
// virtual environment active.
func inTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	t.Chdir(dir)
	t.Setenv("VIRTUAL_ENV", "")
	return dir
}

func releaseScanOf(t *testing.T, r result) map[string]any {
	t.Helper()
	rs, ok := jsonReport(t, r)["release_scan"].(map[string]any)
	if !ok {
		t.Fatalf("no release_scan in the report:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	return rs
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestVerifyNamesReleaseBehindDoubleExport: a double export run from a
// directory holding a virtual environment with fastapi 0.142.2 names the
// release and the exclusion, in text, JSON and JUnit; the verdict is the
// duplicates' own.
func TestVerifyNamesReleaseBehindDoubleExport(t *testing.T) {
	inTree(t, venvFiles(".venv", "fastapi", "0.142.2"))
	junit := filepath.Join(t.TempDir(), "verify.xml")

	r := verify(t, "twice", "--format", "json", "--junit", junit)
	if r.code != ExitFindings {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if v := jsonReport(t, r)["verdict"]; v != "duplicates" {
		t.Errorf("verdict %v, want duplicates", v)
	}
	rs := releaseScanOf(t, r)
	if lines := strs(rs["lines"]); !slices.Equal(lines, []string{fastapiLine}) {
		t.Errorf("lines %q, want %q", lines, fastapiLine)
	}
	if roots := strs(rs["roots"]); !slices.Equal(roots, []string{"."}) {
		t.Errorf("roots %q, want [.]", roots)
	}
	fs, _ := rs["findings"].([]any)
	if len(fs) != 1 || fs[0].(map[string]any)["exclusion"] != "fastapi!=0.142.*" || fs[0].(map[string]any)["version"] != "0.142.2" {
		t.Errorf("findings %v", rs["findings"])
	}
	x, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(x), "releases known to export twice") || !strings.Contains(string(x), fastapiLine) {
		t.Errorf("JUnit report (%v) does not carry the release:\n%s", err, x)
	}

	r = verify(t, "twice")
	if r.code != ExitFindings || !strings.Contains(r.stdout, "\nreleases known to export twice, in the command's environment (scanned .: 1 file read in ") ||
		!strings.Contains(r.stdout, "\n  - "+fastapiLine+"\n") {
		t.Errorf("text report (exit %d):\n%s", r.code, r.stdout)
	}
	if i, j := strings.Index(r.stdout, "releases known to export twice"), strings.Index(r.stdout, "\nverdict: FAIL"); i < 0 || j < i {
		t.Errorf("the releases are not listed before the verdict:\n%s", r.stdout)
	}
}

// TestVerifyCleanRunNeverScans: the same tree, exported once: no scan, no
// release named (a scan would find fastapi 0.142.2).
func TestVerifyCleanRunNeverScans(t *testing.T) {
	inTree(t, venvFiles(".venv", "fastapi", "0.142.2"))
	r := verify(t, "once", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, ok := jsonReport(t, r)["release_scan"]; ok || strings.Contains(r.stdout, "fastapi") {
		t.Errorf("a clean run scanned:\n%s", r.stdout)
	}
	r = verify(t, "once")
	if r.code != ExitOK || strings.Contains(r.stdout, "releases known to export twice") || strings.Contains(r.stdout, "fastapi") {
		t.Errorf("a clean run scanned (exit %d):\n%s", r.code, r.stdout)
	}
}

// TestVerifyNoScan: --no-scan keeps the double export's report as it was.
func TestVerifyNoScan(t *testing.T) {
	inTree(t, venvFiles(".venv", "fastapi", "0.142.2"))
	r := verify(t, "twice", "--format", "json", "--no-scan")
	if r.code != ExitFindings {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	if _, ok := jsonReport(t, r)["release_scan"]; ok {
		t.Errorf("--no-scan scanned:\n%s", r.stdout)
	}
}

// TestVerifyScanBounded: the file cap and the deadline stop the scan,
// and say so; the verdict stays.
func TestVerifyScanBounded(t *testing.T) {
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("svc%02d/requirements.txt", i)] = "fastapi==0.142.1\n"
	}
	inTree(t, files)

	r := verify(t, "twice", "--format", "json", "--scan-max-files", "5")
	rs := releaseScanOf(t, r)
	notes := strings.Join(strs(rs["notes"]), "\n")
	if r.code != ExitFindings || rs["files_read"] != 5.0 || len(strs(rs["lines"])) != 5 ||
		!strings.Contains(notes, "the scan stopped after reading 5 files (--scan-max-files)") {
		t.Errorf("exit %d, files_read %v, lines %q, notes %q", r.code, rs["files_read"], strs(rs["lines"]), notes)
	}

	r = verify(t, "twice", "--format", "json", "--scan-timeout", "1ns")
	rs = releaseScanOf(t, r)
	notes = strings.Join(strs(rs["notes"]), "\n")
	if r.code != ExitFindings || rs["files_read"] != 0.0 || !strings.Contains(notes, "the scan stopped at its 1ns deadline (--scan-timeout) after reading 0 files") {
		t.Errorf("exit %d, files_read %v, notes %q", r.code, rs["files_read"], notes)
	}

	r = verify(t, "twice", "--format", "json")
	if rs := releaseScanOf(t, r); rs["files_read"] != 40.0 || len(strs(rs["lines"])) != 40 || len(strs(rs["notes"])) != 0 {
		t.Errorf("unbounded: files_read %v, %d lines, notes %q", rs["files_read"], len(strs(rs["lines"])), strs(rs["notes"]))
	}
}

// TestVerifyScanErrorIsANote: a virtual environment that is not there and
// a lockfile that does not parse are notes; the verdict is the duplicates'.
func TestVerifyScanErrorIsANote(t *testing.T) {
	dir := inTree(t, map[string]string{"uv.lock": "[[package]\nname = \"fastapi\"\n"})
	missing := filepath.Join(dir, "..", "no-such-venv")
	t.Setenv("VIRTUAL_ENV", missing)
	r := verify(t, "twice", "--format", "json")
	if r.code != ExitFindings {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stdout)
	}
	rep := jsonReport(t, r)
	if rep["verdict"] != "duplicates" {
		t.Errorf("verdict %v", rep["verdict"])
	}
	rs := releaseScanOf(t, r)
	notes := strs(rs["notes"])
	slices.Sort(notes) // the scan sorts problems by path
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "not scanned: "+filepath.Clean(missing)+": stat: no such file or directory") ||
		!strings.HasPrefix(notes[1], "not scanned: uv.lock:1: invalid TOML") || len(strs(rs["lines"])) != 0 {
		t.Errorf("notes %q, lines %q", notes, strs(rs["lines"]))
	}
	r = verify(t, "twice")
	if !strings.Contains(r.stdout, ": none known\n  note: not scanned: ") {
		t.Errorf("text report:\n%s", r.stdout)
	}
}

// TestVerifyHazardsFile: --hazards reaches the scan after a double export,
// with scan's loader: a file that does not validate is a usage error.
func TestVerifyHazardsFile(t *testing.T) {
	dir := inTree(t, venvFiles("env", "otelwrap", "2.1.0"))
	hz := filepath.Join(dir, "..", "extra.yaml")
	writeTree(t, filepath.Dir(hz), map[string]string{"extra.yaml": `hazards:
  - package: otelwrap
    affected: ">=2.0,<2.2"
    exclusion: "<2.0"
    effect: otelwrap 2.0 and 2.1 add an exporter.
    summary: add a span exporter of its own
    reference: example/otelwrap#1
`})
	r := verify(t, "twice", "--format", "json", "--hazards", hz)
	want := "otelwrap 2.1.0 is installed in env (known to add a span exporter of its own): pin otelwrap<2.0"
	if lines := strs(releaseScanOf(t, r)["lines"]); !slices.Equal(lines, []string{want}) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	r = verify(t, "twice", "--format", "json")
	if lines := strs(releaseScanOf(t, r)["lines"]); len(lines) != 0 {
		t.Errorf("without --hazards: lines %q", lines)
	}

	bad := filepath.Join(dir, "bad.yaml")
	writeTree(t, dir, map[string]string{"bad.yaml": "hazards:\n  - package: x\n"})
	r = verify(t, "twice", "--hazards", bad)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "verify: --hazards: invalid hazards file:") || !strings.Contains(r.stderr, "hazards[0] (x): affected: required") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestVerifyReleaseScanEscapes: a hostile environment name and version
// reach neither the terminal nor the JSON raw.
func TestVerifyReleaseScanEscapes(t *testing.T) {
	files := venvFiles("env\x1b[2J", "fastapi", "0.142.2")
	for p := range files {
		if strings.HasSuffix(p, "METADATA") {
			files[p] = "Metadata-Version: 2.4\nName: fastapi\nVersion: 0.142.2\n\n"
		}
	}
	inTree(t, files)
	r := verify(t, "twice")
	if strings.Contains(r.stdout, "\x1b") || !strings.Contains(r.stdout, `fastapi 0.142.2 is installed in env\x1b[2J (known to`) {
		t.Errorf("text report:\n%q", r.stdout)
	}
}

func TestVerifyScanUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--scan-timeout", "0s"}, {"--scan-max-files", "0"}} {
		r := verify(t, "", append(args, "--", "true")...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

// TestScanRoots: where verify looks, found by reading files, never by
// running anything.
func TestScanRoots(t *testing.T) {
	base := t.TempDir()
	writeTree(t, base, venvFiles("proj/.venv", "fastapi", "0.142.2"))
	writeTree(t, base, venvFiles("elsewhere/venv", "fastapi", "0.143.0"))
	writeTree(t, base, map[string]string{
		"usr/lib/python3.12/site-packages/.keep": "", "usr/lib/python3/dist-packages/.keep": "",
		"usr/local/lib/python3.12/dist-packages/.keep": "", "proj/uv.lock": "",
	})
	exe := func(p string) string {
		full := filepath.Join(base, filepath.FromSlash(p))
		writeTree(t, base, map[string]string{p: "#!/bin/sh\n"})
		if err := os.Chmod(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	venvPython := exe("proj/.venv/bin/python")
	exe("proj/.venv/bin/uvicorn")
	exe("elsewhere/venv/bin/pytest")
	sysPython := exe("usr/bin/python3")
	exe("usr/bin/node")
	proj := filepath.Join(base, "proj")
	abs := func(p string) string { return filepath.Join(base, filepath.FromSlash(p)) }

	for _, c := range []struct {
		name string
		argv []string
		env  []string
		want []string
	}{
		{"not python", []string{"node", "app.mjs"}, []string{"PATH=" + abs("usr/bin")}, []string{proj}},
		{"venv python by path", []string{venvPython, "-m", "pytest"}, nil, []string{abs("proj/.venv"), proj}},
		{"venv script on PATH", []string{"uvicorn", "app:app"}, []string{"PATH=" + abs("proj/.venv/bin")}, []string{abs("proj/.venv"), proj}},
		{"relative path", []string{".venv/bin/python"}, nil, []string{abs("proj/.venv"), proj}},
		{"VIRTUAL_ENV", []string{"node"}, []string{"VIRTUAL_ENV=" + abs("elsewhere/venv")}, []string{abs("elsewhere/venv"), proj}},
		{"VIRTUAL_ENV and its script", []string{"pytest"}, []string{"VIRTUAL_ENV=" + abs("elsewhere/venv"), "PATH=" + abs("elsewhere/venv/bin")}, []string{abs("elsewhere/venv"), proj}},
		{"system python", []string{"python3"}, []string{"PATH=" + abs("usr/bin")}, []string{
			abs("usr/lib/python3.12/site-packages"), abs("usr/lib/python3/dist-packages"), abs("usr/local/lib/python3.12/dist-packages"), proj}},
		{"system python by path", []string{sysPython}, nil, []string{
			abs("usr/lib/python3.12/site-packages"), abs("usr/lib/python3/dist-packages"), abs("usr/local/lib/python3.12/dist-packages"), proj}},
		{"not on PATH", []string{"python3"}, []string{"PATH=" + abs("nowhere")}, []string{proj}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := scanRoots(c.argv, c.env, proj); !slices.Equal(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestEnvOf(t *testing.T) {
	for in, want := range map[string]string{
		"/w/.venv/lib/python3.12/site-packages/fastapi-0.142.2.dist-info/METADATA":   "/w/.venv",
		"/w/.venv/lib64/python3.12/site-packages/fastapi-0.142.2.dist-info/METADATA": "/w/.venv",
		"/w/env/Lib/site-packages/fastapi-0.142.2.dist-info/METADATA":                "/w/env",
		"/usr/lib/python3/dist-packages/fastapi-0.142.2.dist-info/METADATA":          "/usr",
		"/w/site-packages/fastapi-0.142.2.dist-info/METADATA":                        "/w/site-packages",
		"/w/fastapi-0.142.2.dist-info/METADATA":                                      "/w/fastapi-0.142.2.dist-info",
	} {
		if got := envOf(in); got != want {
			t.Errorf("envOf(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestVerifyReleaseOrder: what is installed (exports twice now) comes
// before what is locked (on the next install), before what a specifier
// admits (maybe, on the next resolve).
func TestVerifyReleaseOrder(t *testing.T) {
	files := venvFiles("zz-env", "fastapi", "0.142.2")
	files["a/pyproject.toml"] = "[project]\nname = \"a\"\nversion = \"1\"\ndependencies = [\"fastapi>=0.135\"]\n"
	files["b/uv.lock"] = "version = 1\n\n[[package]]\nname = \"fastapi\"\nversion = \"0.142.1\"\n"
	inTree(t, files)
	r := verify(t, "twice", "--format", "json")
	lines := strs(releaseScanOf(t, r)["lines"])
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "fastapi 0.142.2 is installed in zz-env ") ||
		!strings.HasPrefix(lines[1], "fastapi 0.142.1 is locked in b/uv.lock:5 ") ||
		!strings.HasPrefix(lines[2], "fastapi>=0.135 in a/pyproject.toml:4 project.dependencies admits fastapi 0.142.0 ") {
		t.Errorf("lines:\n%s", strings.Join(lines, "\n"))
	}
}
