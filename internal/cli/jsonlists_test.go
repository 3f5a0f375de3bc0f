package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/doubletake/doubletake/internal/audit"
	"github.com/doubletake/doubletake/internal/reportjson/reportjsontest"
	"github.com/doubletake/doubletake/internal/verify"
)

// checkLists fails when the JSON report stdout, written from a value of
// type typ, holds a list as null or leaves one out.
func checkLists(t *testing.T, what string, typ reflect.Type, stdout string) {
	t.Helper()
	problems, err := reportjsontest.ListProblems(typ, []byte(stdout))
	if err != nil {
		t.Errorf("%s: %v\n%s", what, err, stdout)
		return
	}
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
}

// TestVerifyJSONListsAreLists: on every path verify takes (findings with a
// release scan, clean, the command not started, nothing received, the
// --forward backend unreachable, --listen without a command), every list
// in its JSON report is an array, [] when empty.
func TestVerifyJSONListsAreLists(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".venv", "pyvenv.cfg"), "home = /usr/bin\n")
	writeFile(t, filepath.Join(dir, ".venv", "lib", "python3.12", "site-packages", "fastapi-0.142.2.dist-info", "METADATA"),
		"Metadata-Version: 2.4\nName: fastapi\nVersion: 0.142.2\n\n")
	t.Chdir(dir)
	t.Setenv("VIRTUAL_ENV", "")
	typ := reflect.TypeFor[verify.Report]()
	for _, c := range []struct {
		name, mode string
		args       []string
		code       int
	}{
		{"findings and a release scan", "twice", nil, ExitFindings},
		{"clean", "once", nil, ExitOK},
		{"command cannot start", "", []string{"--", filepath.Join(dir, "no-such-command")}, ExitCommand},
		{"nothing received", "none", nil, ExitNothing},
		{"forward backend unreachable", "once", []string{"--forward", deadURL(t), "--forward-protocol", "http"}, ExitOK},
		{"listen without a command", "", []string{"--listen", "127.0.0.1:0", "--duration", "10ms"}, ExitNothing},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := verifyMain(t, c.mode, append([]string{"--format", "json"}, c.args...)...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, c.code, r.stdout, r.stderr)
			}
			checkLists(t, c.name, typ, r.stdout)
		})
	}
}

// TestAuditJSONListsAreLists: the same for audit's JSON reports: OTLP
// files with findings and clean, and trace backends with duplicates,
// nested duplicates and none. (A Prometheus audit's are checked in
// internal/audit against its fake Prometheus.)
func TestAuditJSONListsAreLists(t *testing.T) {
	dir := t.TempDir()
	unwrap := func(b []byte) string {
		return strings.TrimSuffix(strings.TrimPrefix(string(b), `{"result":`), "}") + "\n"
	}
	files := map[string]string{
		"duplicates": unwrap(oneTrace(2)),
		"clean":      unwrap(oneTrace(1)),
		"nested":     nestedTraceJSON() + "\n",
		"malformed":  unwrap(oneTrace(1)) + "not json\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runAuditCmd(t, "otlp", "--format", "json", p)
		if code != ExitOK && code != ExitFindings {
			t.Fatalf("otlp %s: exit %d\n%s", name, code, stderr)
		}
		checkLists(t, "otlp "+name, reflect.TypeFor[audit.OTLPReport](), stdout)
	}
	for name, body := range map[string]string{
		"duplicates": string(oneTrace(2)),
		"clean":      string(oneTrace(1)),
		"nested":     `{"result":` + nestedTraceJSON() + `}`,
	} {
		u := jaegerStub(t, func(w http.ResponseWriter) { _, _ = w.Write([]byte(body)) })
		code, stdout, stderr := runAuditCmd(t, "traces", "--jaeger", u, "--service", "svc", "--format", "json")
		if code != ExitOK && code != ExitFindings {
			t.Fatalf("traces %s: exit %d\n%s", name, code, stderr)
		}
		checkLists(t, "traces "+name, reflect.TypeFor[audit.TraceReport](), stdout)
	}
}
