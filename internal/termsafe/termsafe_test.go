package termsafe

import (
	"bytes"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"checkout", "checkout"},
		{"GET /users/{id}", "GET /users/{id}"},
		{"grüße 世界", "grüße 世界"},
		{"\x1b[2Jgone", `\x1b[2Jgone`},
		{"a\nb\tc\rd", `a\x0ab\x09c\x0dd`},
		{"del\x7f", `del\x7f`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"grüße\nforged log line", `grüße\x0aforged log line`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"line\u2028sep", `line\u2028sep`},
		{"", ""},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEscapeCleanDoesNotAllocate(t *testing.T) {
	s := "service checkout, span GET /users/{id}, grüße"
	if n := testing.AllocsPerRun(100, func() { _ = Escape(s) }); n != 0 {
		t.Errorf("Escape of clean text allocates %v times", n)
	}
}

func TestWriterKeepsLayoutEscapesControls(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	// "ü" split across two writes must come out whole.
	for _, p := range []string{"name\t\x1b[2J\n", "gr\xc3", "\xbc\xc3\xa9\n", "end\xff\x1b]0;title\x07\n"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "name\t\\x1b[2J\ngrüé\nend\\xff\\x1b]0;title\\x07\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestWriterFlushesIncompleteTail(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	_, _ = w.Write([]byte("cut\xe4\xb8"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := `cut\xe4\xb8`; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("\x1b[2J")
	f.Add("grüße\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !clean(out, false) {
			t.Fatalf("Escape(%q) = %q still has controls", s, out)
		}
		if clean(s, false) && out != s {
			t.Fatalf("clean %q changed to %q", s, out)
		}
	})
}

func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://u:s3cret@collector:4317", "http://xxxxx@collector:4317"},
		{"https://t0ken@collector:4318/otlp", "https://xxxxx@collector:4318/otlp"},
		{"http://collector:4317", "http://collector:4317"},
		{"http://u:s3cret@host:port%zz", "http://xxxxx@host:port%zz"},
		{"u:s3cret@host:4317", "xxxxx@host:4317"},
	} {
		if got := RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
