// Package cli holds doubletake's command tree: one file per subcommand
// (run.go, verify.go, audit.go and audit_<name>.go for each of its own,
// scan.go, version.go), each parsing its flags and calling its engine
// (internal/verify, internal/audit, internal/scan); what several commands
// share in root.go (exit codes, typed errors), report.go (the one report
// writer) and flagvalues.go. Constructors take their dependencies (the I/O
// streams); there are no globals.
package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/termsafe"
)

// Exit codes shared by every subcommand.
const (
	ExitOK       = 0 // success, nothing found
	ExitFindings = 1 // the command ran and found duplicates, overlaps or hazards
	ExitUsage    = 2 // bad flags or arguments
	ExitCommand  = 3 // the command under test failed (verify)
	ExitInternal = 4 // doubletake itself failed (I/O, unreachable backend, ...)
	ExitNothing  = 5 // verify: nothing arrived, or a signal --expect names never arrived
	// ExitNotJudged: scan, with --fail-not-judged: nothing was found and
	// every file was read, but something could not be judged.
	ExitNotJudged = 6
)

// Streams are the standard streams a command reads and writes: data to Out,
// diagnostics to Err.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// ExitError carries an exit code out of a command's RunE. Commands return it
// when they want a code other than ExitInternal for a failure, or ExitFindings
// for a successful run that found something.
type ExitError struct {
	Code int
	Err  error // may be nil: the command already printed what it had to say
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageError is a usage error (exit 2) where it arises: a flag or argument
// the command refuses.
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// flagError types the errors cobra reports while parsing flags (unknown
// flag, missing or invalid value): usage errors. Set on the root, it holds
// for every subcommand.
func flagError(_ *cobra.Command, err error) error {
	return &ExitError{Code: ExitUsage, Err: err}
}

// runHooks are the functions of a command that run its code, after cobra
// has parsed and validated the command line.
func runHooks(c *cobra.Command) []*func(*cobra.Command, []string) error {
	return []*func(*cobra.Command, []string) error{&c.PersistentPreRunE, &c.PreRunE, &c.RunE, &c.PostRunE, &c.PersistentPostRunE}
}

// typeRunErrors makes every error that a command's code returns, in cmd and
// below, an *ExitError: one the code did not type is doubletake's own
// failure (exit 4). What cobra reports before a command runs (an unknown
// command, an argument count the command refuses, a required flag not
// set) is then the only untyped error Main sees: a usage error.
func typeRunErrors(cmd *cobra.Command) {
	for _, hook := range runHooks(cmd) {
		if f := *hook; f != nil {
			*hook = func(c *cobra.Command, args []string) error {
				err := f(c, args)
				var ee *ExitError
				if err == nil || errors.As(err, &ee) {
					return err
				}
				return &ExitError{Code: ExitInternal, Err: err}
			}
		}
	}
	for _, sub := range cmd.Commands() {
		typeRunErrors(sub)
	}
}

// NewRootCommand builds the whole command tree.
func NewRootCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "doubletake",
		Short: "Make telemetry arrive exactly once, and prove it",
		Long: `doubletake finds and removes telemetry that is exported more than once:
'run' drops it in flight, 'verify' fails a CI job that exports twice,
'audit' measures what backends already stored, 'scan' finds the releases
that cause it.

It also takes a collector's command line, as the OpenTelemetry Helm chart
and Operator start a collector image: 'doubletake --config=FILE' (with
--set and --feature-gates) runs as 'doubletake run --config=FILE', and
'doubletake validate' and 'doubletake components' as their 'run' forms.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newRunCommand(s),
		newVerifyCommand(s),
		newAuditCommand(s),
		newScanCommand(s),
		newVersionCommand(s),
		newCheckStorageCommand(),
	)
	return root
}

// Main runs the command tree with args and returns the process exit code.
func Main(args []string, s Streams) int {
	return execute(NewRootCommand(s), collectorArgs(args), s)
}

// collectorSubcommands are the subcommands otelcol's command has, which
// 'run' has too.
var collectorSubcommands = []string{"validate", "components", "featuregate", "print-config"}

// collectorFlags are otelcol's own flags, which 'run' has too.
var collectorFlags = []string{"config", "set", "feature-gates"}

// collectorArgs returns a collector's command line as 'run' takes it. The
// OpenTelemetry Helm chart starts a collector image as `/BINARY
// --config=/conf/relay.yaml [extraArgs]`, the Operator as `ENTRYPOINT
// --config=/conf/collector.yaml [--key=value...]`: a command line that
// begins with one of the collector's flags or subcommands is the
// collector's, and 'run' is put in front of it. Any other command line,
// doubletake's own, is returned as it is.
func collectorArgs(args []string) []string {
	if len(args) == 0 {
		return args
	}
	first := args[0]
	if slices.Contains(collectorSubcommands, first) {
		return append([]string{"run"}, args...)
	}
	if name, ok := strings.CutPrefix(first, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		if slices.Contains(collectorFlags, name) {
			return append([]string{"run"}, args...)
		}
	}
	return args
}

// execute runs root with args and returns the exit code: an *ExitError's
// code; for any other error, ExitUsage. Any other error comes from cobra
// itself (see typeRunErrors): its checks of the command line, or, rarely,
// a failure to print --version or the commands cobra adds (help,
// completion), which are not typed.
func execute(root *cobra.Command, args []string, s Streams) int {
	typeRunErrors(root)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	// An error can quote its input (a file's line, a server's answer):
	// escape what could drive the terminal.
	msg := termsafe.NewWriter(s.Err)
	defer msg.Flush()
	var ee *ExitError
	if !errors.As(err, &ee) {
		ee = &ExitError{Code: ExitUsage, Err: err}
	}
	if ee.Err != nil {
		fmt.Fprintf(msg, "doubletake: %v\n", ee.Err)
	}
	return ee.Code
}
