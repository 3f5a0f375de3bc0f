package scan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// fileKind is what the scanner makes of a file, judged by its name alone.
type fileKind int

const (
	kindNone fileKind = iota
	kindMetadata
	kindUVLock
	kindPoetryLock
	kindPyproject
	kindRequirements
	kindUnsupported
)

// Defaults of Options.
const (
	DefaultMaxFileBytes    = 16 << 20
	DefaultMaxLineBytes    = 64 << 10
	DefaultMaxPerFile      = 20
	DefaultMaxIncludeDepth = 10
)

// Options bound what one scan reads and reports. Zero fields take the
// defaults.
type Options struct {
	// MaxFileBytes caps the bytes read from one file. A requirements file
	// is read up to the cap and the cut is reported; a TOML file (uv.lock,
	// poetry.lock, pyproject.toml) over the cap is not read at all, since
	// half a TOML document cannot be parsed.
	MaxFileBytes int64
	// MaxLineBytes caps one logical line of a requirements file (after
	// joining continuations); a longer line is reported and skipped.
	MaxLineBytes int
	// MaxPerFile caps the findings, problems and not-judged entries listed
	// for one file; one more problem counts the rest.
	MaxPerFile int
	// MaxIncludeDepth caps how deep -r / -c includes nest.
	MaxIncludeDepth int
	// MaxFiles caps the files read in one scan, all paths together: once
	// it is reached the scan stops and sets Result.FileCapReached. 0 (the
	// default) reads every file the walk finds.
	MaxFiles int
}

func (o Options) withDefaults() Options {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.MaxPerFile <= 0 {
		o.MaxPerFile = DefaultMaxPerFile
	}
	if o.MaxIncludeDepth <= 0 {
		o.MaxIncludeDepth = DefaultMaxIncludeDepth
	}
	return o
}

// Scan is ScanWith with the default Options.
func Scan(ctx context.Context, db *DB, paths ...string) *Result {
	return ScanWith(ctx, db, Options{}, paths...)
}

// ScanWith walks paths (the current directory if there are none) and
// returns what it finds. It skips .git and node_modules directories and does
// not follow symbolic links to directories, nor symbolic links to files
// outside the root being walked. Inside a site-packages (or Debian
// dist-packages) directory it reads only the METADATA of *.dist-info and the
// PKG-INFO of *.egg-info directories. Elsewhere it reads uv.lock,
// poetry.lock, pyproject.toml, *requirements*.txt / .in, constraints*.txt,
// and *.txt / *.in inside a directory named requirements, plus the files
// these include with -r and -c. A path that names a file is read whatever
// its name. Only regular files are opened. Files it cannot read or parse are
// reported as problems; what it cannot judge is listed as not judged; the
// scan goes on. ScanWith stops early, with what it has, when ctx is done.
func ScanWith(ctx context.Context, db *DB, opts Options, paths ...string) *Result {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	s := &scanner{ctx: ctx, db: db, opts: opts.withDefaults(), res: &Result{}, seen: make(map[string]bool), admits: make(map[admitsKey]admitsResult)}
	for _, root := range paths {
		if ctx.Err() != nil || s.res.FileCapReached {
			break
		}
		s.root(root)
	}
	s.res.sort()
	if s.res.Findings == nil {
		s.res.Findings = []Finding{}
	}
	if s.res.Problems == nil {
		s.res.Problems = []Problem{}
	}
	if s.res.NotJudged == nil {
		s.res.NotJudged = []NotJudged{}
	}
	return s.res
}

type scanner struct {
	ctx  context.Context
	db   *DB
	opts Options
	res  *Result
	seen map[string]bool // files already read, for overlapping roots and includes
	// admits memoises Hazard.admittedBy: the same specifier recurs across
	// the projects of a tree. It is cleared when it reaches maxAdmitsMemo.
	admits map[admitsKey]admitsResult
	// cur counts what has been reported for the file being read.
	cur *fileReport
}

// maxAdmitsMemo bounds the memo of admittedBy answers.
const maxAdmitsMemo = 4096

// fileReport counts the entries reported for one file, to cap them.
type fileReport struct {
	path                          string
	findings, problems, notJudged int
}

func (s *scanner) root(root string) {
	info, err := os.Stat(root)
	if err != nil {
		s.problem(root, 0, unwrapPathError(err))
		return
	}
	if !info.IsDir() {
		kind := classify(root, filepath.Base(root))
		if kind == kindNone || kind == kindUnsupported {
			kind = classifyExplicit(filepath.Base(root))
		}
		if kind == kindNone {
			s.problem(root, 0, "not a file doubletake scan reads (METADATA, uv.lock, poetry.lock, pyproject.toml, requirements *.txt or *.in)")
			return
		}
		r, base, err := rootFor(root)
		if err != nil {
			s.problem(root, 0, unwrapPathError(err))
			return
		}
		defer r.Close()
		s.read(r, filepath.Dir(root), base, root, kind, 0)
		return
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		s.problem(root, 0, unwrapPathError(err))
		return
	}
	defer r.Close()
	rel := func(path string) string {
		rp, err := filepath.Rel(root, path)
		if err != nil {
			return path
		}
		return rp
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			s.problem(path, 0, unwrapPathError(err))
			return nil // WalkDir skips what it could not read
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if s.res.FileCapReached {
			return filepath.SkipAll
		}
		if !d.IsDir() {
			switch kind := classify(path, d.Name()); kind {
			case kindNone:
			case kindUnsupported:
				s.notJudged(path, 0, UnsupportedManifest, "a "+d.Name()+" file; doubletake scan does not read this kind of manifest")
			default:
				s.read(r, root, rel(path), path, kind, 0)
			}
			return nil
		}
		switch name := d.Name(); {
		case path != root && (name == ".git" || name == "node_modules"):
			return filepath.SkipDir
		case name == "site-packages" || name == "dist-packages":
			s.sitePackages(r, root, rel(path), path)
			return filepath.SkipDir
		case path == root && isDistInfo(name):
			s.read(r, root, metadataFile(name), filepath.Join(path, metadataFile(name)), kindMetadata, 0)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.problem(root, 0, err.Error())
	}
}

// sitePackages reads the metadata of every distribution installed in dir.
func (s *scanner) sitePackages(r *os.Root, rootDir, rel, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.problem(dir, 0, unwrapPathError(err))
	}
	for _, e := range entries { // ReadDir returns what it read before an error
		if s.ctx.Err() != nil || s.res.FileCapReached {
			return
		}
		if e.IsDir() && isDistInfo(e.Name()) {
			md := filepath.Join(e.Name(), metadataFile(e.Name()))
			s.read(r, rootDir, filepath.Join(rel, md), filepath.Join(dir, md), kindMetadata, 0)
		}
	}
}

func isDistInfo(name string) bool {
	return strings.HasSuffix(name, ".dist-info") || strings.HasSuffix(name, ".egg-info")
}

func metadataFile(distInfo string) string {
	if strings.HasSuffix(distInfo, ".egg-info") {
		return "PKG-INFO"
	}
	return "METADATA"
}

// classify judges a file found by the walk by its name and its parent
// directory's name.
func classify(path, name string) fileKind {
	switch name {
	case "uv.lock":
		return kindUVLock
	case "poetry.lock":
		return kindPoetryLock
	case "pyproject.toml":
		return kindPyproject
	case "Pipfile", "Pipfile.lock", "pdm.lock", "setup.py", "setup.cfg", "environment.yml", "environment.yaml", "pylock.toml", "conda-lock.yml":
		return kindUnsupported
	}
	if !strings.HasSuffix(name, ".txt") && !strings.HasSuffix(name, ".in") {
		return kindNone
	}
	switch {
	case strings.Contains(name, "requirements"):
		return kindRequirements
	case strings.HasPrefix(name, "constraints") && strings.HasSuffix(name, ".txt"):
		return kindRequirements
	case filepath.Base(filepath.Dir(path)) == "requirements":
		return kindRequirements
	}
	return kindNone
}

// classifyExplicit judges a file named on the command line.
func classifyExplicit(name string) fileKind {
	switch {
	case name == "METADATA" || name == "PKG-INFO":
		return kindMetadata
	case strings.HasSuffix(name, ".txt") || strings.HasSuffix(name, ".in"):
		return kindRequirements
	}
	return kindNone
}

// read opens one candidate file, rel inside root (shown as display), and
// checks it against the database. depth counts -r / -c includes.
func (s *scanner) read(root *os.Root, rootDir, rel, display string, kind fileKind, depth int) {
	key := filepath.Join(rootDir, rel)
	if s.seen[key] {
		return
	}
	if s.opts.MaxFiles > 0 && s.res.FilesRead >= s.opts.MaxFiles {
		s.res.FileCapReached = true
		return
	}
	s.seen[key] = true
	f, info, err := s.openRegular(root, rel, display)
	if err != nil {
		if !errors.Is(err, errSkipped) {
			s.problem(display, 0, unwrapPathError(err))
		}
		return
	}
	defer f.Close()
	s.res.FilesRead++
	prev := s.cur
	s.cur = &fileReport{path: filepath.ToSlash(display)}
	defer func() {
		s.closeReport()
		s.cur = prev
	}()
	if kind == kindMetadata {
		s.installed(display, io.LimitReader(f, s.opts.MaxFileBytes))
		return
	}
	if kind == kindRequirements {
		s.requirements(root, rootDir, rel, display, f, info.Size(), depth)
		return
	}
	data, err := readCapped(f, info, s.opts.MaxFileBytes)
	if err != nil {
		s.problem(display, 0, err.Error())
		return
	}
	switch kind {
	case kindUVLock:
		s.uvLock(display, data, true)
	case kindPoetryLock:
		s.uvLock(display, data, false)
	case kindPyproject:
		s.pyproject(display, data)
	}
}

// closeReport adds one problem that counts what the caps left out of the
// current file's report.
func (s *scanner) closeReport() {
	c := s.cur
	if c == nil {
		return
	}
	var parts []string
	max := s.opts.MaxPerFile
	for _, n := range []struct {
		n    int
		what string
	}{{c.findings, "finding"}, {c.problems, "problem"}, {c.notJudged, "not-judged entry"}} {
		if n.n > max {
			parts = append(parts, plural(n.n-max, "more "+n.what))
		}
	}
	if len(parts) > 0 {
		s.cur = nil
		s.res.Problems = append(s.res.Problems, Problem{Path: c.path, Message: fmt.Sprintf("not listed (--max-per-file %d): %s in this file", max, strings.Join(parts, ", "))})
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "entry") {
		return fmt.Sprintf("%d %sentries", n, strings.TrimSuffix(word, "entry"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// counted reports whether one more entry of the current file may be listed.
func (s *scanner) counted(path string, n *int) bool {
	if s.cur == nil || s.cur.path != path {
		return true
	}
	*n++
	return *n <= s.opts.MaxPerFile
}

func (s *scanner) add(f Finding) {
	f.Path = filepath.ToSlash(f.Path)
	if s.cur != nil && !s.counted(f.Path, &s.cur.findings) {
		return
	}
	s.res.Findings = append(s.res.Findings, f)
}

func (s *scanner) problem(path string, line int, msg string) {
	path = filepath.ToSlash(path)
	if s.cur != nil && !s.counted(path, &s.cur.problems) {
		return
	}
	s.res.Problems = append(s.res.Problems, Problem{Path: path, Line: line, Message: msg})
}

func (s *scanner) notJudged(path string, line int, reason Reason, detail string) {
	path = filepath.ToSlash(path)
	if s.cur != nil && !s.counted(path, &s.cur.notJudged) {
		return
	}
	s.res.NotJudged = append(s.res.NotJudged, NotJudged{Path: path, Line: line, Reason: reason, Detail: detail})
}

// fileError records err as a problem with path, at its line if it has one.
func (s *scanner) fileError(path string, err error) {
	var le *lineError
	if errors.As(err, &le) {
		s.problem(path, le.Line, err.Error())
		return
	}
	s.problem(path, 0, err.Error())
}

// unwrapPathError drops the path from an *fs.PathError, which the problem
// already carries.
func unwrapPathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}
