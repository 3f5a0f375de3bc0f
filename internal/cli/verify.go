package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/verify"
)

// verifyFlags are verify's flags: the engine's options and where its
// report goes.
type verifyFlags struct {
	opts        verify.Options
	report      reportOutput // --format, --output, --junit
	hazardFiles []string
}

func newVerifyCommand(s Streams) *cobra.Command {
	f := verifyFlags{opts: verify.DefaultOptions(), report: reportOutput{format: "text"}}
	o := &f.opts
	cmd := &cobra.Command{
		Use:   "verify [flags] -- CMD [ARGS...]",
		Short: "Run a command against an in-process OTLP receiver and fail if anything arrives twice",
		Long: `Run CMD with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an in-process OTLP
receiver (gRPC, HTTP/protobuf and HTTP/JSON on one free loopback port), wait
for its final exports, and report duplicate spans, metric streams with more
than one writer (with the counter resets Prometheus would compute),
duplicate log records, and nested duplicates (one operation recorded as two
spans with different ids, one inside the other: double instrumentation),
each with a one-line diagnosis.

The per-signal variables OTEL_EXPORTER_OTLP_{TRACES,METRICS,LOGS}_ENDPOINT are
removed from CMD's environment so the one base endpoint serves every signal
over either protocol; the protocol is left to the SDK. stdin, stdout and
stderr are CMD's (with --format json and no --output, CMD's stdout goes to
verify's stderr, so that stdout carries the JSON report alone: verify
--format json -- CMD | jq .); SIGINT and SIGTERM are passed on to it, except
a SIGINT that the terminal has sent to CMD as well (^C with verify in the
foreground).

Without CMD, --listen ADDR receives until SIGINT/SIGTERM or --duration, for
long-running services. --forward also sends everything received on, so verify
can sit in a real pipeline.

When spans, log records or metric streams were exported twice by one
process, verify scans the environment CMD ran in (the active virtual
environment, the environment of a Python CMD, and the lockfiles, manifests
and environments under the working directory) with doubletake scan's engine
and hazard database, and names the release behind it with the fix scan
gives, e.g. "fastapi 0.142.2 is installed in .venv (known to attach a second
exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): upgrade to
fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs
from this environment". A clean run
never scans; the scan is bounded by --scan-timeout and --scan-max-files and
never changes the verdict (what it could not do is a note); --no-scan turns
it off.

Exit status: 0 clean; 1 duplicates or overlaps above --max-duplicate-ratio,
nested duplicates (unless --allow nested-duplicates), or undecodable OTLP
received; 2 usage error; 3 CMD failed (not found, non-zero exit, killed by a
signal; --ignore-exit to not count it), which takes precedence over 1; 4
verify itself failed (address in use, report not written); 5 nothing arrived
at all (no span, metric point or log record: an SDK not configured, an
export to the wrong port; --allow-empty for a command that exports nothing),
or a signal named by --expect never arrived.`,
		Example: `  doubletake verify -- go test ./...
  doubletake verify --format json --junit verify.xml -- node app.mjs
  doubletake verify --listen 127.0.0.1:4317 --duration 5m --forward http://collector:4317`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flags stop at CMD (SetInterspersed(false)): CMD's own flags
			// are never taken for verify's, with or without --.
			return runVerify(cmd.Context(), s, f, args, cmd.Flags().Changed("listen"))
		},
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false)
	fs.StringVar(&o.Listen, "listen", "", "receive on this address (default: a free loopback port with CMD; required without CMD)")
	fs.DurationVar(&o.Duration, "duration", 0, "without CMD: stop receiving after this long (0: until SIGINT or SIGTERM)")
	fs.StringVar(&o.Forward, "forward", "", "also forward everything received to this OTLP endpoint (http://host:port or https://host:port)")
	fs.StringVar(&o.ForwardProtocol, "forward-protocol", o.ForwardProtocol, "protocol for --forward: grpc or http (OTLP/HTTP protobuf; the URL path is a prefix for /v1/<signal>)")
	fs.DurationVar(&o.Grace, "grace", o.Grace, "after CMD exits, wait until no export has arrived for this long")
	fs.DurationVar(&o.GraceMax, "grace-max", o.GraceMax, "after CMD exits, wait at most this long for exports to go quiet")
	fs.StringVar(&f.report.format, "format", f.report.format, "report format on stdout: text or json")
	fs.StringVarP(&f.report.output, "output", "o", "", "write the report to this file instead of stdout")
	fs.StringVar(&f.report.junit, "junit", "", "also write a JUnit XML report to this file")
	fs.Float64Var(&o.MaxRatio, "max-duplicate-ratio", 0, "fail (exit 1) when extra copies / items received exceeds this (0..1); id duplicates only (spans, log records, metric points): nested duplicates are not counted, see --allow")
	fs.StringSliceVar(&o.Allow, "allow", nil, "do not fail on these finding kinds (still reported); repeatable or comma-separated: "+strings.Join(verify.AllowValues(), ", "))
	fs.BoolVar(&o.IgnoreExit, "ignore-exit", false, "do not fail (exit 3) when CMD fails; its status is still reported")
	fs.BoolVar(&o.AllowEmpty, "allow-empty", false, "pass when nothing arrives at all (a command that exports nothing); without it that is exit 5")
	fs.StringSliceVar(&o.Expect, "expect", nil, "fail (exit 5) when one of these signals never arrives; comma-separated: "+strings.Join(verify.ExpectValues(), ", "))
	fs.DurationVar(&o.ExportInterval, "export-interval", o.ExportInterval, "identical copies closer than this are diagnosed as two exporters, further apart as a re-send")
	fs.BoolVar(&o.Scan.Disabled, "no-scan", false, "after a double export, do not scan CMD's environment for the release behind it")
	fs.StringArrayVar(&f.hazardFiles, "hazards", nil, "also load hazard entries from this YAML `FILE` for the scan after a double export (repeatable; as doubletake scan --hazards)")
	fs.DurationVar(&o.Scan.Timeout, "scan-timeout", o.Scan.Timeout, "stop the scan after a double export after this long")
	fs.IntVar(&o.Scan.MaxFiles, "scan-max-files", o.Scan.MaxFiles, "stop the scan after a double export after reading this many files")
	return cmd
}

// runVerify checks the flags, runs the engine with this process's SIGINT
// and SIGTERM, and writes its report.
func runVerify(ctx context.Context, s Streams, f verifyFlags, args []string, listenSet bool) error {
	if err := f.report.validate("verify"); err != nil {
		return err
	}
	if listenSet && f.opts.Listen == "" {
		return usageError("verify: --listen \"\": want host:port")
	}
	if err := f.opts.Validate(args); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if len(f.hazardFiles) > 0 {
		// One loader with scan: a file that does not validate is a
		// usage error before CMD runs.
		db, err := loadHazards(f.hazardFiles)
		if err != nil {
			var ee *ExitError
			if errors.As(err, &ee) {
				ee.Err = fmt.Errorf("verify: --hazards: %w", ee.Err)
			}
			return err
		}
		f.opts.Scan.Hazards = db
	}
	f.opts.ReportOnStdout = f.report.jsonToStdout()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	rep, err := verify.Run(ctx, verify.Streams(s), sigs, f.opts, args)
	var notStarted *verify.NotStartedError
	switch {
	case errors.As(err, &notStarted):
		// A JSON report is still written, saying so: a pipeline reading
		// stdout gets a report on every run.
		if f.report.format == "json" {
			rep.ExitCode = verdictExit(rep.Verdict)
			_ = writeVerdict(s, f.report, rep) // its error is the one returned below
		}
		return &ExitError{Code: ExitCommand, Err: err}
	case err != nil:
		return &ExitError{Code: ExitInternal, Err: err}
	}
	rep.ExitCode = verdictExit(rep.Verdict)
	return writeVerdict(s, f.report, rep)
}

// verdictExit is verify's exit status for a verdict.
func verdictExit(v verify.Verdict) int {
	switch v {
	case verify.Clean:
		return ExitOK
	case verify.Duplicates, verify.NestedDuplicates, verify.Malformed:
		return ExitFindings
	case verify.CommandFailed, verify.CommandNotStarted:
		return ExitCommand
	case verify.NothingReceived, verify.ExpectedSignalMissing:
		return ExitNothing
	}
	return ExitInternal
}

// writeVerdict writes the report where --format, --output and --junit say
// and turns the verdict into verify's exit status.
func writeVerdict(s Streams, out reportOutput, rep *verify.Report) error {
	if err := out.write(s.Out, renderings{
		value: rep,
		text:  func(w io.Writer) error { return verify.WriteText(w, rep) },
		junit: func(w io.Writer) error { return verify.WriteJUnit(w, rep) },
	}); err != nil {
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("verify: %w", err)}
	}
	if rep.Malformed > 0 {
		fmt.Fprintf(s.Err, "doubletake: verify: %s could not be decoded and refused (see the client's errors)\n",
			plural(int(rep.Malformed), "export request"))
	}
	if rep.ExitCode == ExitOK {
		return nil
	}
	return &ExitError{Code: rep.ExitCode, Err: errors.New("verify: " + rep.VerdictReason)}
}
