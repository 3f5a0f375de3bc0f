package scan

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

// TestScanMaxFiles: the file cap stops the walk after that many files, all
// roots together, and says so; without it the same tree reads more.
func TestScanMaxFiles(t *testing.T) {
	db := builtinDB(t)
	all := Scan(context.Background(), db, "testdata/tree")
	if all.FileCapReached || all.FilesRead < 5 {
		t.Fatalf("uncapped: %d files read, cap reached %v; want at least 5 and no cap", all.FilesRead, all.FileCapReached)
	}
	for _, max := range []int{1, 3} {
		r := ScanWith(context.Background(), db, Options{MaxFiles: max}, "testdata/tree", "testdata/tree/envs")
		if r.FilesRead != max || !r.FileCapReached {
			t.Errorf("MaxFiles %d: %d files read, cap reached %v", max, r.FilesRead, r.FileCapReached)
		}
	}
	if r := ScanWith(context.Background(), db, Options{MaxFiles: all.FilesRead}, "testdata/tree"); r.FileCapReached || r.FilesRead != all.FilesRead {
		t.Errorf("MaxFiles = the files in the tree: %d read, cap reached %v", r.FilesRead, r.FileCapReached)
	}
}

// TestFindingBrief: the one-line form verify prints, with the wording of
// the hazard database and the fix scan prints for the same finding, for
// each kind of finding.
func TestFindingBrief(t *testing.T) {
	r := Scan(context.Background(), builtinDB(t), "testdata/tree/envs/bad", "testdata/tree/locked/uv.lock", "testdata/tree/pinned/requirements.txt", "testdata/tree/admits/pyproject.toml")
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.Brief("WHERE"))
	}
	const known = " (known to attach a second exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): "
	want := []string{
		"fastapi 0.142.2 is installed in WHERE" + known + "upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment",
		"fastapi 0.142.4 is locked in WHERE" + known + `add "fastapi!=0.142.*" to the project's dependencies (or [tool.uv] constraint-dependencies), run uv lock --upgrade-package fastapi, then uv sync`,
		"fastapi==0.142.0 is pinned in WHERE" + known + "pin fastapi==0.143.0 and reinstall",
		"fastapi>=0.135 in WHERE project.dependencies admits fastapi 0.142.0" + known + "require fastapi>=0.135,!=0.142.*, then re-lock and reinstall",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no line %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// TestBriefAdvisesAsScan: for every finding, verify's line ends with the
// fix scan prints under it: one advice, from the hazard entry.
func TestBriefAdvisesAsScan(t *testing.T) {
	r := Scan(context.Background(), builtinDB(t), "testdata/tree")
	var text bytes.Buffer
	if err := WriteText(&text, r.Findings); err != nil {
		t.Fatal(err)
	}
	fixes := fixLines(text.String())
	if len(fixes) != len(r.Findings) || len(r.Findings) < 8 {
		t.Fatalf("%d fix lines for %d findings:\n%s", len(fixes), len(r.Findings), text.String())
	}
	for i, f := range r.Findings {
		if b := f.Brief("WHERE"); !strings.HasSuffix(b, "): "+fixes[i]) {
			t.Errorf("verify's line\n  %s\ndoes not end with scan's fix\n  %s", b, fixes[i])
		}
	}
}

// fixLines are the "fix:" lines of scan's text output, each joined back
// from its wrapped lines.
func fixLines(text string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "  fix:    "):
			out = append(out, strings.TrimPrefix(line, "  fix:    "))
			in = true
		case in && strings.HasPrefix(line, "          "):
			out[len(out)-1] += " " + strings.TrimSpace(line)
		default:
			in = false
		}
	}
	return out
}

// TestFindingBriefEscapes: a hostile version, path or summary cannot reach
// the terminal raw.
func TestFindingBriefEscapes(t *testing.T) {
	f := Finding{Kind: KindInstalled, Package: "fastapi", Version: "0.142.2\x1b[2J", Exclusion: "fastapi!=0.142.*", Summary: "x\u202ey", Fix: "upgrade\x1b]0;x\x07"}
	got := f.Brief("env\n\x07")
	if strings.ContainsAny(got, "\x1b\n\x07\u202e") {
		t.Fatalf("raw control characters in %q", got)
	}
	want := `fastapi 0.142.2\x1b[2J is installed in env\n\a (known to x\u202ey): upgrade\x1b]0;x\a`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	f.Summary = ""
	f.Reference = "fastapi/fastapi#16476"
	if got := f.Brief("e"); !strings.Contains(got, "(known to make telemetry arrive twice, fastapi/fastapi#16476)") {
		t.Errorf("without a summary: %s", got)
	}
}

func TestParseHazardsSummaryBound(t *testing.T) {
	entry := "hazards:\n  - package: x\n    affected: \"==1.0\"\n    exclusion: \"!=1.0\"\n    effect: e\n    reference: r\n    summary: "
	if _, err := ParseHazards([]byte(entry+"do   twice\n"), "h.yaml"); err != nil {
		t.Fatal(err)
	}
	_, err := ParseHazards([]byte(entry+strings.Repeat("a", 201)+"\n"), "h.yaml")
	if err == nil || !strings.Contains(err.Error(), "h.yaml: hazards[0] (x): summary: 201 bytes, want at most 200") {
		t.Errorf("error %v", err)
	}
}
