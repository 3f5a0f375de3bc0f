package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/scan"
)

// When verify finds a double export, it looks for the release behind it:
// it scans the environment CMD ran in with scan's engine and adds what it
// finds to the diagnosis. The scan is bounded (--scan-timeout,
// --scan-max-files), runs only after a double export (a clean run costs
// nothing), and never changes the verdict: what goes wrong becomes a note.

// maxScanNotes bounds the notes (scan problems) listed in a report.
const maxScanNotes = 10

// ReleaseScan is what the scan after a double export found.
type ReleaseScan struct {
	// Roots are the directories scanned, in order: the active virtual
	// environment, the interpreter's environment, the working directory.
	Roots []string `json:"roots"`
	// Lines say each finding in one line, as the text report prints it.
	Lines     []string       `json:"lines"`
	Findings  []scan.Finding `json:"findings"`
	NotJudged int            `json:"not_judged"`
	// Notes say what kept the scan from being complete: a deadline, the
	// file cap, a file it could not read.
	Notes     []string       `json:"notes"`
	FilesRead int            `json:"files_read"`
	Elapsed   analyze.Millis `json:"elapsed_ms"`
}

// doubleExport reports whether r has a finding diagnosed as two exporters
// in one process: spans, log records or metric streams written twice by
// one process.
func doubleExport(r *analyze.Report) bool {
	for _, f := range r.Findings {
		if f.Diagnosis == analyze.DiagTwoExporters {
			return true
		}
	}
	return false
}

// pythonName matches the names of Python interpreters: python, python3,
// python3.12, pypy3.
var pythonName = regexp.MustCompile(`^(python|pypy)[0-9.]*$`)

// scanRoots returns the directories to scan for the environment argv ran
// in, with env its environment and dir its working directory: the active
// virtual environment ($VIRTUAL_ENV), the interpreter's environment when
// argv[0] is a Python interpreter or lives in a virtual environment's bin
// (found by its pyvenv.cfg; nothing is run to find it), then dir, whose
// lockfiles, manifests and environments the walk finds. Paths are
// absolute; a root inside an earlier one is kept (the scanner reads no
// file twice), a repeated root is not.
func scanRoots(argv, env []string, dir string) []string {
	var roots []string
	add := func(p string) {
		if p == "" {
			return
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		p = filepath.Clean(p)
		if !slices.Contains(roots, p) {
			roots = append(roots, p)
		}
	}
	if v, ok := lookupEnv(env, "VIRTUAL_ENV"); ok {
		add(v)
	}
	if len(argv) > 0 {
		for _, r := range interpreterEnv(argv[0], env, dir) {
			add(r)
		}
	}
	add(dir)
	return roots
}

// interpreterEnv returns the environment of the program argv0 when it is a
// Python one: the virtual environment whose bin (Scripts) holds it, or, for
// an interpreter outside one, its prefix's site-packages and dist-packages
// directories.
func interpreterEnv(argv0 string, env []string, dir string) []string {
	exe := argv0
	if !strings.ContainsRune(argv0, filepath.Separator) {
		path, _ := lookupEnv(env, "PATH")
		exe = lookPathIn(argv0, path)
		if exe == "" {
			return nil
		}
	} else if !filepath.IsAbs(exe) {
		exe = filepath.Join(dir, exe)
	}
	// A virtual environment: ENV/bin/python, ENV/bin/uvicorn; the link
	// to the base interpreter is not followed.
	venv := filepath.Dir(filepath.Dir(exe))
	if fi, err := os.Stat(filepath.Join(venv, "pyvenv.cfg")); err == nil && fi.Mode().IsRegular() {
		return []string{venv}
	}
	if !pythonName.MatchString(filepath.Base(exe)) {
		return nil
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	prefix := filepath.Dir(filepath.Dir(exe))
	var out []string
	for _, pattern := range []string{
		"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
		"local/lib/python3*/dist-packages", "local/lib/python3*/site-packages", "Lib/site-packages",
	} {
		matches, _ := filepath.Glob(filepath.Join(prefix, pattern))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// lookPathIn is exec.LookPath over path rather than this process's PATH:
// CMD's environment is verify's, but a test may give another.
func lookPathIn(file, path string) string {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// scanForRelease scans roots with db, bounded by b, and returns what it
// found; dir is CMD's working directory, against which paths are shown.
// It never fails: a problem, a deadline, a cap or a panic becomes a note.
func scanForRelease(ctx context.Context, db *scan.DB, roots []string, dir string, b ScanOptions) (rs *ReleaseScan) {
	rs = &ReleaseScan{Lines: []string{}, Findings: []scan.Finding{}}
	for _, r := range roots {
		rs.Roots = append(rs.Roots, displayPath(r, dir))
	}
	started := time.Now()
	defer func() {
		rs.Elapsed = analyze.Millis(time.Since(started))
		if p := recover(); p != nil {
			rs.Notes = append(rs.Notes, fmt.Sprintf("the scan failed: %v", p))
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	res := scan.ScanWith(sctx, db, scan.Options{MaxFiles: b.MaxFiles}, roots...)
	rs.FilesRead, rs.NotJudged = res.FilesRead, len(res.NotJudged)
	// What is installed exports twice now, what is locked on the next
	// install, what a specifier admits maybe: the likeliest cause first.
	rank := map[scan.Kind]int{scan.KindInstalled: 0, scan.KindLocked: 1, scan.KindAdmits: 2}
	slices.SortStableFunc(res.Findings, func(a, b scan.Finding) int { return rank[a.Kind] - rank[b.Kind] })
	seen := map[string]bool{}
	for _, f := range res.Findings {
		line := f.Brief(findingWhere(f, dir))
		if seen[line] {
			continue // one environment reached from two roots
		}
		seen[line] = true
		rs.Findings = append(rs.Findings, f)
		rs.Lines = append(rs.Lines, line)
	}
	if sctx.Err() != nil {
		rs.Notes = append(rs.Notes, fmt.Sprintf("the scan stopped at its %s deadline (--scan-timeout) after reading %s; what it found until then is listed", b.Timeout, countNoun(res.FilesRead, "file", "files")))
	}
	if res.FileCapReached {
		rs.Notes = append(rs.Notes, fmt.Sprintf("the scan stopped after reading %s (--scan-max-files); what it found until then is listed", countNoun(res.FilesRead, "file", "files")))
	}
	for i, p := range res.Problems {
		if i == maxScanNotes {
			rs.Notes = append(rs.Notes, fmt.Sprintf("and %d more files the scan could not read or parse", len(res.Problems)-i))
			break
		}
		p.Path = displayPath(p.Path, dir)
		rs.Notes = append(rs.Notes, "not scanned: "+p.String())
	}
	if rs.NotJudged > 0 {
		rs.Notes = append(rs.Notes, fmt.Sprintf("%d entries not judged (URLs, VCS or path requirements, unsupported manifests, skipped links): doubletake scan lists them", rs.NotJudged))
	}
	return rs
}

// findingWhere names where f was found, relative to dir when inside it:
// the environment of an installed release (.venv), else the file and line
// (uv.lock:12).
func findingWhere(f scan.Finding, dir string) string {
	if f.Kind == scan.KindInstalled {
		return displayPath(envOf(filepath.FromSlash(f.Path)), dir)
	}
	w := displayPath(filepath.FromSlash(f.Path), dir)
	if f.Line > 0 {
		w += fmt.Sprintf(":%d", f.Line)
	}
	return w
}

// envOf returns the environment that holds an installed distribution's
// metadata file: ENV of ENV/lib/python3.12/site-packages/X.dist-info/METADATA
// (ENV/Lib/site-packages on Windows); the site-packages directory itself
// when the path has no such layout.
func envOf(path string) string {
	parts := strings.Split(path, string(filepath.Separator))
	i := len(parts) - 1
	for i >= 0 && parts[i] != "site-packages" && parts[i] != "dist-packages" {
		i--
	}
	if i < 0 {
		return filepath.Dir(path)
	}
	j := i
	if j > 0 && strings.HasPrefix(parts[j-1], "python") {
		j--
	}
	if j > 0 && strings.HasPrefix(strings.ToLower(parts[j-1]), "lib") {
		j--
	} else {
		j = i + 1 // not the usual layout: name the site-packages directory
	}
	env := strings.Join(parts[:j], string(filepath.Separator))
	if env == "" {
		return string(filepath.Separator)
	}
	return env
}

// displayPath is p relative to dir when it lies inside dir.
func displayPath(p, dir string) string {
	if rel, err := filepath.Rel(dir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel
	}
	return p
}

// text renders rs for the text report and the JUnit failures.
func (rs *ReleaseScan) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "releases known to export twice, in the command's environment (scanned %s: %s read in %s):",
		strings.Join(rs.Roots, ", "), countNoun(rs.FilesRead, "file", "files"), rs.Elapsed)
	if len(rs.Lines) == 0 {
		b.WriteString(" none known\n")
	} else {
		b.WriteString("\n")
	}
	for _, l := range rs.Lines {
		fmt.Fprintf(&b, "  - %s\n", l)
	}
	for _, n := range rs.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// scanRelease scans the environment of argv, or says why it could not.
func scanRelease(ctx context.Context, o ScanOptions, argv []string) *ReleaseScan {
	dir, err := os.Getwd()
	if err != nil {
		return &ReleaseScan{Lines: []string{}, Findings: []scan.Finding{}, Notes: []string{"the scan did not run: the working directory: " + err.Error()}}
	}
	db := o.Hazards
	if db == nil {
		hazards, err := scan.BuiltinHazards()
		if err != nil {
			return &ReleaseScan{Lines: []string{}, Findings: []scan.Finding{}, Notes: []string{"the scan did not run: " + err.Error()}}
		}
		db = scan.NewDB(hazards...)
	}
	return scanForRelease(ctx, db, scanRoots(argv, os.Environ(), dir), dir, o)
}
