package sanitize

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/doubletake/doubletake/internal/termsafe"
)

func TestLabel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"checkout", "checkout"},
		{"café ☕ 服务", "café ☕ 服务"},
		{"literal \uFFFD stays", "literal \uFFFD stays"},
		{"bad\xffutf8\xc3", `bad\xffutf8\xc3`},
		{"\x1b[2J\x1b]0;pwned\x07", `\x1b[2J\x1b]0;pwned\x07`},
		{"line\nbreak\r\ttab\x00nul\x7fdel", `line\x0abreak\x0d\x09tab\x00nul\x7fdel`},
		{"c1\u0085\u009b", `c1\u0085\u009b`},
		{"bidi\u202egnp.exe\u2066x\u2069", `bidi\u202egnp.exe\u2066x\u2069`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{strings.Repeat("a", MaxLabelBytes), strings.Repeat("a", MaxLabelBytes)},
		{strings.Repeat("a", MaxLabelBytes+1), strings.Repeat("a", MaxLabelBytes-len(ellipsis)) + ellipsis},
		// Cut at a character boundary: 2-byte runes.
		{strings.Repeat("é", MaxLabelBytes), strings.Repeat("é", (MaxLabelBytes-len(ellipsis))/2) + ellipsis},
		// Cut at an escape's boundary: 4 bytes per escape.
		{strings.Repeat("\xff", MaxLabelBytes), strings.Repeat(`\xff`, (MaxLabelBytes-len(ellipsis))/4) + ellipsis},
		// Escapes that make it just fit are not cut.
		{strings.Repeat("\x01", MaxLabelBytes/4), strings.Repeat(`\x01`, MaxLabelBytes/4)},
	} {
		if got := Label(tc.in); got != tc.want {
			t.Errorf("Label(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestLabelCleanAllocatesNothing(t *testing.T) {
	s := strings.Repeat("service-", 10)
	if n := testing.AllocsPerRun(100, func() { _ = Label(s) }); n != 0 {
		t.Fatalf("%v allocations for a clean label", n)
	}
}

// FuzzLabel: whatever the input, the label is valid UTF-8, within
// MaxLabelBytes, has no control or format character, is a fixed point, and
// a clean input is returned unchanged.
func FuzzLabel(f *testing.F) {
	for _, s := range []string{"", "api", "bad\xff", "\x1b[31mred", "\u202e", strings.Repeat("é", 200), "a\\x41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := Label(s)
		if !utf8.ValidString(l) || len(l) > MaxLabelBytes {
			t.Fatalf("Label(%q) = %q: valid %v, %d bytes", s, l, utf8.ValidString(l), len(l))
		}
		for _, r := range l {
			if termsafe.Unsafe(r) {
				t.Fatalf("Label(%q) = %q keeps %U", s, l, r)
			}
		}
		if Label(l) != l {
			t.Fatalf("Label(%q) = %q, but Label of that is %q", s, l, Label(l))
		}
		if clean(s) && l != s {
			t.Fatalf("clean %q changed to %q", s, l)
		}
		if len(s) <= MaxLabelBytes && utf8.ValidString(s) && !strings.ContainsFunc(s, termsafe.Unsafe) && l != s {
			t.Fatalf("valid printable %q changed to %q", s, l)
		}
	})
}
