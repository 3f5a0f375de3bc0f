package scan

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func utf16Bytes(s string, order binary.AppendByteOrder, bom bool) string {
	var b []byte
	if bom {
		b = order.AppendUint16(b, 0xfeff)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return string(b)
}

// TestRequirementsAsPipReadsThem checks each rule of pip's requirements
// file reader (req_file.py) on one file each: what it finds, at which line.
func TestRequirementsAsPipReadsThem(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string // "kind line version-or-admits"
	}{
		{"utf-8 BOM", "\ufefffastapi==0.142.1\n", []string{"locked 1 0.142.1"}},
		{"utf-16le BOM (PowerShell's pip freeze >)", utf16Bytes("fastapi==0.142.1\r\nuvicorn==0.30.0\r\n", binary.LittleEndian, true), []string{"locked 1 0.142.1"}},
		{"utf-16be BOM", utf16Bytes("uvicorn==0.30.0\nfastapi==0.142.2\n", binary.BigEndian, true), []string{"locked 2 0.142.2"}},
		{"PEP 263 latin-1", "# -*- coding: latin-1 -*-\n# caf\xe9\nfastapi==0.142.1\n", []string{"locked 3 0.142.1"}},
		{"comment ending in backslash does not continue", "# pinned below \\\nfastapi==0.142.1\n", []string{"locked 2 0.142.1"}},
		{"indented comment ending in backslash", "   # note \\\nfastapi==0.142.3\n", []string{"locked 2 0.142.3"}},
		{"continuation joins without a space", "fastapi==0.142.\\\n1\n", []string{"locked 1 0.142.1"}},
		{"continuation then a comment line", "fastapi>=0.140 \\\n# why\nuvicorn\n", []string{"admits 1 0.142.0"}},
		{"continuation at the end of the file", "fastapi==0.142.4 \\", []string{"locked 1 0.142.4"}},
		{"continuation with hash on the next line", "fastapi==0.142.2 \\\n    --hash=sha256:00\n", []string{"locked 1 0.142.2"}},
		{"inline comment", "fastapi==0.142.1 # pinned\n", []string{"locked 1 0.142.1"}},
		{"CR line ends", "uvicorn\rfastapi==0.142.1\r", []string{"locked 2 0.142.1"}},
		{"form feed and U+2028 end lines", "uvicorn\ffastapi==0.142.1\u2028fastapi==0.142.2\n", []string{"locked 2 0.142.1", "locked 3 0.142.2"}},
		{"bare wheel file name", "fastapi-0.142.1-py3-none-any.whl\n", []string{"locked 1 0.142.1"}},
		{"wheel in a directory", "wheels/fastapi-0.142.1-py3-none-any.whl\n", []string{"locked 1 0.142.1"}},
		{"wheel with a build tag", "./dist/fastapi-0.142.3-1-py3-none-any.whl\n", []string{"locked 1 0.142.3"}},
		{"sdist file name", "fastapi-0.142.1.tar.gz\n", []string{"locked 1 0.142.1"}},
		{"wheel URL", "https://example.invalid/files/fastapi-0.142.2-py3-none-any.whl\n", []string{"locked 1 0.142.2"}},
		{"name @ wheel URL", "fastapi @ https://example.invalid/fastapi-0.142.4-py3-none-any.whl\n", []string{"locked 1 0.142.4"}},
		{"good wheel", "fastapi-0.143.0-py3-none-any.whl\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "requirements.txt"), tt.data)
			r := Scan(context.Background(), builtinDB(t), dir)
			var got []string
			for _, f := range r.Findings {
				what := f.Version
				if f.Kind == KindAdmits {
					what = f.Admits
				}
				got = append(got, fmt.Sprintf("%s %d %s", f.Kind, f.Line, what))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings %q, want %q", got, tt.want)
			}
			if len(r.Problems) != 0 {
				t.Errorf("problems: %+v", r.Problems)
			}
		})
	}
}

// TestRequirementsIncludes follows -r and -c inside the root, once per
// file, to a bounded depth, and never out of the root.
func TestRequirementsIncludes(t *testing.T) {
	base := t.TempDir()
	write(t, filepath.Join(base, "outside.txt"), "fastapi==0.142.0\n")
	dir := filepath.Join(base, "tree")
	write(t, filepath.Join(dir, "app", "requirements.txt"), "-r ../common/base.in\n--constraint=../common/pins.in\n-r ../../outside.txt\n-c"+filepath.Join(base, "outside.txt")+"\n-r https://example.invalid/r.txt\n")
	write(t, filepath.Join(dir, "common", "base.in"), "-r base.in\n-r ../app/requirements.txt\nfastapi>=0.140\n")
	write(t, filepath.Join(dir, "common", "pins.in"), "fastapi==0.142.3\n")
	// A chain deeper than the bound (chain-*.txt are read only as includes).
	write(t, filepath.Join(dir, "deep", "requirements.txt"), "-r chain-01.txt\nfastapi==0.142.0\n")
	for i := 1; i < 14; i++ {
		write(t, filepath.Join(dir, "deep", fmt.Sprintf("chain-%02d.txt", i)), fmt.Sprintf("-r chain-%02d.txt\nfastapi==0.142.%d\n", i+1, i%5))
	}
	r := ScanWith(context.Background(), builtinDB(t), Options{MaxIncludeDepth: 3}, dir)
	findings, _ := summary(r)
	for i := range findings {
		findings[i] = strings.ReplaceAll(findings[i], filepath.ToSlash(dir)+"/", "")
	}
	want := []string{
		"admits common/base.in:3 fastapi>=0.140 admits 0.142.0",
		"locked common/pins.in:1 0.142.3",
		"locked deep/chain-01.txt:2 0.142.1",
		"locked deep/chain-02.txt:2 0.142.2",
		"locked deep/chain-03.txt:2 0.142.3",
		"locked deep/requirements.txt:2 0.142.0",
	}
	slices.Sort(findings)
	if !slices.Equal(findings, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(findings, "\n"), strings.Join(want, "\n"))
	}
	// A file named on the command line is contained in its directory.
	r2 := ScanWith(context.Background(), builtinDB(t), Options{}, filepath.Join(dir, "app", "requirements.txt"))
	if len(r2.Findings) != 0 || len(r2.NotJudged) != 5 {
		t.Errorf("explicit file: findings %+v, not judged %+v", r2.Findings, r2.NotJudged)
	}
	reasons := map[Reason]int{}
	for _, nj := range r.NotJudged {
		reasons[nj.Reason]++
	}
	if reasons[SkipOutsideRoot] != 2 || reasons[DirectURL] != 1 {
		t.Errorf("not judged: %+v", r.NotJudged)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Message, "deeper than 3") {
		t.Errorf("problems: %+v", r.Problems)
	}
}

// TestRequirementsNotJudged lists what a requirements file names without a
// version the scan can read, and the dynamic and Poetry cases of
// pyproject.toml.
func TestRequirementsNotJudged(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FASTAPI_VERSION", "0.142.1")
	write(t, filepath.Join(dir, "requirements.txt"), strings.Join([]string{
		"git+https://example.invalid/fastapi.git@0.142.2#egg=fastapi",
		"-e .",
		"-e git+https://example.invalid/x.git#egg=x",
		"./vendor/fastapi",
		"https://example.invalid/fastapi/archive/main",
		"fastapi==${FASTAPI_VERSION}",
		"fastapi @ git+https://example.invalid/fastapi.git",
		"fastapi @ https://example.invalid/fastapi/archive/main.zip",
		"other @ https://example.invalid/other.zip", // not a hazard: judged clean
		"--index-url https://example.invalid/simple",
	}, "\n"))
	write(t, filepath.Join(dir, "dyn", "pyproject.toml"), "[project]\nname = \"x\"\ndynamic = [\"version\", \"dependencies\"]\n")
	write(t, filepath.Join(dir, "direct", "pyproject.toml"), "[project]\nname = \"x\"\ndependencies = [\n  \"fastapi @ git+https://example.invalid/fastapi.git@0.142.1\",\n  \"other @ https://example.invalid/o.zip\",\n  \"fastapi @ https://example.invalid/fastapi-0.142.2-py3-none-any.whl\",\n]\n")
	write(t, filepath.Join(dir, "poetry", "pyproject.toml"), `[tool.poetry.dependencies]
python = "^3.10"
fastapi = "^0.142"
uvicorn = "*"
starlette = { git = "https://example.invalid/starlette.git" }
weird = "1.0 - 2.0"

[tool.poetry.group.dev.dependencies]
fastapi = { version = "~0.142.1", extras = ["all"] }
`)
	write(t, filepath.Join(dir, "legacy", "Pipfile"), "[packages]\nfastapi = \"*\"\n")
	write(t, filepath.Join(dir, "legacy", "setup.py"), "setup()\n")
	r := scanDone(t, Options{}, dir)
	var got []string
	for _, nj := range r.NotJudged {
		rel, _ := filepath.Rel(dir, filepath.FromSlash(nj.Path))
		got = append(got, fmt.Sprintf("%s:%d %s", filepath.ToSlash(rel), nj.Line, nj.Reason))
	}
	want := []string{
		"direct/pyproject.toml:4 vcs",
		"dyn/pyproject.toml:3 dynamic",
		"legacy/Pipfile:0 unsupported-manifest",
		"legacy/setup.py:0 unsupported-manifest",
		"poetry/pyproject.toml:5 vcs",
		"poetry/pyproject.toml:6 unsupported-specifier",
		"requirements.txt:1 vcs",
		"requirements.txt:2 path",
		"requirements.txt:3 vcs",
		"requirements.txt:4 path",
		"requirements.txt:5 url",
		"requirements.txt:6 environment-variable",
		"requirements.txt:7 vcs",
		"requirements.txt:8 url",
	}
	if !slices.Equal(got, want) {
		t.Errorf("not judged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	findings, problems := summary(r)
	for i := range findings {
		findings[i] = strings.ReplaceAll(findings[i], filepath.ToSlash(dir)+"/", "")
	}
	wantFindings := []string{
		"admits direct/pyproject.toml:6 fastapi==0.142.2 admits 0.142.2",
		"admits poetry/pyproject.toml:3 fastapi>=0.142,<0.143 admits 0.142.0",
		"admits poetry/pyproject.toml:9 fastapi>=0.142.1,<0.143 admits 0.142.1",
	}
	if !slices.Equal(findings, wantFindings) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(findings, "\n"), strings.Join(wantFindings, "\n"))
	}
	if len(problems) != 0 {
		t.Errorf("problems: %+v", r.Problems)
	}
	out := allOutput(t, r)
	if strings.Contains(out, "0.142.1 is pinned") {
		t.Errorf("${FASTAPI_VERSION} was expanded from the environment")
	}
}

func TestPoetryConstraint(t *testing.T) {
	for in, want := range map[string]string{
		"^1.2.3":            ">=1.2.3,<2",
		"^0.142":            ">=0.142,<0.143",
		"^0.0.3":            ">=0.0.3,<0.0.4",
		"^0.0":              ">=0.0,<0.1",
		"~1.2.3":            ">=1.2.3,<1.3",
		"~1":                ">=1,<2",
		"1.2.3":             "==1.2.3",
		"=1.2.3":            "==1.2.3",
		"1.2.*":             "==1.2.*",
		"*":                 "",
		">= 1.2, < 2.0":     ">=1.2,<2.0",
		">=1.2 <2.0":        ">=1.2,<2.0",
		"~=0.142.1":         "~=0.142.1",
		"^0.141 || ^0.143":  ">=0.141,<0.142 | >=0.143,<0.144",
		"!=0.142.2,>=0.142": "!=0.142.2,>=0.142",
	} {
		alts, err := poetryConstraint(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		var got []string
		for _, a := range alts {
			got = append(got, a.String())
		}
		if strings.Join(got, " | ") != want {
			t.Errorf("%q translates to %q, want %q", in, strings.Join(got, " | "), want)
		}
	}
	for _, bad := range []string{"1.0 - 2.0", "1.x", "^", "~abc", "latest"} {
		if alts, err := poetryConstraint(bad); err == nil {
			t.Errorf("%q translates to %v, want an error", bad, alts)
		}
	}
}
