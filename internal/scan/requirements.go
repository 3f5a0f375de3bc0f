package scan

import (
	"bytes"
	"strings"
)

// requirementLine is a requirement read from a requirements file.
type requirementLine struct {
	Requirement
	Line int // first physical line
}

// parseRequirementsFile reads a pip requirements file. It joins lines ending
// in a backslash, drops comments (# at the start or after whitespace), option
// lines (-r, -c, -e, --index-url, ...), per-requirement options (--hash=...),
// and lines that are paths or URLs rather than named requirements.
func parseRequirementsFile(data []byte) ([]requirementLine, []lineError) {
	var reqs []requirementLine
	var errs []lineError
	var logical strings.Builder
	start := 0
	n := 0
	for len(data) > 0 {
		var raw []byte
		raw, data, _ = bytes.Cut(data, []byte("\n"))
		n++
		line := strings.TrimRight(string(raw), "\r")
		if logical.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			logical.WriteString(strings.TrimSuffix(line, `\`))
			logical.WriteByte(' ')
			if len(data) > 0 {
				continue
			}
		} else {
			logical.WriteString(line)
		}
		text := logical.String()
		logical.Reset()
		r, ok, err := parseRequirementLine(text)
		switch {
		case err != nil:
			errs = append(errs, lineError{Line: start, Msg: err.Error()})
		case ok:
			reqs = append(reqs, requirementLine{Requirement: r, Line: start})
		}
	}
	return reqs, errs
}

// parseRequirementLine parses one logical line of a requirements file. ok is
// false for lines that hold no named requirement.
func parseRequirementLine(line string) (r Requirement, ok bool, err error) {
	line = stripComment(line)
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '-' || isPathOrURL(line) {
		return Requirement{}, false, nil
	}
	// Per-requirement options (--hash, --config-settings, ...) follow the
	// requirement after whitespace.
	for i := 1; i+1 < len(line); i++ {
		if line[i] == '-' && line[i+1] == '-' && isSpace(line[i-1]) {
			line = strings.TrimSpace(line[:i])
			break
		}
	}
	r, err = ParseRequirement(line)
	if err != nil {
		return Requirement{}, false, err
	}
	return r, true, nil
}

// stripComment removes a # comment that starts the line or follows
// whitespace, as pip does.
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || isSpace(line[i-1])) {
			return line[:i]
		}
	}
	return line
}

// isPathOrURL reports whether a requirements line names an archive, a
// directory or a VCS URL instead of a distribution.
func isPathOrURL(line string) bool {
	switch line[0] {
	case '.', '/', '~', '\\':
		return true
	}
	scheme := strings.Index(line, "://")
	if scheme < 0 {
		return strings.HasPrefix(line, "file:")
	}
	at := strings.IndexByte(line, '@')
	return at < 0 || at > scheme // "name @ https://..." is a named requirement
}
