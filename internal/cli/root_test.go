package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

// TestUsageErrorsExit2: every error cobra reports about the command line
// (unknown command or flag, a flag without its value or with a bad one, an
// argument count the command refuses, a required flag not set) exits 2
// with cobra's message, for every subcommand, the collector's included.
func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "doubletake"`},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"-x"}, "unknown shorthand flag: 'x' in -x"},
		{[]string{"verify", "--grace"}, "flag needs an argument: --grace"},
		{[]string{"verify", "--grace", "soon", "--", "true"}, `invalid argument "soon" for "--grace" flag: time: invalid duration "soon"`},
		{[]string{"verify", "-z", "--", "true"}, "unknown shorthand flag: 'z' in -z"},
		{[]string{"version", "extra"}, `unknown command "extra" for "doubletake version"`},
		{[]string{"audit", "prometheus"}, `required flag(s) "url" not set`},
		{[]string{"audit", "prometheus", "--url", "http://x", "--range", "-1h"}, `invalid argument "-1h" for "--range" flag: not a valid duration string: "-1h"`},
		{[]string{"audit", "prometheus", "--url", "http://x", "--concurrency", "many"}, `invalid argument "many" for "--concurrency" flag: strconv.ParseInt: parsing "many": invalid syntax`},
		{[]string{"audit", "traces", "--jaeger", "http://a"}, `required flag(s) "service" not set`},
		{[]string{"audit", "otlp"}, "requires at least 1 arg(s), only received 0"},
		{[]string{"audit", "nosuch"}, `unknown command "nosuch" for "doubletake audit"`},
		{[]string{"audit", "otlp", "--strict=maybe", "x"}, `invalid argument "maybe" for "--strict" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{[]string{"scan", "--max-per-file", "x"}, `invalid argument "x" for "--max-per-file" flag: strconv.ParseInt: parsing "x": invalid syntax`},
		{[]string{"run", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"run", "--upstream"}, "flag needs an argument: --upstream"},
		{[]string{"run", "validate", "extra"}, "accepts 0 arg(s), received 1"},
		{[]string{"run", "featuregate", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"run", "default-config", "extra"}, `unknown command "extra" for "doubletake run default-config"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(tc.args, Streams{Out: &out, Err: &errb})
			if want := "doubletake: " + tc.want + "\n"; code != ExitUsage || errb.String() != want {
				t.Fatalf("exit %d, stderr %q; want exit 2, stderr %q", code, errb.String(), want)
			}
		})
	}
}

// TestInternalErrorExits4: an error of doubletake itself exits 4 whatever
// its text says: syscall.EINVAL's text is "invalid argument", as in pflag's
// usage errors.
func TestInternalErrorExits4(t *testing.T) {
	var out, errb bytes.Buffer
	s := Streams{Out: &out, Err: &errb}
	root := NewRootCommand(s)
	root.AddCommand(&cobra.Command{
		Use: "fail", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("reading the journal: %w", syscall.EINVAL)
		},
	})
	code := execute(root, []string{"fail"}, s)
	if want := "doubletake: reading the journal: invalid argument\n"; code != ExitInternal || errb.String() != want {
		t.Fatalf("exit %d, stderr %q; want exit 4, stderr %q", code, errb.String(), want)
	}
}

// TestUnreadableConfigExits4: a collector config that cannot be read is
// doubletake's failure (exit 4), whether open says "no such file" or
// EINVAL's "invalid argument" (a NUL in the path).
func TestUnreadableConfigExits4(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.yaml"), filepath.Join(os.TempDir(), "a\x00b.yaml")} {
		var out, errb bytes.Buffer
		code := Main([]string{"run", "validate", "--config", path}, Streams{Out: &out, Err: &errb})
		if code != ExitInternal || !strings.Contains(errb.String(), "cannot retrieve the configuration") {
			t.Errorf("%q: exit %d, stderr %q; want exit 4", path, code, errb.String())
		}
	}
}

// TestCollectorCommandLine: a collector's command line, as the Helm chart
// and the Operator give it to a collector image, does what the same
// command line after 'run' does; doubletake's own command lines are left
// as they are.
func TestCollectorCommandLine(t *testing.T) {
	dir := t.TempDir()
	// "--set=x=y" runs the embedded default, whose data dir is
	// ./doubletake-data: keep it out of the source tree.
	t.Chdir(dir)
	good := filepath.Join(dir, "relay.yaml")
	if err := os.WriteFile(good, []byte(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
exporters:
  debug: {}
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("receivers:\n  nosuch: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"validate", "--config=" + good},
		{"validate", "--config", good, "--set=exporters.debug.verbosity=basic"},
		{"validate", "--config=" + bad},
		{"validate", "--feature-gates=-nosuch.gate", "--config=" + good},
		{"components"},
		{"featuregate"},
		// The Operator's order: --config first, then its sorted --key=value
		// args; 'validate' after the flags is still the collector's.
		{"--config=" + bad},
		{"--config=" + good, "--set=service.pipelines.traces.exporters=[nosuch]"},
		{"--set=x=y"},
		{"--feature-gates=nosuch.gate", "--config=" + good},
	} {
		code, out, errs := runMain(args...)
		wantCode, wantOut, wantErr := runMain(append([]string{"run"}, args...)...)
		if code != wantCode || out != wantOut || errs != wantErr {
			t.Errorf("%q: exit %d, stdout %q, stderr %q\nwant (as after run) exit %d, stdout %q, stderr %q", args, code, out, errs, wantCode, wantOut, wantErr)
		}
	}
	// The runs above must differ among themselves, or the comparison
	// proves nothing: a valid config validates, an invalid one does not.
	if code, _, errs := runMain("validate", "--config="+good); code != ExitOK {
		t.Errorf("validate of a good config: exit %d, %s", code, errs)
	}
	if code, _, _ := runMain("validate", "--config="+bad); code == ExitOK {
		t.Errorf("validate of a config with an unknown receiver exits 0")
	}
	if _, out, _ := runMain("components"); !strings.Contains(out, "dedup") {
		t.Errorf("components lists no dedup:\n%s", out)
	}
	// doubletake's own commands and flags are not the collector's.
	for _, args := range [][]string{{"version"}, {"--help"}, {"--configx"}, {"scan", "--config"}} {
		if got := collectorArgs(args); !slices.Equal(got, args) {
			t.Errorf("collectorArgs(%q) = %q", args, got)
		}
	}
}
