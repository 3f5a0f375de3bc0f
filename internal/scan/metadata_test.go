package scan

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseMetadata(t *testing.T) {
	tests := []struct {
		name, in       string
		pkg, version   string
		nline, vline   int
		wantErrContain string
		errLine        int
	}{
		{name: "wheel", in: "Metadata-Version: 2.1\nName: fastapi\nVersion: 0.142.2\nSummary: x\n\nName: not-a-header\n",
			pkg: "fastapi", version: "0.142.2", nline: 2, vline: 3},
		{name: "crlf and bom", in: "\xef\xbb\xbfName: FastAPI\r\nVersion: 0.142.2\r\n\r\nbody",
			pkg: "FastAPI", version: "0.142.2", nline: 1, vline: 2},
		{name: "case-insensitive keys", in: "name: fastapi\nVERSION: 0.143.0", pkg: "fastapi", version: "0.143.0", nline: 1, vline: 2},
		{name: "folded headers", in: "Name: fastapi\nLicense: MIT\n  and more\n\tand more\nVersion:\n  0.142.2\n",
			pkg: "fastapi", version: "0.142.2", nline: 1, vline: 5},
		{name: "long header", in: "Name: fastapi\nLicense: " + strings.Repeat("x", 70000) + "\nVersion: 1\n",
			pkg: "fastapi", version: "1", nline: 1, vline: 3},
		{name: "no version", in: "Name: fastapi\n", wantErrContain: "no Version header"},
		{name: "version in body", in: "Name: fastapi\n\nVersion: 1.0\n", wantErrContain: "no Version header"},
		{name: "no name", in: "Version: 1.0\n", wantErrContain: "no Name header"},
		{name: "empty", in: "", wantErrContain: "no Name header"},
		{name: "empty version", in: "Name: fastapi\nVersion:\n", wantErrContain: "empty Version header", errLine: 2},
		{name: "bad name", in: "Name: fast api\nVersion: 1\n", wantErrContain: `invalid Name "fast api"`, errLine: 1},
		{name: "garbage", in: "Name: fastapi\nthis is not a header\nVersion: 1\n", wantErrContain: "not a header", errLine: 2},
		{name: "continuation first", in: " Name: fastapi\n", wantErrContain: "continuation line", errLine: 1},
		{name: "duplicate", in: "Name: a\nName: b\nVersion: 1\n", wantErrContain: "second Name header", errLine: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, err := parseMetadata(strings.NewReader(tt.in))
			if tt.wantErrContain != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrContain) {
					t.Fatalf("err = %v, want %q", err, tt.wantErrContain)
				}
				var le *lineError
				if line := 0; errors.As(err, &le) {
					line = le.Line
					if line != tt.errLine {
						t.Errorf("error at line %d, want %d", line, tt.errLine)
					}
				} else if tt.errLine != 0 {
					t.Errorf("error %v has no line, want %d", err, tt.errLine)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if md.Name != tt.pkg || md.Version != tt.version || md.NameLine != tt.nline || md.VersionLine != tt.vline {
				t.Errorf("got %+v", md)
			}
		})
	}
}

func TestParseMetadataReadError(t *testing.T) {
	_, err := parseMetadata(iotest.ErrReader(iotest.ErrTimeout))
	if err == nil {
		t.Fatal("want the read error")
	}
}

// FuzzParseMetadata checks that the METADATA header parser never panics and
// that what it accepts is well formed.
func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte("Metadata-Version: 2.1\nName: fastapi\nVersion: 0.142.2\n\nbody\n"))
	f.Add([]byte("Name: fastapi\r\nVersion:\r\n 0.142.2\r\n"))
	f.Add([]byte("Name: fastapi\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := parseMetadata(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		if !validName(md.Name) {
			t.Fatalf("invalid name %q", md.Name)
		}
		if md.Version == "" || md.Version != strings.TrimSpace(md.Version) || strings.ContainsAny(md.Version, "\r\n") {
			t.Fatalf("bad version %q", md.Version)
		}
		if md.NameLine < 1 || md.VersionLine < 1 || md.NameLine == md.VersionLine {
			t.Fatalf("bad lines %d, %d", md.NameLine, md.VersionLine)
		}
		// Reading one byte at a time gives the same answer.
		md2, err := parseMetadata(iotest.OneByteReader(strings.NewReader(string(data))))
		if err != nil || md2 != md {
			t.Fatalf("one byte at a time: %+v, %v; want %+v", md2, err, md)
		}
	})
}
