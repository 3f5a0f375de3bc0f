// Package cli holds doubletake's command tree: one file per subcommand.
// Constructors take their dependencies (the I/O streams); there are no globals.
package cli

import (
	"errors"
	"fmt"
	"io"
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

// usageError marks an error as a usage error (exit 2).
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// NewRootCommand builds the whole command tree.
func NewRootCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "doubletake",
		Short: "Make telemetry arrive exactly once, and prove it",
		Long: `doubletake finds and removes telemetry that is exported more than once:
'run' drops it in flight, 'verify' fails a CI job that exports twice,
'audit' measures what backends already stored, 'scan' finds the releases
that cause it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	root.AddCommand(
		newRunCommand(s),
		newVerifyCommand(s),
		newAuditCommand(s),
		newScanCommand(s),
		newVersionCommand(s),
	)
	return root
}

// Main runs the command tree with args and returns the process exit code.
func Main(args []string, s Streams) int {
	root := NewRootCommand(s)
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
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(msg, "doubletake: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(msg, "doubletake: %v\n", err)
	if isUsage(err) {
		return ExitUsage
	}
	return ExitInternal
}

// isUsage recognises cobra's own argument and command errors, which it does
// not route through the flag error func.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
