package e2e

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Issue 19: verify names the release behind a double export. The JS SDK
// client exports every span twice (two BatchSpanProcessors, the FastAPI
// 0.142 failure) under verify, run from a working directory built here.

// releaseKnown is what the line verify adds for a release says of it, in
// the hazard database's wording; the fix scan gives for the same finding
// follows.
const releaseKnown = " (known to attach a second exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): "

// releaseTrees are the working directories: what each holds and the lines
// verify must print for it.
var releaseTrees = []struct {
	name  string
	files map[string]string
	want  []string
}{
	{"venv", venvTree(".venv", "0.142.2"), []string{"fastapi 0.142.2 is installed in .venv" + releaseKnown +
		"upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment"}},
	{"uv.lock", map[string]string{"uv.lock": uvLock("0.142.1"), "pyproject.toml": pyproject}, []string{"fastapi 0.142.1 is locked in uv.lock:13" + releaseKnown +
		`add "fastapi!=0.142.*" to the project's dependencies (or [tool.uv] constraint-dependencies), run uv lock --upgrade-package fastapi, then uv sync`}},
	// A clean environment: the fixed release installed and locked.
	{"clean", merge(venvTree(".venv", "0.143.0"), map[string]string{"uv.lock": uvLock("0.143.0"), "pyproject.toml": pyproject}), nil},
}

const pyproject = `[project]
name = "app"
version = "0.1.0"
dependencies = ["fastapi>=0.143"]
`

func venvTree(name, version string) map[string]string {
	dist := name + "/lib/python3.12/site-packages/fastapi-" + version + ".dist-info/"
	return map[string]string{
		name + "/pyvenv.cfg":  "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.3\n",
		dist + "METADATA":     "Metadata-Version: 2.4\nName: fastapi\nVersion: " + version + "\nRequires-Dist: starlette<0.48.0,>=0.40.0\n\n# FastAPI\n",
		dist + "RECORD":       "fastapi/__init__.py,,\n",
		name + "/bin/python3": "",
		name + "/lib/python3.12/site-packages/fastapi/__init__.py": "__version__ = \"" + version + "\"\n",
	}
}

func uvLock(version string) string {
	return `version = 1
revision = 3
requires-python = ">=3.12"

[[package]]
name = "app"
version = "0.1.0"
source = { virtual = "." }
dependencies = [{ name = "fastapi" }]

[[package]]
name = "fastapi"
version = "` + version + `"
source = { registry = "https://example.invalid/simple" }
`
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// releaseReport is the part of verify's JSON report these tests read.
type releaseReport struct {
	Verdict  string `json:"verdict"`
	Findings []struct {
		Signal    string `json:"signal"`
		Diagnosis string `json:"diagnosis"`
	} `json:"findings"`
	ReleaseScan *struct {
		Roots     []string `json:"roots"`
		Lines     []string `json:"lines"`
		Notes     []string `json:"notes"`
		FilesRead int      `json:"files_read"`
	} `json:"release_scan"`
}

func TestVerifyNamesTheRelease(t *testing.T) {
	client := filepath.Join(jsClient(t), "client.mjs")
	env := []string{"VIRTUAL_ENV=", "CLIENT_PROTOCOL=http/protobuf", "CLIENT_ROLLOUTS=5", "CLIENT_ROLLOUT_MS=20", "CLIENT_SPAN_DELAY_MS=100"}
	for _, tree := range releaseTrees {
		t.Run(tree.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tree.files)
			junit := filepath.Join(t.TempDir(), "junit.xml")
			r := runVerify(t, dir, append(env, "CLIENT_MODE=traces-double"),
				"--format", "json", "--junit", junit, "--grace", "500ms", "--", "node", client)
			if r.code != 1 {
				t.Fatalf("want exit 1 (the double export):\n%s", r)
			}
			var v releaseReport
			if err := json.Unmarshal([]byte(r.report), &v); err != nil {
				t.Fatalf("JSON report: %v\n%s", err, r)
			}
			if v.Verdict != "duplicates" || len(v.Findings) == 0 || v.Findings[0].Diagnosis != "two-exporters" {
				t.Fatalf("want spans diagnosed two-exporters, verdict duplicates:\n%s", r)
			}
			rs := v.ReleaseScan
			if rs == nil {
				t.Fatalf("no release_scan:\n%s", r)
			}
			if !slices.Equal(rs.Lines, tree.want) || !slices.Equal(rs.Roots, []string{"."}) || len(rs.Notes) != 0 || rs.FilesRead == 0 {
				t.Errorf("release_scan: roots %q, %d files read, lines %q, notes %q; want lines %q", rs.Roots, rs.FilesRead, rs.Lines, rs.Notes, tree.want)
			}
			xb, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			x := html.UnescapeString(string(xb)) // the lines hold ' " > (XML-escaped)
			for _, line := range tree.want {
				if !strings.Contains(x, line) {
					t.Errorf("the JUnit report lacks %q:\n%s", line, x)
				}
			}
			if tree.want == nil && strings.Contains(x, "is installed in") {
				t.Errorf("the JUnit report names a release:\n%s", x)
			}

			// The text report, as a person reads it.
			r = runVerify(t, dir, append(env, "CLIENT_MODE=traces-double"), "--grace", "500ms", "--", "node", client)
			if r.code != 1 || !strings.Contains(r.report, "\nreleases known to export twice, in the command's environment (scanned .: ") {
				t.Fatalf("text report:\n%s", r)
			}
			for _, line := range tree.want {
				if !strings.Contains(r.report, "\n  - "+line+"\n") {
					t.Errorf("the text report lacks %q", line)
				}
			}
			if tree.want == nil && !strings.Contains(r.report, "): none known\n") {
				t.Errorf("the clean tree's text report does not say none known")
			}
			if t.Failed() {
				t.Logf("%s", r)
			}
		})
	}

	// The same client exporting once, from the tree with fastapi 0.142.2
	// installed: clean, and nothing scanned.
	t.Run("single", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, releaseTrees[0].files)
		r := runVerify(t, dir, append(env, "CLIENT_MODE=traces-single"), "--format", "json", "--grace", "500ms", "--", "node", client)
		var v releaseReport
		if err := json.Unmarshal([]byte(r.report), &v); err != nil || r.code != 0 || v.Verdict != "clean" || v.ReleaseScan != nil {
			t.Errorf("want a clean run and no release_scan (%v):\n%s", err, r)
		}
	})
}

// writeFiles writes files (slash path: content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
