package scan

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRequirementsFile feeds arbitrary bytes to the requirements reader
// and the line judge (decoding, line boundaries, continuations, comments,
// options, includes, URLs, wheel and sdist names): it must not panic, must
// keep every logical line within the cap, and every report it prints must
// be escaped and bounded.
func FuzzRequirementsFile(f *testing.F) {
	for _, s := range []string{
		"fastapi==0.142.1\n",
		"\ufefffastapi==0.142.\\\n1\n# note \\\nuvicorn\n",
		"\xff\xfef\x00a\x00s\x00t\x00a\x00p\x00i\x00=\x00=\x000\x00.\x001\x004\x002\x00.\x001\x00\n\x00",
		"# -*- coding: latin-1 -*-\nfastapi>=0.140 # caf\xe9\n",
		"-r base.txt\n-c ../x.txt\n-e .\n--index-url https://example.invalid/simple\n",
		"wheels/fastapi-0.142.1-py3-none-any.whl\nfastapi-0.142.1.tar.gz\nhttps://example.invalid/fastapi-0.142.2-py3-none-any.whl\n",
		"fastapi @ git+https://example.invalid/f.git\nfastapi==${FASTAPI_VERSION}\n",
		"a\rb\fc\u2028fastapi===0.142.1\x1b[2J\n\\",
	} {
		f.Add([]byte(s))
	}
	db := builtinDB(f)
	dir := f.TempDir()
	if err := os.WriteFile(dir+"/base.txt", []byte("fastapi==0.142.3\n-r base.txt\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { root.Close() })
	const maxLine = 512
	f.Fuzz(func(t *testing.T, data []byte) {
		last := 0
		err := readRequirementLines(bytes.NewReader(data), maxLine, len(data), nil, func(n int, text string, _, _ bool) error {
			if n < last || n < 1 {
				t.Fatalf("line %d after line %d", n, last)
			}
			last = n
			if len(text) > maxLine {
				t.Fatalf("line %d: %d bytes, over the %d cap", n, len(text), maxLine)
			}
			return nil
		})
		if err != nil && !strings.Contains(err.Error(), "NUL") && !strings.Contains(err.Error(), "encoding") {
			t.Fatalf("unexpected error %v", err)
		}

		s := &scanner{ctx: context.Background(), db: db, opts: Options{MaxLineBytes: maxLine}.withDefaults(),
			res: &Result{}, seen: map[string]bool{}, admits: map[admitsKey]admitsResult{}}
		s.read(root, dir, "fuzz.txt", dir+"/fuzz.txt", kindRequirements, 0) // absent: one problem
		s.cur = &fileReport{path: "requirements.txt"}
		s.requirements(root, dir, "requirements.txt", "requirements.txt", bytes.NewReader(data), int64(len(data)), 0)
		s.closeReport()
		if n := len(s.res.Problems) + len(s.res.Findings) + len(s.res.NotJudged); n > 4*(DefaultMaxPerFile+1) {
			t.Fatalf("%d entries reported", n)
		}
		var out bytes.Buffer
		if err := WriteText(&out, s.res.Findings); err != nil {
			t.Fatal(err)
		}
		if err := WriteNotJudged(&out, s.res.NotJudged, true); err != nil {
			t.Fatal(err)
		}
		if err := WriteProblems(&out, s.res.Problems); err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(out.Bytes()) {
			t.Fatalf("output is not valid UTF-8: %q", out.String())
		}
		for _, r := range out.String() {
			if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0) {
				t.Fatalf("control character %U in the output: %q", r, out.String())
			}
		}
	})
}

// FuzzPoetryConstraint checks that translating a Poetry constraint never
// panics and that every translation is a specifier that parses again.
func FuzzPoetryConstraint(f *testing.F) {
	for _, s := range []string{"^0.142", "~0.142.1", ">=1.2 <2.0 || ^3", "*", "1.2.*", "=1.0", "^0.0.0", "~1", ">= 1.0, != 1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		alts, err := poetryConstraint(s)
		if err != nil {
			return
		}
		for _, a := range alts {
			if _, err := ParseSpecifier(a.String()); err != nil {
				t.Fatalf("%q translates to %q, which does not parse: %v", s, a.String(), err)
			}
		}
	})
}
