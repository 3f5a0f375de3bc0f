package verify

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doubletake/doubletake/internal/scan"
)

// The scan after a double export: these tests run the engine in a working
// directory built in t.TempDir (t.Chdir: not parallel).

const fastapiLine = "fastapi 0.142.2 is installed in .venv (known to attach a second exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment"

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

// releaseScanOf is the release scan of a run that must have one.
func releaseScanOf(t *testing.T, r run) *ReleaseScan {
	t.Helper()
	if r.rep.ReleaseScan == nil {
		t.Fatalf("no release scan in the report: %+v\nstderr:\n%s", r.rep, r.stderr)
	}
	return r.rep.ReleaseScan
}

// TestNamesReleaseBehindDoubleExport: a double export run from a
// directory holding a virtual environment with fastapi 0.142.2 names the
// release and the exclusion, in text, JSON and JUnit; the verdict is the
// duplicates' own.
func TestNamesReleaseBehindDoubleExport(t *testing.T) {
	inTree(t, venvFiles(".venv", "fastapi", "0.142.2"))
	r := mustRun(t, "twice", nil)
	if r.rep.Verdict != Duplicates {
		t.Errorf("verdict %q, want duplicates", r.rep.Verdict)
	}
	rs := releaseScanOf(t, r)
	if !slices.Equal(rs.Lines, []string{fastapiLine}) {
		t.Errorf("lines %q, want %q", rs.Lines, fastapiLine)
	}
	if !slices.Equal(rs.Roots, []string{"."}) {
		t.Errorf("roots %q, want [.]", rs.Roots)
	}
	if len(rs.Findings) != 1 || rs.Findings[0].Exclusion != "fastapi!=0.142.*" || rs.Findings[0].Version != "0.142.2" {
		t.Errorf("findings %+v", rs.Findings)
	}
	rsJSON, _ := jsonOf(t, r.rep)["release_scan"].(map[string]any)
	if lines, _ := rsJSON["lines"].([]any); len(lines) != 1 || lines[0] != fastapiLine {
		t.Errorf("JSON release_scan: %v", rsJSON)
	}
	if x := html.UnescapeString(junitOf(t, r.rep)); !strings.Contains(x, "releases known to export twice") || !strings.Contains(x, fastapiLine) {
		t.Errorf("JUnit report does not carry the release:\n%s", x)
	}

	txt := textOf(t, r.rep, 1)
	if !strings.Contains(txt, "\nreleases known to export twice, in the command's environment (scanned .: 1 file read in ") ||
		!strings.Contains(txt, "\n  - "+fastapiLine+"\n") {
		t.Errorf("text report:\n%s", txt)
	}
	if i, j := strings.Index(txt, "releases known to export twice"), strings.Index(txt, "\nverdict: FAIL"); i < 0 || j < i {
		t.Errorf("the releases are not listed before the verdict:\n%s", txt)
	}
}

// TestCleanRunNeverScans: the same tree, exported once: no scan, no
// release named (a scan would find fastapi 0.142.2).
func TestCleanRunNeverScans(t *testing.T) {
	inTree(t, venvFiles(".venv", "fastapi", "0.142.2"))
	r := mustRun(t, "once", nil)
	if _, ok := jsonOf(t, r.rep)["release_scan"]; ok || r.rep.Verdict != Clean || r.rep.ReleaseScan != nil {
		t.Errorf("a clean run scanned: %+v", r.rep.ReleaseScan)
	}
	if txt := textOf(t, r.rep, 0); strings.Contains(txt, "releases known to export twice") || strings.Contains(txt, "fastapi") {
		t.Errorf("a clean run scanned:\n%s", txt)
	}
}

// TestNoScan: Scan.Disabled keeps the double export's report as it was.
func TestNoScan(t *testing.T) {
	inTree(t, venvFiles(".venv", "fastapi", "0.142.2"))
	r := mustRun(t, "twice", func(o *Options) { o.Scan.Disabled = true })
	if r.rep.Verdict != Duplicates || r.rep.ReleaseScan != nil {
		t.Errorf("verdict %q, release scan %+v; want duplicates and no scan", r.rep.Verdict, r.rep.ReleaseScan)
	}
}

// TestScanBounded: the file cap and the deadline stop the scan, and say
// so; the verdict stays.
func TestScanBounded(t *testing.T) {
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("svc%02d/requirements.txt", i)] = "fastapi==0.142.1\n"
	}
	inTree(t, files)

	r := mustRun(t, "twice", func(o *Options) { o.Scan.MaxFiles = 5 })
	rs := releaseScanOf(t, r)
	notes := strings.Join(rs.Notes, "\n")
	if r.rep.Verdict != Duplicates || rs.FilesRead != 5 || len(rs.Lines) != 5 ||
		!strings.Contains(notes, "the scan stopped after reading 5 files (--scan-max-files)") {
		t.Errorf("verdict %q, files_read %d, lines %q, notes %q", r.rep.Verdict, rs.FilesRead, rs.Lines, notes)
	}

	r = mustRun(t, "twice", func(o *Options) { o.Scan.Timeout = time.Nanosecond })
	rs = releaseScanOf(t, r)
	notes = strings.Join(rs.Notes, "\n")
	if r.rep.Verdict != Duplicates || rs.FilesRead != 0 || !strings.Contains(notes, "the scan stopped at its 1ns deadline (--scan-timeout) after reading 0 files") {
		t.Errorf("verdict %q, files_read %d, notes %q", r.rep.Verdict, rs.FilesRead, notes)
	}

	r = mustRun(t, "twice", nil)
	if rs := releaseScanOf(t, r); rs.FilesRead != 40 || len(rs.Lines) != 40 || len(rs.Notes) != 0 {
		t.Errorf("unbounded: files_read %d, %d lines, notes %q", rs.FilesRead, len(rs.Lines), rs.Notes)
	}
}

// TestScanErrorIsANote: a virtual environment that is not there and a
// lockfile that does not parse are notes; the verdict is the duplicates'.
func TestScanErrorIsANote(t *testing.T) {
	dir := inTree(t, map[string]string{"uv.lock": "[[package]\nname = \"fastapi\"\n"})
	missing := filepath.Join(dir, "..", "no-such-venv")
	t.Setenv("VIRTUAL_ENV", missing)
	r := mustRun(t, "twice", nil)
	if r.rep.Verdict != Duplicates {
		t.Errorf("verdict %q", r.rep.Verdict)
	}
	rs := releaseScanOf(t, r)
	notes := slices.Clone(rs.Notes)
	slices.Sort(notes) // the scan sorts problems by path
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "not scanned: "+filepath.Clean(missing)+": stat: no such file or directory") ||
		!strings.HasPrefix(notes[1], "not scanned: uv.lock:1: invalid TOML") || len(rs.Lines) != 0 {
		t.Errorf("notes %q, lines %q", notes, rs.Lines)
	}
	if txt := textOf(t, r.rep, 1); !strings.Contains(txt, ": none known\n  note: not scanned: ") {
		t.Errorf("text report:\n%s", txt)
	}
}

// TestHazardsDB: the scan after a double export uses the hazard database
// it is given, the built-in one without.
func TestHazardsDB(t *testing.T) {
	inTree(t, venvFiles("env", "otelwrap", "2.1.0"))
	extra, err := scan.ParseHazards([]byte(`hazards:
  - package: otelwrap
    affected: ">=2.0,<2.2"
    exclusion: "<2.0"
    effect: otelwrap 2.0 and 2.1 add an exporter.
    summary: add a span exporter of its own
    reference: example/otelwrap#1
`), "extra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, "twice", func(o *Options) { o.Scan.Hazards = scan.NewDB(extra...) })
	want := "otelwrap 2.1.0 is installed in env (known to add a span exporter of its own): install a release that satisfies otelwrap<2.0 (pip install 'otelwrap<2.0') and restart what runs from this environment"
	if lines := releaseScanOf(t, r).Lines; !slices.Equal(lines, []string{want}) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	r = mustRun(t, "twice", nil)
	if lines := releaseScanOf(t, r).Lines; len(lines) != 0 {
		t.Errorf("with the built-in database: lines %q", lines)
	}
}

// TestReleaseScanEscapes: a hostile environment name reaches neither the
// lines nor the text report raw.
func TestReleaseScanEscapes(t *testing.T) {
	files := venvFiles("env\x1b[2J", "fastapi", "0.142.2")
	inTree(t, files)
	r := mustRun(t, "twice", nil)
	txt := textOf(t, r.rep, 1)
	if strings.Contains(txt, "\x1b") || !strings.Contains(txt, `fastapi 0.142.2 is installed in env\x1b[2J (known to`) {
		t.Errorf("text report:\n%q", txt)
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

// TestReleaseOrder: what is installed (exports twice now) comes before
// what is locked (on the next install), before what a specifier admits
// (maybe, on the next resolve).
func TestReleaseOrder(t *testing.T) {
	files := venvFiles("zz-env", "fastapi", "0.142.2")
	files["a/pyproject.toml"] = "[project]\nname = \"a\"\nversion = \"1\"\ndependencies = [\"fastapi>=0.135\"]\n"
	files["b/uv.lock"] = "version = 1\n\n[[package]]\nname = \"fastapi\"\nversion = \"0.142.1\"\n"
	inTree(t, files)
	lines := releaseScanOf(t, mustRun(t, "twice", nil)).Lines
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "fastapi 0.142.2 is installed in zz-env ") ||
		!strings.HasPrefix(lines[1], "fastapi 0.142.1 is locked in b/uv.lock:5 ") ||
		!strings.HasPrefix(lines[2], "fastapi>=0.135 in a/pyproject.toml:4 project.dependencies admits fastapi 0.142.0 ") {
		t.Errorf("lines:\n%s", strings.Join(lines, "\n"))
	}
}
