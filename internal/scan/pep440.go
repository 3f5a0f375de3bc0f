package scan

import (
	"errors"
	"fmt"
	"strings"

	pep440 "github.com/aquasecurity/go-pep440-version"
)

// This file wraps github.com/aquasecurity/go-pep440-version. The library
// parses and orders versions correctly and evaluates the ordered comparison
// clauses (<, <=, >, >=, and == / != without a wildcard), including PEP 440's
// special cases for pre-, post- and local versions. The wrapper does the rest,
// because the library (v0.0.1) gets these wrong:
//
//   - Prefix matching (==X.*, !=X.*) pads the candidate's release with the
//     wrong slice, so 1 does not match ==1.0.* and 1.2 is not excluded by
//     !=1.2.0.*; an explicit zero epoch (==0!1.*) never matches. The wrapper
//     implements prefix matching as pypa/packaging does (prefixMatch).
//   - ~=X with a pre-release X (PEP 440's own ~=1.4.5a4, which means
//     >=1.4.5a4, ==1.4.*) keeps the pre-release's release segment in the
//     prefix, so 1.4.6 is rejected. The wrapper computes the prefix itself.
//   - Specifiers are matched case-sensitively (>=V1.0 and >=1.0RC1 are
//     rejected), and local labels keep '-' and '_' instead of normalising
//     them to '.' (1.0+ubuntu-1 != 1.0+ubuntu.1). The wrapper hands the
//     library canonical strings only.
//   - === accepts only PEP 440-shaped versions; the wrapper compares strings.
//   - Check never excludes pre-releases, and WithPreRelease(true) also turns
//     off the rule that <3.1 rejects 3.1rc1. The wrapper applies PEP 440's
//     pre-release rule itself (Specifier.Contains) and never sets the option.
//   - NewSpecifiers accepts "||", clauses without commas and bare versions,
//     none of which PEP 440 allows; ParseSpecifier rejects them.

// Version is a PEP 440 version.
type Version struct {
	v   pep440.Version
	raw string
}

// ParseVersion parses a PEP 440 version, accepting the spellings PEP 440
// normalises (upper case, a leading v, -alpha.1, 1.0-5, ...).
func ParseVersion(s string) (Version, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return Version{}, errors.New("empty version")
	}
	v, err := pep440.Parse(canonicalInput(raw))
	if err != nil {
		return Version{}, fmt.Errorf("invalid version %s", excerpt(raw))
	}
	return Version{v: v, raw: raw}, nil
}

// canonicalInput lower-cases s and normalises the separators of its local
// label to '.', which the library leaves alone.
func canonicalInput(s string) string {
	s = strings.ToLower(s)
	if i := strings.IndexByte(s, '+'); i >= 0 {
		local := strings.Map(func(r rune) rune {
			if r == '-' || r == '_' {
				return '.'
			}
			return r
		}, s[i+1:])
		s = s[:i+1] + local
	}
	return s
}

// String returns the normalised form of v (1.0-Alpha.1 is 1.0a1).
func (v Version) String() string { return v.v.String() }

// Raw returns v as it was written.
func (v Version) Raw() string { return v.raw }

// IsPreRelease reports whether v is a pre-release or a development release.
func (v Version) IsPreRelease() bool { return v.v.IsPreRelease() }

// Compare returns -1, 0 or 1 as v sorts before, with or after o.
func (v Version) Compare(o Version) int { return v.v.Compare(o.v) }

// Specifier is a PEP 440 version specifier: clauses joined by commas, all of
// which a version must satisfy. The empty specifier allows every version.
type Specifier struct {
	clauses []clause
	// pre is set when a clause names a pre-release, which under PEP 440 makes
	// the specifier allow pre-releases.
	pre bool
}

type clause struct {
	op       string // ===, ==, !=, ~=, <=, >=, <, >
	version  string // as written, without a trailing .*
	wildcard bool   // ==X.* or !=X.*
	v        Version
	prefix   []string          // split prefix for wildcard and ~= clauses
	lib      pep440.Specifiers // library clause for ordered and exact comparisons
}

// ParseSpecifier parses a PEP 440 specifier such as ">=0.135,!=0.142.*".
func ParseSpecifier(s string) (Specifier, error) {
	var spec Specifier
	if strings.TrimSpace(s) == "" {
		return spec, nil
	}
	for _, part := range strings.Split(s, ",") {
		c, err := parseClause(strings.TrimSpace(part))
		if err != nil {
			return Specifier{}, fmt.Errorf("invalid specifier %s: %w", excerpt(strings.TrimSpace(s)), err)
		}
		if c.namesPreRelease() {
			spec.pre = true
		}
		spec.clauses = append(spec.clauses, c)
	}
	return spec, nil
}

func parseClause(s string) (clause, error) {
	if s == "" {
		return clause{}, errors.New("empty clause")
	}
	var c clause
	// Longest operators first.
	for _, op := range [...]string{"===", "==", "!=", "~=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(s, op) {
			c.op = op
			break
		}
	}
	if c.op == "" {
		return clause{}, fmt.Errorf("clause %s has no comparison operator", excerpt(s))
	}
	c.version = strings.TrimSpace(s[len(c.op):])
	if c.version == "" {
		return clause{}, fmt.Errorf("clause %s has no version", excerpt(s))
	}
	if c.op == "===" {
		if strings.ContainsFunc(c.version, func(r rune) bool { return r <= ' ' || r == ';' }) {
			return clause{}, fmt.Errorf("clause %s: arbitrary equality takes one word", excerpt(s))
		}
		c.v, _ = ParseVersion(c.version) // may fail: === compares strings
		return c, nil
	}
	if (c.op == "==" || c.op == "!=") && strings.HasSuffix(c.version, ".*") {
		c.wildcard = true
		c.version = strings.TrimSuffix(c.version, ".*")
	}
	v, err := ParseVersion(c.version)
	if err != nil {
		return clause{}, fmt.Errorf("clause %s: %w", excerpt(s), err)
	}
	c.v = v
	canon := v.String()
	if c.wildcard {
		canon += ".*"
	}
	// The library validates what PEP 440 forbids: wildcards with dev or local
	// versions or with ordered comparisons, ~= with one release segment,
	// local versions in ordered comparisons.
	if c.lib, err = pep440.NewSpecifiers(c.op + canon); err != nil {
		return clause{}, fmt.Errorf("clause %s: %s", excerpt(s), firstLine(err.Error()))
	}
	switch {
	case c.wildcard:
		c.prefix = splitVersion(v.String())
	case c.op == "~=":
		c.prefix = compatiblePrefix(v)
		if c.lib, err = pep440.NewSpecifiers(">=" + v.String()); err != nil {
			return clause{}, fmt.Errorf("clause %s: %s", excerpt(s), firstLine(err.Error()))
		}
	}
	return c, nil
}

// namesPreRelease reports whether the clause, by naming a pre-release,
// makes its specifier allow pre-releases (as pypa/packaging decides it).
func (c clause) namesPreRelease() bool {
	return c.op != "!=" && c.v.raw != "" && c.v.IsPreRelease()
}

// Contains reports whether v satisfies every clause of s.
//
// Pre-releases: PEP 440 excludes pre-releases (and dev releases) from every
// specifier unless the specifier itself names one, they are already present
// on the system, or nothing else satisfies it. Contains applies the first
// rule always and the second when includePre is set: callers pass true for
// versions that are installed or locked (they are present; a hazard covers
// them if its range does), and false when asking what a resolver may pick.
func (s Specifier) Contains(v Version, includePre bool) bool {
	if !includePre && !s.pre && v.IsPreRelease() {
		return false
	}
	for _, c := range s.clauses {
		if !c.matches(v) {
			return false
		}
	}
	return true
}

func (c clause) matches(v Version) bool {
	switch {
	case c.op == "===":
		return strings.EqualFold(v.raw, c.version)
	case c.wildcard:
		return prefixMatch(v, c.prefix) == (c.op == "==")
	case c.op == "~=":
		return c.lib.Check(v.v) && prefixMatch(v, c.prefix)
	default:
		return c.lib.Check(v.v)
	}
}

// Pin returns the version a specifier pins with a single == (no wildcard)
// or === clause.
func (s Specifier) Pin() (string, bool) {
	if len(s.clauses) != 1 {
		return "", false
	}
	c := s.clauses[0]
	if c.op == "===" || c.op == "==" && !c.wildcard {
		return c.version, true
	}
	return "", false
}

// IsEmpty reports whether s has no clauses and so allows every version.
func (s Specifier) IsEmpty() bool { return len(s.clauses) == 0 }

// And returns the specifier that allows what both s and o allow.
func (s Specifier) And(o Specifier) Specifier {
	if len(o.clauses) == 0 {
		return s
	}
	out := Specifier{pre: s.pre || o.pre}
	out.clauses = make([]clause, 0, len(s.clauses)+len(o.clauses))
	out.clauses = append(append(out.clauses, s.clauses...), o.clauses...)
	return out
}

// String returns the clauses as written, joined by commas.
func (s Specifier) String() string {
	var b strings.Builder
	for i, c := range s.clauses {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.op)
		b.WriteString(c.version)
		if c.wildcard {
			b.WriteString(".*")
		}
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
