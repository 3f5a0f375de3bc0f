package scan

import (
	"context"
	"errors"
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
	kindPyproject
	kindRequirements
)

// Scan walks paths (the current directory if there are none) and returns
// what it finds. It skips .git and node_modules directories and does not
// follow symbolic links to directories. Inside a site-packages (or Debian
// dist-packages) directory it reads only the METADATA of *.dist-info and the
// PKG-INFO of *.egg-info directories. Elsewhere it reads uv.lock,
// pyproject.toml, requirements*.txt and requirements*.in, and *.txt / *.in
// inside a directory named requirements. A path that names a file is read
// whatever its name. Files it cannot read or parse are reported as
// problems; the scan goes on. Scan stops early, with what it has, when ctx
// is done.
func Scan(ctx context.Context, db *DB, paths ...string) *Result {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	s := &scanner{ctx: ctx, db: db, res: &Result{}, seen: make(map[string]bool), admits: make(map[admitsKey]admitsResult)}
	for _, root := range paths {
		if ctx.Err() != nil {
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
	return s.res
}

type scanner struct {
	ctx  context.Context
	db   *DB
	res  *Result
	seen map[string]bool // files already read, for overlapping roots
	// admits memoises Hazard.admittedBy: the same specifier recurs across
	// the projects of a tree.
	admits map[admitsKey]admitsResult
}

func (s *scanner) root(root string) {
	info, err := os.Stat(root)
	if err != nil {
		s.problem(root, 0, err.Error())
		return
	}
	if !info.IsDir() {
		kind := classify(root, filepath.Base(root))
		if kind == kindNone {
			kind = classifyExplicit(filepath.Base(root))
		}
		if kind == kindNone {
			s.problem(root, 0, "not a file doubletake scan reads (METADATA, uv.lock, pyproject.toml, requirements *.txt or *.in)")
			return
		}
		s.read(root, kind)
		return
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			s.problem(path, 0, unwrapPathError(err))
			return nil // WalkDir skips what it could not read
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if !d.IsDir() {
			if kind := classify(path, d.Name()); kind != kindNone {
				s.read(path, kind)
			}
			return nil
		}
		switch name := d.Name(); {
		case path != root && (name == ".git" || name == "node_modules"):
			return filepath.SkipDir
		case name == "site-packages" || name == "dist-packages":
			s.sitePackages(path)
			return filepath.SkipDir
		case path == root && isDistInfo(name):
			s.read(filepath.Join(path, metadataFile(name)), kindMetadata)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.problem(root, 0, err.Error())
	}
}

// sitePackages reads the metadata of every distribution installed in dir.
func (s *scanner) sitePackages(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.problem(dir, 0, unwrapPathError(err))
	}
	for _, e := range entries { // ReadDir returns what it read before an error
		if e.IsDir() && isDistInfo(e.Name()) {
			s.read(filepath.Join(dir, e.Name(), metadataFile(e.Name())), kindMetadata)
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
	switch {
	case name == "uv.lock":
		return kindUVLock
	case name == "pyproject.toml":
		return kindPyproject
	case !strings.HasSuffix(name, ".txt") && !strings.HasSuffix(name, ".in"):
		return kindNone
	case strings.HasPrefix(name, "requirements"):
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

// read opens one candidate file and checks it against the database.
func (s *scanner) read(path string, kind fileKind) {
	key := filepath.Clean(path)
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	if kind == kindMetadata {
		s.installed(path)
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		s.problem(path, 0, unwrapPathError(err))
		return
	}
	s.res.FilesRead++
	switch kind {
	case kindUVLock:
		s.uvLock(path, data)
	case kindPyproject:
		s.pyproject(path, data)
	case kindRequirements:
		s.requirements(path, data)
	}
}

func (s *scanner) add(f Finding) {
	f.Path = filepath.ToSlash(f.Path)
	s.res.Findings = append(s.res.Findings, f)
}

func (s *scanner) problem(path string, line int, msg string) {
	s.res.Problems = append(s.res.Problems, Problem{Path: filepath.ToSlash(path), Line: line, Message: msg})
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
