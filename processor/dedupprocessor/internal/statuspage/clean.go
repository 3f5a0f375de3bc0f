package statuspage

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/doubletake/doubletake/internal/termsafe"
)

const (
	// NameBytes is the most bytes of a name (service, metric) the page
	// shows; longer ones are cut at a character boundary and marked.
	NameBytes = 256
	// AttrBytes bounds a metric stream's point attributes as the page
	// shows them ("key=value, ...").
	AttrBytes = 512
)

// CleanName makes a client-chosen name safe to show: invalid UTF-8,
// control and format characters become visible escapes, and it is cut to
// NameBytes bytes at a character boundary, saying how long it was. HTML
// escaping is the template's.
func CleanName(s string) string { return CleanNameBytes(s, NameBytes) }

// CleanNameBytes is CleanName, cut at max bytes.
func CleanNameBytes(s string, max int) string {
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= max {
			return b.String() + "… (" + strconv.Itoa(len(s)) + " bytes, cut at " + strconv.Itoa(i) + ")"
		}
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
			b.WriteRune(r)
		case termsafe.Unsafe(r):
			// Control and format characters (bidi overrides, zero-width)
			// would rewrite how the page reads.
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
