package scan

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func builtinDB(t testing.TB) *DB {
	t.Helper()
	hs, err := BuiltinHazards()
	if err != nil {
		t.Fatal(err)
	}
	return NewDB(hs...)
}

// summary renders findings and problems as short sortable strings.
func summary(r *Result) (findings, problems []string) {
	for _, f := range r.Findings {
		what := f.Version
		if f.Kind == KindAdmits {
			what = f.Requirement + " admits " + f.Admits
		}
		findings = append(findings, fmt.Sprintf("%s %s:%d %s", f.Kind, f.Path, f.Line, what))
	}
	for _, p := range r.Problems {
		problems = append(problems, fmt.Sprintf("%s:%d", p.Path, p.Line))
	}
	return findings, problems
}

func TestScanTree(t *testing.T) {
	const sp = "lib/python3.12/site-packages"
	r := Scan(context.Background(), builtinDB(t), "testdata/tree")
	findings, problems := summary(r)
	wantFindings := []string{
		"admits testdata/tree/admits/pyproject.toml:5 fastapi>=0.135 admits 0.142.0",
		`admits testdata/tree/admits/pyproject.toml:10 fastapi[standard]~=0.142.1; python_version >= '3.9' admits 0.142.1`,
		"admits testdata/tree/admits/pyproject.toml:14 fastapi==0.142.3 admits 0.142.3",
		"locked testdata/tree/broken/requirements.txt:2 0.142.1",
		"installed testdata/tree/envs/bad/" + sp + "/fastapi-0.142.2.dist-info/METADATA:3 0.142.2",
		"locked testdata/tree/future/uv.lock:6 0.142.3",
		"locked testdata/tree/locked/uv.lock:12 0.142.4",
		"admits testdata/tree/pinned/requirements-dev.txt:2 fastapi>=0.140 admits 0.142.0",
		"locked testdata/tree/pinned/requirements.txt:2 0.142.0",
	}
	if !slices.Equal(findings, wantFindings) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(findings, "\n"), strings.Join(wantFindings, "\n"))
	}
	wantProblems := []string{
		"testdata/tree/broken/pyproject.toml:1",
		"testdata/tree/broken/requirements.txt:1",
		"testdata/tree/broken/uv.lock:4",
		"testdata/tree/envs/broken/" + sp + "/fastapi-0.142.1.dist-info/METADATA:0",
		"testdata/tree/future/uv.lock:0",
	}
	if !slices.Equal(problems, wantProblems) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
	for _, p := range r.Problems {
		if p.Message == "" {
			t.Errorf("problem without a message: %+v", p)
		}
	}
	// 12 manifests and lockfiles, 5 installed metadata files; never
	// src/notes.txt, or site-packages/fastapi/requirements.txt.
	if r.FilesRead != 17 {
		t.Errorf("read %d files, want 17", r.FilesRead)
	}
}

func TestScanFixes(t *testing.T) {
	r := Scan(context.Background(), builtinDB(t), "testdata/tree")
	bySuggest := map[string]string{}
	for _, f := range r.Findings {
		bySuggest[f.Path[len("testdata/tree/"):]+":"+itoa(f.Line)] = f.Suggest
	}
	for loc, want := range map[string]string{
		"admits/pyproject.toml:5":       "fastapi>=0.135,!=0.142.*",
		"admits/pyproject.toml:10":      `fastapi[standard]>=0.143.0; python_version >= '3.9'`, // ~=0.142.1 is ==0.142.*
		"admits/pyproject.toml:14":      "fastapi>=0.143.0",                                    // ==0.142.3,!=0.142.* allows nothing
		"pinned/requirements.txt:2":     "fastapi==0.143.0",
		"pinned/requirements-dev.txt:2": "fastapi>=0.140,!=0.142.*",
		"locked/uv.lock:12":             "fastapi!=0.142.*",
		"envs/bad/lib/python3.12/site-packages/fastapi-0.142.2.dist-info/METADATA:3": "fastapi>=0.143.0",
	} {
		if got := bySuggest[loc]; got != want {
			t.Errorf("%s: suggest %q, want %q", loc, got, want)
		}
	}
}

func TestScanGoldenJSON(t *testing.T) {
	r := Scan(context.Background(), builtinDB(t), "testdata/tree")
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "tree.golden.json")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestScanGoldenJSON -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("JSON differs from %s (rerun with -update and review the diff):\n%s", golden, buf.String())
	}
}

func TestWriteText(t *testing.T) {
	r := Scan(context.Background(), builtinDB(t), "testdata/tree/locked", "testdata/tree/admits/pyproject.toml")
	var out bytes.Buffer
	if err := WriteText(&out, r.Findings); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"fastapi >=0.142.0,<0.143.0 (4 findings)\n" +
			"  effect: FastAPI 0.142.0 to 0.142.4 configure OpenTelemetry OTLP export by\n          themselves",
		"  see:    fastapi/fastapi#16476\n  fixed:  0.143.0\n\n",
		"testdata/tree/locked/uv.lock:12: fastapi 0.142.4 is locked\n" +
			`  fix:    add "fastapi!=0.142.*" to the project's dependencies`,
		"testdata/tree/admits/pyproject.toml:5: fastapi>=0.135 in project.dependencies admits fastapi 0.142.0\n" +
			"  fix:    require fastapi>=0.135,!=0.142.*, then re-lock and reinstall\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "  ") && len(line) > 80 && strings.Count(line, " ") > 12 {
			t.Errorf("line not wrapped: %q", line)
		}
	}
	var probs bytes.Buffer
	if err := WriteProblems(&probs, []Problem{{Path: "a/uv.lock", Message: "m"}, {Path: "b", Line: 3, Message: "n"}}); err != nil {
		t.Fatal(err)
	}
	if probs.String() != "a/uv.lock: m\nb:3: n\n" {
		t.Errorf("problems: %q", probs.String())
	}
}

// TestWriteTextExplainsOnce: what a hazard is known to do is written
// once, however many findings it has, and once for each hazard; each
// finding has its own fix.
func TestWriteTextExplainsOnce(t *testing.T) {
	hazards, err := BuiltinHazards()
	if err != nil {
		t.Fatal(err)
	}
	extra, err := ParseHazards([]byte(`hazards:
  - package: otelwrap
    affected: ">=2.0,<2.2"
    exclusion: "<2.0"
    effect: otelwrap 2.0 and 2.1 add a span exporter of their own.
    reference: example/otelwrap#1
`), "extra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := range 5 {
		write(t, filepath.Join(dir, "svc"+itoa(i), "requirements.txt"), "fastapi==0.142.1\notelwrap==2.1.0\n")
	}
	r := Scan(context.Background(), NewDB(append(hazards, extra...)...), dir)
	if len(r.Findings) != 10 {
		t.Fatalf("%d findings, want 10: %+v", len(r.Findings), r.Findings)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r.Findings); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for what, n := range map[string]int{
		"  effect: FastAPI 0.142.0 to 0.142.4":               1,
		"  effect: otelwrap 2.0 and 2.1 add a span exporter": 1,
		"  see:    ": 2,
		"fastapi >=0.142.0,<0.143.0 (5 findings)\n":                 1,
		"otelwrap >=2.0,<2.2 (5 findings)\n":                        1,
		"  fix:    pin fastapi==0.143.0 and reinstall\n":            5,
		"  fix:    pin a release that satisfies <2.0 and reinstall": 5,
	} {
		if got := strings.Count(text, what); got != n {
			t.Errorf("%q %d times, want %d:\n%s", what, got, n, text)
		}
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScanSkipsAndFollows(t *testing.T) {
	dir := t.TempDir()
	bad := "fastapi==0.142.0\n"
	write(t, filepath.Join(dir, ".git", "requirements.txt"), bad)
	write(t, filepath.Join(dir, "node_modules", "x", "requirements.txt"), bad)
	write(t, filepath.Join(dir, "web", "node_modules", "requirements.txt"), bad)
	write(t, filepath.Join(dir, "requirements", "base.txt"), bad) // requirements/*.txt
	write(t, filepath.Join(dir, "requirements", "prod.in"), bad)  // requirements/*.in
	write(t, filepath.Join(dir, "requirements.in"), "fastapi\n")  // requirements*.in
	write(t, filepath.Join(dir, "docs", "requirements.md"), bad)  // not .txt
	write(t, filepath.Join(dir, "docs", "constraints.txt"), bad)  // constraints*.txt
	write(t, filepath.Join(dir, "docs", "constraints.md"), bad)   // not .txt
	write(t, filepath.Join(dir, "docs", "dev-requirements.txt"), "fastapi>=0.140\n")
	write(t, filepath.Join(dir, "docs", "notes.txt"), bad) // neither
	write(t, filepath.Join(dir, "deb", "dist-packages", "fastapi-0.142.4.dist-info", "METADATA"), "Name: fastapi\nVersion: 0.142.4\n")
	write(t, filepath.Join(dir, "build", "fastapi-0.142.4.dist-info", "METADATA"), "Name: fastapi\nVersion: 0.142.4\n") // not installed
	// A symlinked directory is not followed.
	if err := os.Symlink(filepath.Join(dir, "requirements"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	r := Scan(context.Background(), builtinDB(t), dir)
	var got []string
	for _, f := range r.Findings {
		rel, _ := filepath.Rel(dir, filepath.FromSlash(f.Path))
		got = append(got, string(f.Kind)+" "+filepath.ToSlash(rel))
	}
	want := []string{
		"installed deb/dist-packages/fastapi-0.142.4.dist-info/METADATA",
		"locked docs/constraints.txt",
		"admits docs/dev-requirements.txt",
		"admits requirements.in",
		"locked requirements/base.txt",
		"locked requirements/prod.in",
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings = %q, want %q", got, want)
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems: %+v", r.Problems)
	}
}

func TestScanUnreadable(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ok", "requirements.txt"), "fastapi==0.142.0\n")
	// A dangling symlink inside the root: reading it fails even as root.
	if err := os.MkdirAll(filepath.Join(dir, "dangling"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "missing"), filepath.Join(dir, "dangling", "uv.lock")); err != nil {
		t.Fatal(err)
	}
	// A site-packages whose dist-info has no METADATA.
	if err := os.MkdirAll(filepath.Join(dir, "venv", "site-packages", "fastapi-0.142.0.dist-info"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Permission-denied files and directories (not for root, who reads all).
	noPerm := os.Geteuid() != 0
	if noPerm {
		write(t, filepath.Join(dir, "locked", "pyproject.toml"), "[project]\n")
		if err := os.Chmod(filepath.Join(dir, "locked", "pyproject.toml"), 0); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "closed", "requirements.txt"), "fastapi==0.142.0\n")
		if err := os.Chmod(filepath.Join(dir, "closed"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.Chmod(filepath.Join(dir, "closed"), 0o755); err != nil {
				t.Error(err)
			}
		})
	}

	r := Scan(context.Background(), builtinDB(t), dir)
	if len(r.Findings) != 1 || !strings.HasSuffix(r.Findings[0].Path, "ok/requirements.txt") {
		t.Errorf("the scan did not go on: findings %+v", r.Findings)
	}
	want := map[string]string{
		"dangling/uv.lock": "no such file",
		"venv/site-packages/fastapi-0.142.0.dist-info/METADATA": "no such file",
	}
	if noPerm {
		want["locked/pyproject.toml"] = "permission denied"
		want["closed"] = "permission denied"
	}
	for _, p := range r.Problems {
		rel, _ := filepath.Rel(dir, filepath.FromSlash(p.Path))
		rel = filepath.ToSlash(rel)
		if sub, ok := want[rel]; ok && strings.Contains(p.Message, sub) {
			delete(want, rel)
		} else {
			t.Errorf("unexpected problem %s: %s", rel, p.Message)
		}
	}
	for path, msg := range want {
		t.Errorf("no problem for %s (%s)", path, msg)
	}
}

func TestScanExplicitPaths(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "METADATA")
	write(t, md, "Name: fastapi\nVersion: 0.142.4\n")
	reqs := filepath.Join(dir, "prod-pins.txt")
	write(t, reqs, "fastapi==0.142.1\n")
	other := filepath.Join(dir, "setup.cfg")
	write(t, other, "[metadata]\n")
	distInfo := filepath.Join(dir, "fastapi-0.142.3.dist-info")
	write(t, filepath.Join(distInfo, "METADATA"), "Name: fastapi\nVersion: 0.142.3\n")

	r := Scan(context.Background(), builtinDB(t), md, reqs, other, distInfo, filepath.Join(dir, "nope"), md)
	var got []string
	for _, f := range r.Findings {
		got = append(got, string(f.Kind)+" "+f.Version)
	}
	slices.Sort(got)
	if want := []string{"installed 0.142.3", "installed 0.142.4", "locked 0.142.1"}; !slices.Equal(got, want) {
		t.Errorf("findings = %q, want %q", got, want)
	}
	if len(r.Problems) != 2 {
		t.Fatalf("problems = %+v, want setup.cfg and nope", r.Problems)
	}
	for _, p := range r.Problems {
		t.Logf("%s: %s", p.Path, p.Message)
	}
}

func TestScanUserHazards(t *testing.T) {
	hs, err := ParseHazards([]byte(`
hazards:
  - package: opentelemetry-instrumentation-fastapi
    affected: "==0.50b0"
    exclusion: "!=0.50b0"
    effect: instruments twice
    reference: example/example#1
`), "user.yaml")
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := BuiltinHazards()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "requirements.txt"),
		"OpenTelemetry_Instrumentation.FastAPI==0.50b0\nfastapi==0.142.2\n")
	r := Scan(context.Background(), NewDB(append(builtin, hs...)...), dir)
	if len(r.Findings) != 2 || r.Findings[0].Package != "opentelemetry-instrumentation-fastapi" || r.Findings[1].Package != "fastapi" {
		t.Errorf("findings = %+v", r.Findings)
	}
}

func TestScanCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Scan(ctx, builtinDB(t), "testdata/tree")
	if r.FilesRead != 0 || len(r.Problems) != 0 {
		t.Errorf("a cancelled scan read %d files, problems %+v", r.FilesRead, r.Problems)
	}
}

// TestPoetryLockAdvice: a poetry.lock is fixed with Poetry's commands, a
// uv.lock with uv's.
func TestPoetryLockAdvice(t *testing.T) {
	dir := t.TempDir()
	lock := "[[package]]\nname = \"fastapi\"\nversion = \"0.142.1\"\n"
	write(t, filepath.Join(dir, "p", "poetry.lock"), lock)
	write(t, filepath.Join(dir, "u", "uv.lock"), "version = 1\n\n"+lock)
	r := Scan(context.Background(), builtinDB(t), dir)
	fixes := map[string]string{}
	for _, f := range r.Findings {
		fixes[filepath.Base(f.Path)] = f.Fix
	}
	if want := `add "!=0.142.*" to fastapi's constraint in pyproject.toml, then run poetry update fastapi`; fixes["poetry.lock"] != want {
		t.Errorf("poetry.lock: fix %q, want %q", fixes["poetry.lock"], want)
	}
	if !strings.Contains(fixes["uv.lock"], "uv lock --upgrade-package fastapi") {
		t.Errorf("uv.lock: fix %q", fixes["uv.lock"])
	}
}
