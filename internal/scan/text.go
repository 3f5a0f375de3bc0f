package scan

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Nothing read from a scanned tree is printed raw: file contents are quoted
// and cut (excerpt), and every string that reaches the text output or a
// message (paths included: a file name may hold control characters) has
// its non-printable bytes escaped (safeText).

// maxExcerpt is the longest piece of a file quoted in a message.
const maxExcerpt = 60

// excerpt quotes s for a message: Go syntax escapes for non-printable bytes
// and invalid UTF-8, cut after maxExcerpt bytes with a count of the rest.
func excerpt(s string) string {
	if len(s) <= maxExcerpt {
		return strconv.Quote(s)
	}
	cut := maxExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", strconv.Quote(s[:cut]), len(s)-cut)
}

// safeText escapes the non-printable runes and invalid bytes of s (as \x..
// or \u....) and cuts it after max bytes, saying how much was cut.
func safeText(s string, max int) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean && len(s) <= max {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if b.Len() >= max {
			fmt.Fprintf(&b, "... (%d more bytes)", len(s)-i)
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case !unicode.IsPrint(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Brief is f in one line, for a report that names the release behind a
// symptom (verify): what the file at where installs, locks or admits, what
// the hazard is known to do, and f.Fix, the advice scan prints under the
// same finding, e.g.
//
//	fastapi 0.142.2 is installed in .venv (known to attach a second
//	exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): upgrade to
//	fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what
//	runs from this environment
//
// where names the file or environment; every part is escaped and cut as
// the text output's are.
func (f Finding) Brief(where string) string {
	var what string
	switch f.Kind {
	case KindInstalled:
		what = fmt.Sprintf("%s %s is installed in %s", f.Package, f.Version, where)
	case KindLocked:
		if f.Requirement != "" {
			what = fmt.Sprintf("%s is pinned in %s", f.Requirement, where)
		} else {
			what = fmt.Sprintf("%s %s is locked in %s", f.Package, f.Version, where)
		}
	default:
		in := where
		if f.Section != "" {
			in += " " + f.Section
		}
		what = fmt.Sprintf("%s in %s admits %s %s", f.Requirement, in, f.Package, f.Admits)
	}
	known := "known to make telemetry arrive twice, " + f.Reference
	if f.Summary != "" {
		known = "known to " + f.Summary
	}
	return fmt.Sprintf("%s (%s): %s", safeText(what, 2*maxTextField), safeText(known, maxTextField), safeText(f.Fix, 2*maxTextField))
}

// String is p in one line, "path[:line]: message", escaped as WriteProblems
// writes it.
func (p Problem) String() string {
	return fmt.Sprintf("%s: %s", location(p.Path, p.Line), safeText(p.Message, maxTextField))
}
