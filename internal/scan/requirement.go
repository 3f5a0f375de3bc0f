package scan

import (
	"errors"
	"fmt"
	"strings"
)

// Requirement is a PEP 508 dependency specifier, such as
// `fastapi[standard]>=0.135,!=0.142.* ; python_version >= "3.9"`.
type Requirement struct {
	Name      string   // as written
	Extras    []string // as written
	Specifier Specifier
	URL       string // direct reference (name @ url); Specifier is then empty
	Marker    string // environment marker, not evaluated
}

// ParseRequirement parses one PEP 508 requirement. Markers are kept as text:
// the scan does not evaluate them, so a requirement counts whatever
// environment it is for.
func ParseRequirement(s string) (Requirement, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (isAlnum(s[i]) || s[i] == '.' || s[i] == '-' || s[i] == '_') {
		i++
	}
	var r Requirement
	r.Name = s[:i]
	if !validName(r.Name) {
		if r.Name == "" {
			return Requirement{}, fmt.Errorf("requirement %s does not start with a distribution name", excerpt(s))
		}
		return Requirement{}, fmt.Errorf("invalid distribution name %s", excerpt(r.Name))
	}
	rest := strings.TrimLeft(s[i:], " \t")

	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return Requirement{}, errors.New("unterminated extras: missing ]")
		}
		if list := strings.TrimSpace(rest[1:end]); list != "" {
			for e := range strings.SplitSeq(list, ",") {
				e = strings.TrimSpace(e)
				if !validName(e) {
					return Requirement{}, fmt.Errorf("invalid extra %s", excerpt(e))
				}
				r.Extras = append(r.Extras, e)
			}
		}
		rest = strings.TrimLeft(rest[end+1:], " \t")
	}

	var spec string
	switch {
	case strings.HasPrefix(rest, "@"):
		// A URL may contain ';': only one after whitespace starts the marker.
		url, marker, hasMarker := cutMarker(strings.TrimLeft(rest[1:], " \t"), true)
		r.URL = strings.TrimSpace(url)
		if r.URL == "" {
			return Requirement{}, errors.New("empty URL after @")
		}
		if strings.ContainsFunc(r.URL, func(c rune) bool { return c <= ' ' }) {
			return Requirement{}, fmt.Errorf("URL %s contains whitespace", excerpt(r.URL))
		}
		rest = ""
		if hasMarker {
			rest = ";" + marker
		}
	case strings.HasPrefix(rest, "("):
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return Requirement{}, errors.New("unterminated version specifier: missing )")
		}
		spec = rest[1:end]
		rest = strings.TrimLeft(rest[end+1:], " \t")
	default:
		var marker string
		var hasMarker bool
		spec, marker, hasMarker = cutMarker(rest, false)
		rest = ""
		if hasMarker {
			rest = ";" + marker
		}
	}

	switch {
	case rest == "":
	case rest[0] == ';':
		r.Marker = strings.TrimSpace(rest[1:])
		if r.Marker == "" {
			return Requirement{}, errors.New("empty environment marker after ;")
		}
	default:
		return Requirement{}, fmt.Errorf("unexpected %s after the version specifier", excerpt(rest))
	}

	var err error
	if r.Specifier, err = ParseSpecifier(spec); err != nil {
		return Requirement{}, err
	}
	return r, nil
}

// cutMarker splits s at the first ';' (preceded by whitespace if
// needSpace).
func cutMarker(s string, needSpace bool) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ';' && (!needSpace || i > 0 && isSpace(s[i-1])) {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// NormalizedName returns the PEP 503 form of r's name.
func (r Requirement) NormalizedName() string { return normalizeName(r.Name) }

// String formats r as a PEP 508 requirement.
func (r Requirement) String() string {
	return r.withSpecifier(r.Specifier)
}

// withSpecifier formats r with spec in place of its own specifier.
func (r Requirement) withSpecifier(spec Specifier) string {
	var b strings.Builder
	b.WriteString(r.Name)
	if len(r.Extras) > 0 {
		b.WriteByte('[')
		b.WriteString(strings.Join(r.Extras, ","))
		b.WriteByte(']')
	}
	if r.URL != "" {
		b.WriteString(" @ ")
		b.WriteString(r.URL)
		if r.Marker != "" {
			b.WriteByte(' ')
		}
	} else {
		b.WriteString(spec.String())
	}
	if r.Marker != "" {
		b.WriteString("; ")
		b.WriteString(r.Marker)
	}
	return b.String()
}
