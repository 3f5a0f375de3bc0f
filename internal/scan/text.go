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
