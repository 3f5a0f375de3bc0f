// Package sanitize makes a string taken from telemetry safe to put on a
// metric label, in a log line or on a terminal.
package sanitize

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/doubletake/doubletake/internal/termsafe"
)

// MaxLabelBytes bounds what Label returns.
const MaxLabelBytes = 256

// ellipsis ends a label that was cut.
const ellipsis = "…"

// Label returns s as valid UTF-8 of at most MaxLabelBytes bytes with
// nothing in it that a terminal or a text format acts on: each byte of an
// invalid UTF-8 sequence becomes \xHH; a control character (C0, DEL, C1)
// \xHH or \uHHHH; an invisible format character (bidirectional overrides
// and isolates, zero-width characters, the BOM) \uHHHH. A longer result
// is cut at a character (or escape) boundary and ends in "…". A string
// that needs none of it is returned as it is, without allocating.
func Label(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(MaxLabelBytes + 16)
	fit := 0 // the length of b, at a piece boundary, that leaves room for the ellipsis
	for i := 0; i < len(s) && b.Len() <= MaxLabelBytes; {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && termsafe.Unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case termsafe.Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
		if b.Len() <= MaxLabelBytes-len(ellipsis) {
			fit = b.Len()
		}
	}
	out := b.String()
	if len(out) <= MaxLabelBytes { // all of s, and it fits
		return out
	}
	return out[:fit] + ellipsis
}

// clean: s is short enough, valid UTF-8, and has nothing to escape.
func clean(s string) bool {
	if len(s) > MaxLabelBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return false
		}
		if c >= 0x80 {
			if !utf8.ValidString(s[i:]) {
				return false
			}
			for _, r := range s[i:] {
				if termsafe.Unsafe(r) {
					return false
				}
			}
			return true
		}
	}
	return true
}
