package scan

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// requirements streams one requirements file (rel inside root, shown as
// display) and checks each line as it is read. depth counts the -r / -c
// includes that led here.
func (s *scanner) requirements(root *os.Root, rootDir, rel, display string, r io.Reader, size int64, depth int) {
	cr := &capReader{r: r, n: s.opts.MaxFileBytes}
	err := readRequirementLines(cr, s.opts.MaxLineBytes, int(min(size, s.opts.MaxFileBytes)), cr.isCut, func(n int, text string, valid, tooLong bool) error {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		switch {
		case tooLong:
			s.problem(display, n, fmt.Sprintf("line longer than %d bytes (--max-line-bytes); not read", s.opts.MaxLineBytes))
		case !valid:
			// pip fails on the whole file here (it decodes it at once).
			s.problem(display, n, "line is not valid UTF-8, and the file declares no other encoding; the rest of the file is not read: "+excerpt(text))
			return errStop
		default:
			s.requirementsLine(root, rootDir, rel, display, n, text, depth)
		}
		return nil
	})
	switch {
	case err == nil:
	case errors.Is(err, errStop):
		return
	case errors.Is(err, errBinary):
		s.problem(display, 0, err.Error())
		return
	case s.ctx.Err() != nil:
		return
	default:
		s.problem(display, 0, unwrapPathError(err))
		return
	}
	if cr.cut {
		s.problem(display, 0, fmt.Sprintf("read only the first %d bytes (--max-file-bytes); the line they cut and the rest were not checked", s.opts.MaxFileBytes))
	}
}

// capReader reads at most n bytes of r, then reports EOF, noting whether
// r had more (cut).
type capReader struct {
	r   io.Reader
	n   int64
	cut bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		var probe [1]byte
		if k, _ := io.ReadFull(c.r, probe[:]); k > 0 {
			c.cut = true
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= int64(k)
	return k, err
}

func (c *capReader) isCut() bool { return c.cut }

// errStop ends reading a file whose reason is already reported.
var errStop = errors.New("stop")

// envVar matches what pip's ENV_VAR_RE expands.
var envVar = regexp.MustCompile(`\$\{[A-Z0-9_]+\}`)

// requirementsLine judges one logical line of a requirements file, as pip's
// preprocess and handle_line read it.
func (s *scanner) requirementsLine(root *os.Root, rootDir, rel, display string, n int, line string, depth int) {
	line = strings.TrimSpace(stripComment(line))
	if line == "" {
		return
	}
	if strings.Contains(line, "${") {
		if m := envVar.FindString(line); m != "" {
			s.notJudged(display, n, EnvVar, "uses "+excerpt(m)+", which pip expands from the environment at install time")
			return
		}
	}
	args, opts := breakArgsOptions(line)
	if args == "" {
		s.optionLine(root, rootDir, rel, display, n, opts, depth)
		return
	}
	s.requirementArgs(display, n, args)
}

// breakArgsOptions splits a line at the first space-separated token that
// starts with '-', as pip's break_args_options does.
func breakArgsOptions(line string) (args, opts string) {
	for i := 0; i < len(line); {
		if line[i] == '-' && (i == 0 || line[i-1] == ' ') {
			return strings.TrimSuffix(line[:max(i-1, 0)], " "), line[i:]
		}
		j := strings.IndexByte(line[i:], ' ')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return line, ""
}

// optionLine handles a line of options: -r / -c includes are followed,
// -e is not judged, everything else (--index-url, --hash, ...) is ignored.
func (s *scanner) optionLine(root *os.Root, rootDir, rel, display string, n int, opts string, depth int) {
	fields := strings.Fields(opts)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		name, value, hasValue := f, "", false
		switch {
		case strings.HasPrefix(f, "--"):
			name, value, hasValue = strings.Cut(f, "=")
		case len(f) > 2:
			name, value, hasValue = f[:2], f[2:], true
		}
		var long string
		switch name {
		case "-r", "--requirement", "--requirements":
			long = "--requirement"
		case "-c", "--constraint", "--constraints":
			long = "--constraint"
		case "-e", "--editable":
			long = "--editable"
		default:
			continue
		}
		if !hasValue {
			if i+1 >= len(fields) {
				s.problem(display, n, long+" needs a value")
				return
			}
			i++
			value = fields[i]
		}
		value = unquote(value)
		if long == "--editable" {
			reason := LocalPath
			if isVCS(value) {
				reason = VCS
			}
			s.notJudged(display, n, reason, "editable install "+excerpt(value)+"; its version is not in this file")
			return
		}
		s.include(root, rootDir, rel, display, n, long, value, depth)
		return // pip takes the first include of a line
	}
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// include reads a file named by -r or -c, relative to the including file,
// if it is inside the scanned root.
func (s *scanner) include(root *os.Root, rootDir, rel, display string, n int, opt, target string, depth int) {
	if hasScheme(target) {
		s.notJudged(display, n, DirectURL, opt+" "+excerpt(target)+" names a remote file; not fetched")
		return
	}
	var inc string
	if filepath.IsAbs(target) {
		absRoot, err := filepath.Abs(rootDir)
		if err != nil {
			s.problem(display, n, unwrapPathError(err))
			return
		}
		if inc, err = filepath.Rel(absRoot, target); err != nil {
			inc = ".."
		}
	} else {
		inc = filepath.Join(filepath.Dir(rel), target)
	}
	if !filepath.IsLocal(inc) {
		s.notJudged(display, n, SkipOutsideRoot, opt+" "+excerpt(target)+" is outside the scanned root; not read")
		return
	}
	if depth+1 > s.opts.MaxIncludeDepth {
		s.problem(display, n, fmt.Sprintf("%s %s: includes nest deeper than %d (--max-include-depth); not read", opt, excerpt(target), s.opts.MaxIncludeDepth))
		return
	}
	s.read(root, rootDir, inc, filepath.Join(rootDir, inc), kindRequirements, depth+1)
}

func hasScheme(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 {
		return strings.HasPrefix(strings.ToLower(s), "file:")
	}
	for _, c := range s[:i] {
		if !isAlnum(byte(c)) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isVCS(s string) bool {
	l := strings.ToLower(s)
	for _, p := range []string{"git+", "hg+", "svn+", "bzr+"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// requirementArgs judges the requirement part of a line: a named
// requirement, a URL or a path, as pip's parse_req_from_line tells them
// apart.
func (s *scanner) requirementArgs(display string, n int, args string) {
	if hasScheme(args) {
		loc, _, _ := strings.Cut(args, "; ")
		loc = strings.TrimSpace(loc)
		if isVCS(loc) {
			s.notJudged(display, n, VCS, "version control reference "+excerpt(loc)+"; not judged")
			return
		}
		if r, ok := requirementFromFileName(urlFileName(loc)); ok {
			s.requirement(display, n, r, "", Specifier{})
			return
		}
		s.notJudged(display, n, DirectURL, "URL "+excerpt(loc)+" names no version; not judged")
		return
	}
	loc, _, _ := strings.Cut(args, ";")
	loc = strings.TrimSpace(loc)
	// pip: an archive name, or a path, unless an '@' makes it "name @ URL".
	if before, _, hasAt := strings.Cut(loc, "@"); looksLikePath(before) || !hasAt && isArchive(loc) {
		if r, ok := requirementFromFileName(path.Base(filepath.ToSlash(loc))); ok && isArchive(loc) {
			s.requirement(display, n, r, "", Specifier{})
			return
		}
		s.notJudged(display, n, LocalPath, "local path "+excerpt(loc)+"; its version is not in this file")
		return
	}
	s.namedRequirement(display, n, args)
}

// namedRequirement judges a PEP 508 requirement. Lines naming a package the
// database does not list are checked only up to the name: parsing their
// specifiers would cost the time of the whole scan and could find nothing.
func (s *scanner) namedRequirement(display string, n int, line string) {
	i := 0
	for i < len(line) && (isAlnum(line[i]) || line[i] == '.' || line[i] == '-' || line[i] == '_') {
		i++
	}
	name := line[:i]
	if !validName(name) || i < len(line) && !strings.ContainsRune(" \t[(@;<>=!~", rune(line[i])) {
		_, err := ParseRequirement(line)
		if err == nil {
			err = fmt.Errorf("invalid requirement %s", excerpt(line))
		}
		s.problem(display, n, err.Error())
		return
	}
	if len(s.db.lookup(normalizeName(name))) == 0 {
		return
	}
	r, err := ParseRequirement(line)
	if err != nil {
		s.problem(display, n, err.Error())
		return
	}
	s.requirement(display, n, r, "", Specifier{})
}

// looksLikePath is pip's _looks_like_path.
func looksLikePath(s string) bool {
	return strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, ".")
}

// archiveExts are pip's ARCHIVE_EXTENSIONS.
var archiveExts = []string{".whl", ".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma"}

func isArchive(s string) bool {
	for _, e := range archiveExts {
		if len(s) >= len(e) && strings.EqualFold(s[len(s)-len(e):], e) {
			return true
		}
	}
	return false
}

// urlFileName returns the unescaped last path segment of a URL.
func urlFileName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return path.Base(u.Path)
}

// requirementFromFileName reads the name and version a wheel
// (name-version[-build]-python-abi-platform.whl) or an sdist
// (name-version.tar.gz, .zip, ...) file name carries, as ==version.
func requirementFromFileName(file string) (Requirement, bool) {
	lower := strings.ToLower(file)
	var name, version string
	switch {
	case strings.HasSuffix(lower, ".whl"):
		parts := strings.Split(file[:len(file)-len(".whl")], "-")
		if len(parts) != 5 && len(parts) != 6 {
			return Requirement{}, false
		}
		name, version = parts[0], parts[1]
	default:
		stem := ""
		for _, e := range archiveExts[1:] {
			if strings.HasSuffix(lower, e) {
				stem = file[:len(file)-len(e)]
				break
			}
		}
		// The version is the longest tail after a '-' that parses.
		for i := 0; i < len(stem); i++ {
			if stem[i] != '-' {
				continue
			}
			if _, err := ParseVersion(stem[i+1:]); err == nil && validName(stem[:i]) {
				name, version = stem[:i], stem[i+1:]
				break
			}
		}
	}
	if !validName(name) || version == "" {
		return Requirement{}, false
	}
	spec, err := ParseSpecifier("==" + version)
	if err != nil {
		return Requirement{}, false
	}
	return Requirement{Name: name, Specifier: spec}, true
}
