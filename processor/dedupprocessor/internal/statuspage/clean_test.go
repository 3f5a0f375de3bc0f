package statuspage

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"app":             "app",
		"a\x00b\nc":       `a\x00b\x0ac`,
		"bad\xffutf8":     `bad\xffutf8`,
		"line\u2028sep":   `line\u2028sep`,
		"rtl\u202egnp":    `rtl\u202egnp`,
		"zero\u200bwidth": `zero\u200bwidth`,
		"ok\u00e9\u4e16":  "ok\u00e9\u4e16",
	} {
		if got := CleanName(in); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("\u4e16", 200) // 600 bytes
	got := CleanName(long)
	if !strings.HasSuffix(got, "… (600 bytes, cut at 258)") || strings.Count(got, "\u4e16") != 86 {
		t.Errorf("long name: %q", got)
	}
}

// FuzzCleanName: whatever a client names itself, the shown name is valid
// UTF-8 without control or format characters, and bounded.
func FuzzCleanName(f *testing.F) {
	f.Add("app")
	f.Add("<script>\x1b[2J\u202e\u200b\xff")
	f.Add(strings.Repeat("\u4e16", 100))
	f.Fuzz(func(t *testing.T, in string) {
		got := CleanName(in)
		if !utf8.ValidString(got) {
			t.Fatalf("CleanName(%q) = %q: invalid UTF-8", in, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("CleanName(%q) = %q keeps %U", in, got, r)
			}
		}
		// 256 bytes plus one escape (at most 6 bytes) plus the note.
		if len(got) > NameBytes+6+64 {
			t.Fatalf("cleanName of %d bytes is %d bytes", len(in), len(got))
		}
		if len(in) <= 32 && !strings.ContainsFunc(in, func(r rune) bool {
			return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
		}) && got != in {
			t.Fatalf("CleanName(%q) = %q: a plain name must pass unchanged", in, got)
		}
	})
}
