package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testRenderings() renderings {
	return renderings{
		value: map[string]string{"span": "evil\x1b[2J"},
		text: func(w io.Writer) error {
			_, err := io.WriteString(w, "span evil\x1b[2J\n")
			return err
		},
		html:  func(w io.Writer) error { _, err := io.WriteString(w, "<html>"); return err },
		junit: func(w io.Writer) error { _, err := io.WriteString(w, "<testsuites/>"); return err },
	}
}

// TestReportOutputForms: one writer puts the report on stdout as text
// (terminal controls escaped) or JSON, or in the --output file, and the
// HTML and JUnit renderings in their files.
func TestReportOutputForms(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	o := reportOutput{format: "text"}
	if err := o.write(&out, testRenderings()); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), `span evil\x1b[2J`+"\n"; got != want {
		t.Errorf("text on stdout %q, want %q", got, want)
	}

	out.Reset()
	o = reportOutput{format: "json", output: filepath.Join(dir, "r.json"), html: filepath.Join(dir, "r.html"), junit: filepath.Join(dir, "r.xml")}
	if err := o.write(&out, testRenderings()); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q with --output", out.String())
	}
	for path, want := range map[string]string{o.output: "{\n  \"span\": \"evil\\u001b[2J\"\n}\n", o.html: "<html>", o.junit: "<testsuites/>"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q (%v), want %q", filepath.Base(path), b, err, want)
		}
	}
}

// TestReportOutputFailures: a rendering that fails writes no file; a file
// that cannot be written names what it was.
func TestReportOutputFailures(t *testing.T) {
	dir := t.TempDir()
	r := testRenderings()
	r.junit = func(w io.Writer) error {
		if _, err := io.WriteString(w, "<testsu"); err != nil {
			return err
		}
		return errors.New("boom")
	}
	o := reportOutput{format: "text", output: filepath.Join(dir, "r.txt"), junit: filepath.Join(dir, "r.xml")}
	err := o.write(io.Discard, r)
	if err == nil || err.Error() != "rendering --junit "+o.junit+": boom" {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(o.junit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a partial JUnit file was written (%v)", err)
	}

	o = reportOutput{format: "text", html: filepath.Join(dir, "no", "such", "r.html")}
	if err := o.write(io.Discard, testRenderings()); err == nil || !strings.HasPrefix(err.Error(), "writing the HTML report: open ") {
		t.Errorf("unwritable --html: %v", err)
	}
}

// TestVerifyUnwritableReports: verify's report and JUnit files that cannot
// be written are verify's failure (exit 4), named.
func TestVerifyUnwritableReports(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such")
	r := verifyMain(t, "", "--allow-empty", "--output", filepath.Join(missing, "r.txt"), "--", "true")
	if r.code != ExitInternal || !strings.Contains(r.stderr, "doubletake: verify: writing the report: open "+missing) {
		t.Errorf("--output: exit %d, stderr %q", r.code, r.stderr)
	}
	r = verifyMain(t, "", "--allow-empty", "--junit", filepath.Join(missing, "r.xml"), "--", "true")
	if r.code != ExitInternal || !strings.Contains(r.stderr, "doubletake: verify: writing --junit "+filepath.Join(missing, "r.xml")+": open ") {
		t.Errorf("--junit: exit %d, stderr %q", r.code, r.stderr)
	}
}
