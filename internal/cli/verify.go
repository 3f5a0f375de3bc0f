package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
)

// verify is spread over files by concern: this one holds the command, its
// flags and the run from start to exit status; verify_receive.go the
// in-process receiver; verify_child.go CMD, its environment and the
// signals; verify_verdict.go the report and its verdict; verify_render.go
// the text and JUnit renderings; verify_scan.go the scan for the release
// behind a double export.

// Defaults of verify's flags.
const (
	defaultGrace    = 2 * time.Second
	defaultGraceMax = 10 * time.Second
)

type verifyOptions struct {
	listen          string
	duration        time.Duration
	forward         string
	forwardProtocol string
	grace           time.Duration
	graceMax        time.Duration
	report          reportOutput // --format, --output, --junit
	maxRatio        float64
	ignoreExit      bool
	exportInterval  time.Duration
	allow           []string
	allowEmpty      bool
	expect          []string
	hazardFiles     []string
	noScan          bool
	scanTimeout     time.Duration
	scanMaxFiles    int
}

// expectValues are the signals --expect accepts.
var expectValues = []string{"traces", "metrics", "logs"}

// allowNestedDuplicates is the --allow value that passes nested duplicates.
const allowNestedDuplicates = "nested-duplicates"

// allowValues are the finding kinds --allow accepts.
var allowValues = []string{allowNestedDuplicates}

// allows reports whether --allow names kind.
func (o *verifyOptions) allows(kind string) bool {
	for _, a := range o.allow {
		if strings.TrimSpace(a) == kind {
			return true
		}
	}
	return false
}

func newVerifyCommand(s Streams) *cobra.Command {
	o := verifyOptions{grace: defaultGrace, graceMax: defaultGraceMax, report: reportOutput{format: "text"}, forwardProtocol: "grpc", exportInterval: analyze.DefaultExportInterval,
		scanTimeout: defaultScanTimeout, scanMaxFiles: defaultScanMaxFiles}
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
and hazard database, and names the release behind it, e.g. "fastapi 0.142.2
is installed in .venv (known to attach a second exporter when
OTEL_EXPORTER_OTLP_ENDPOINT is set): pin fastapi!=0.142.*". A clean run
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
			return runVerify(cmd.Context(), s, o, args, cmd.Flags().Changed("listen"))
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&o.listen, "listen", "", "receive on this address (default: a free loopback port with CMD; required without CMD)")
	f.DurationVar(&o.duration, "duration", 0, "without CMD: stop receiving after this long (0: until SIGINT or SIGTERM)")
	f.StringVar(&o.forward, "forward", "", "also forward everything received to this OTLP endpoint (http://host:port or https://host:port)")
	f.StringVar(&o.forwardProtocol, "forward-protocol", o.forwardProtocol, "protocol for --forward: grpc or http (OTLP/HTTP protobuf; the URL path is a prefix for /v1/<signal>)")
	f.DurationVar(&o.grace, "grace", o.grace, "after CMD exits, wait until no export has arrived for this long")
	f.DurationVar(&o.graceMax, "grace-max", o.graceMax, "after CMD exits, wait at most this long for exports to go quiet")
	f.StringVar(&o.report.format, "format", o.report.format, "report format on stdout: text or json")
	f.StringVarP(&o.report.output, "output", "o", "", "write the report to this file instead of stdout")
	f.StringVar(&o.report.junit, "junit", "", "also write a JUnit XML report to this file")
	f.Float64Var(&o.maxRatio, "max-duplicate-ratio", 0, "fail (exit 1) when extra copies / items received exceeds this (0..1); id duplicates only (spans, log records, metric points): nested duplicates are not counted, see --allow")
	f.StringSliceVar(&o.allow, "allow", nil, "do not fail on these finding kinds (still reported); repeatable or comma-separated: "+strings.Join(allowValues, ", "))
	f.BoolVar(&o.ignoreExit, "ignore-exit", false, "do not fail (exit 3) when CMD fails; its status is still reported")
	f.BoolVar(&o.allowEmpty, "allow-empty", false, "pass when nothing arrives at all (a command that exports nothing); without it that is exit 5")
	f.StringSliceVar(&o.expect, "expect", nil, "fail (exit 5) when one of these signals never arrives; comma-separated: "+strings.Join(expectValues, ", "))
	f.DurationVar(&o.exportInterval, "export-interval", o.exportInterval, "identical copies closer than this are diagnosed as two exporters, further apart as a re-send")
	f.BoolVar(&o.noScan, "no-scan", false, "after a double export, do not scan CMD's environment for the release behind it")
	f.StringArrayVar(&o.hazardFiles, "hazards", nil, "also load hazard entries from this YAML `FILE` for the scan after a double export (repeatable; as doubletake scan --hazards)")
	f.DurationVar(&o.scanTimeout, "scan-timeout", o.scanTimeout, "stop the scan after a double export after this long")
	f.IntVar(&o.scanMaxFiles, "scan-max-files", o.scanMaxFiles, "stop the scan after a double export after reading this many files")
	return cmd
}

func (o *verifyOptions) validate(args []string, listenSet bool) error {
	if err := o.report.validate("verify"); err != nil {
		return err
	}
	if o.maxRatio < 0 || o.maxRatio > 1 || o.maxRatio != o.maxRatio {
		return usageError("verify: --max-duplicate-ratio %v: want a number from 0 to 1", o.maxRatio)
	}
	if o.grace <= 0 {
		return usageError("verify: --grace %s: want a duration above 0", o.grace)
	}
	if o.graceMax < o.grace {
		return usageError("verify: --grace-max %s: want at least --grace (%s)", o.graceMax, o.grace)
	}
	if o.exportInterval <= 0 {
		return usageError("verify: --export-interval %s: want a duration above 0", o.exportInterval)
	}
	for _, a := range o.allow {
		if !slices.Contains(allowValues, strings.TrimSpace(a)) {
			return usageError("verify: --allow %q: want %s", a, strings.Join(allowValues, " or "))
		}
	}
	for _, e := range o.expect {
		if !slices.Contains(expectValues, strings.TrimSpace(e)) {
			return usageError("verify: --expect %q: want %s", e, strings.Join(expectValues, ", "))
		}
	}
	if o.allowEmpty && len(o.expect) > 0 {
		return usageError("verify: --allow-empty and --expect contradict each other; give one")
	}
	if o.scanTimeout <= 0 {
		return usageError("verify: --scan-timeout %s: want a duration above 0", o.scanTimeout)
	}
	if o.scanMaxFiles <= 0 {
		return usageError("verify: --scan-max-files %d: want a number above 0", o.scanMaxFiles)
	}
	if o.duration < 0 {
		return usageError("verify: --duration %s: want a duration of 0 or more", o.duration)
	}
	if len(args) == 0 {
		if !listenSet {
			return usageError("verify: give a command after -- (doubletake verify -- CMD ARGS...), or --listen ADDR to receive from running services")
		}
	} else if o.duration != 0 {
		return usageError("verify: --duration is for --listen without a command; verify stops when CMD exits")
	}
	if listenSet {
		if _, _, err := net.SplitHostPort(o.listen); err != nil {
			return usageError("verify: --listen %q: want host:port (%v)", o.listen, err)
		}
	}
	if o.forward == "" {
		if o.forwardProtocol != "grpc" && o.forwardProtocol != "http" {
			return usageError("verify: --forward-protocol %q: want grpc or http", o.forwardProtocol)
		}
		return nil
	}
	if _, err := capture.ParseTarget(o.forward, o.forwardProtocol); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("verify: --forward: %w", err)}
	}
	return nil
}

// runVerify receives while CMD runs (or, without CMD, until a signal or
// --duration), then judges what arrived and reports it.
func runVerify(ctx context.Context, s Streams, o verifyOptions, args []string, listenSet bool) error {
	if err := o.validate(args, listenSet); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	scanner, err := newReleaseScanner(o)
	if err != nil {
		return err
	}
	recv, err := startReceiver(o, listenSet)
	if err != nil {
		return err
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	rep := newVerifyReport(recv.srv.Endpoint(), o)
	var cmdErr error
	if len(args) > 0 {
		rep.Command, cmdErr = runChild(s, args, recv.srv, sigs, o)
	} else {
		rep.ListenedFor = receiveUntil(ctx, s, recv.srv.Endpoint(), sigs, o.duration)
	}
	rep.Forward = recv.stop(s, o.forward)
	if cmdErr != nil {
		// CMD never ran. A JSON report is still written, saying so: a
		// pipeline reading stdout gets a report on every run.
		if o.report.format == "json" {
			rep.judge(recv.report(), o)
			rep.Verdict, rep.ExitCode, rep.VerdictReason = "command-not-started", ExitCommand, cmdErr.Error()
			_ = writeVerdict(s, o, rep) // its error is the one returned below
		}
		return &ExitError{Code: ExitCommand, Err: cmdErr}
	}

	rep.judge(recv.report(), o)
	if len(args) > 0 && !o.noScan && doubleExport(rep.Report) {
		// Only after a double export: a clean run costs nothing. The
		// verdict is decided; the scan only adds to the diagnosis.
		rep.ReleaseScan = scanner.run(ctx, args)
	}
	return writeVerdict(s, o, rep)
}

// newReleaseScanner is the scanner for the release behind a double export,
// with the hazards --hazards adds. One loader with scan: a file that does
// not validate is a usage error before CMD runs.
func newReleaseScanner(o verifyOptions) (*releaseScanner, error) {
	scanner := &releaseScanner{bounds: scanBounds{timeout: o.scanTimeout, maxFiles: o.scanMaxFiles}}
	if len(o.hazardFiles) == 0 {
		return scanner, nil
	}
	db, err := loadHazards(o.hazardFiles)
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			ee.Err = fmt.Errorf("verify: --hazards: %w", ee.Err)
		}
		return nil, err
	}
	scanner.db = db
	return scanner, nil
}

// writeVerdict writes the report where --format, --output and --junit say
// and turns the verdict into verify's exit status.
func writeVerdict(s Streams, o verifyOptions, rep *verifyReport) error {
	if err := o.report.write(s.Out, renderings{
		value: rep,
		text:  func(w io.Writer) error { return writeVerifyText(w, rep) },
		junit: func(w io.Writer) error { return writeVerifyJUnit(w, rep) },
	}); err != nil {
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("verify: %w", err)}
	}
	if rep.Malformed > 0 {
		fmt.Fprintf(s.Err, "doubletake: verify: %s could not be decoded and refused (see the client's errors)\n",
			countNoun(int(rep.Malformed), "export request", "export requests"))
	}
	if rep.ExitCode == ExitOK {
		return nil
	}
	return &ExitError{Code: rep.ExitCode, Err: errors.New("verify: " + rep.VerdictReason)}
}
