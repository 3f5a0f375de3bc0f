// Package termsafe escapes text that came from telemetry before it reaches
// a terminal: a span name or a log body must not be able to move the
// cursor, clear the screen or reverse the text around it.
package termsafe

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every control character (C0 including newline and
// tab, DEL, C1), every bidirectional-text control and every byte that is
// not valid UTF-8 written as a Go escape (\x1b, \u202e). Printable text,
// spaces and other Unicode are kept as they are. An s that needs no
// escaping is returned unchanged, without allocating.
func Escape(s string) string {
	if clean(s, false) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	write(&b, s, false)
	return b.String()
}

// clean reports whether s needs no escaping; keepLayout lets newline and
// tab through.
func clean(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			if keepLayout && (c == '\n' || c == '\t') {
				continue
			}
			return false
		}
		if c >= 0x80 {
			return cleanRunes(s[i:], keepLayout)
		}
	}
	return true
}

func cleanRunes(s string, keepLayout bool) bool {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if Unsafe(r) && (!keepLayout || (r != '\n' && r != '\t')) {
			return false
		}
		s = s[n:]
	}
	return true
}

// Unsafe reports whether r must be escaped wherever text from telemetry
// is shown: control characters (C0, DEL, C1), format characters (bidi
// overrides and isolates, zero-width joiners: category Cf) and the line and
// paragraph separators U+2028 and U+2029, any of which can rewrite how a
// terminal, a log line or a page reads. The one rule for termsafe, the
// sanitize package's labels and the status page.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// write escapes s into b; keepLayout lets newline and tab through.
func write(b *strings.Builder, s string, keepLayout bool) {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(b, `\x%02x`, s[0])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
}

// Writer escapes what is written through it as Escape does, except newline
// and tab, which the report's own layout uses: for a whole text report
// whose fields were not escaped one by one.
type Writer struct {
	w    io.Writer
	tail []byte // an incomplete UTF-8 sequence held for the next Write
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it. A UTF-8 sequence split across two writes
// is held until the next Write (or Flush).
func (w *Writer) Write(p []byte) (int, error) {
	data := p
	if len(w.tail) > 0 {
		data = append(w.tail, p...)
		w.tail = nil
	}
	// Hold back a trailing incomplete (but so far valid) sequence.
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	if cut < len(data) {
		w.tail = append([]byte(nil), data[cut:]...)
		data = data[:cut]
	}
	s := string(data)
	if !clean(s, true) {
		var b strings.Builder
		b.Grow(len(s) + 8)
		write(&b, s, true)
		s = b.String()
	}
	if _, err := io.WriteString(w.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes (escaped) what an incomplete sequence at the end held back.
func (w *Writer) Flush() error {
	if len(w.tail) == 0 {
		return nil
	}
	var b strings.Builder
	write(&b, string(w.tail), true)
	w.tail = nil
	_, err := io.WriteString(w.w, b.String())
	return err
}

// RedactURL is raw with its user info (user and password: a token is
// often given as the user) replaced by "xxxxx", for error and log lines.
// A string that does not parse as a URL loses everything before the last
// '@' of its authority instead.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Opaque == "" {
		if u.User != nil {
			u.User = url.User("xxxxx")
		}
		return u.String()
	}
	rest, scheme := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	auth := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth = rest[:i]
	}
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		return scheme + "xxxxx" + rest[at:]
	}
	return raw
}
