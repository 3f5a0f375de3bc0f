package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
	"github.com/doubletake/doubletake/internal/termsafe"
)

// Defaults of verify's flags.
const (
	defaultGrace    = 2 * time.Second
	defaultGraceMax = 10 * time.Second
)

// perSignalEndpointVars are removed from CMD's environment so that
// OTEL_EXPORTER_OTLP_ENDPOINT reaches every signal of every SDK. No single
// per-signal value works for both protocols: OTLP/HTTP uses a per-signal URL
// as is (it needs the /v1/<signal> path), while the Go SDK's gRPC exporters
// dial host+path (a path breaks the dial). The base variable works for both:
// HTTP exporters append /v1/<signal>, gRPC exporters use host:port.
var perSignalEndpointVars = []string{
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
}

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

// commandResult is what happened to CMD.
type commandResult struct {
	Argv     []string       `json:"argv"`
	ExitCode int            `json:"exit_code"`        // -1 when killed by a signal or not started
	Signal   string         `json:"signal,omitempty"` // the signal that ended it
	Error    string         `json:"error,omitempty"`  // why it could not run
	Failed   bool           `json:"failed"`
	Elapsed  analyze.Millis `json:"elapsed_ms"`
}

func (c *commandResult) describe() string {
	name := filepath.Base(c.Argv[0])
	switch {
	case c.Error != "":
		return fmt.Sprintf("%s could not run: %s", name, c.Error)
	case c.Signal != "":
		return fmt.Sprintf("%s was killed by signal %s after %s", name, c.Signal, c.Elapsed)
	default:
		return fmt.Sprintf("%s exited with status %d after %s", name, c.ExitCode, c.Elapsed)
	}
}

// verifyReport is what verify prints.
type verifyReport struct {
	Endpoint    string                `json:"endpoint"`
	Command     *commandResult        `json:"command,omitempty"`
	ListenedFor analyze.Millis        `json:"listened_ms,omitempty"`
	Forward     *capture.ForwardStats `json:"forward,omitempty"`
	MaxRatio    float64               `json:"max_duplicate_ratio"`
	Allow       []string              `json:"allow,omitempty"`
	AllowEmpty  bool                  `json:"allow_empty,omitempty"`
	Expect      []string              `json:"expect,omitempty"`
	// Missing names the signals of which nothing arrived: every signal
	// --expect names that did not, or all three when nothing arrived.
	Missing       []string `json:"missing,omitempty"`
	Ratio         float64  `json:"duplicate_ratio"`
	Verdict       string   `json:"verdict"`
	ExitCode      int      `json:"exit_code"`
	VerdictReason string   `json:"verdict_reason"`
	// ReleaseScan is what the scan of CMD's environment found after a
	// double export; absent when there was no double export, no CMD, or
	// --no-scan.
	ReleaseScan *releaseScan `json:"release_scan,omitempty"`
	*analyze.Report
}

func runVerify(ctx context.Context, s Streams, o verifyOptions, args []string, listenSet bool) error {
	if err := o.validate(args, listenSet); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	scanner := &releaseScanner{bounds: scanBounds{timeout: o.scanTimeout, maxFiles: o.scanMaxFiles}}
	if len(o.hazardFiles) > 0 {
		// One loader with scan: a file that does not validate is a usage
		// error before CMD runs.
		db, err := loadHazards(o.hazardFiles)
		if err != nil {
			var ee *ExitError
			if errors.As(err, &ee) {
				ee.Err = fmt.Errorf("verify: --hazards: %w", ee.Err)
			}
			return err
		}
		scanner.db = db
	}
	addr := o.listen
	if !listenSet {
		addr = "127.0.0.1:0"
	}

	var fwd *capture.Forwarder
	if o.forward != "" {
		target, _ := capture.ParseTarget(o.forward, o.forwardProtocol)
		var err error
		if fwd, err = capture.NewForwarder(target); err != nil {
			return &ExitError{Code: ExitInternal, Err: fmt.Errorf("verify: --forward %s: %w", redactURL(o.forward), err)}
		}
	}

	an := analyze.New(analyze.Options{ExportInterval: o.exportInterval})
	var mu sync.Mutex
	handler := func(r *capture.Request) error {
		at := analyze.Arrival{Seq: r.Seq, Received: r.Received, Peer: r.Peer, Protocol: string(r.Protocol)}
		mu.Lock()
		switch r.Signal {
		case capture.Traces:
			an.AddTraces(at, r.Traces)
		case capture.Metrics:
			an.AddMetrics(at, r.Metrics)
		case capture.Logs:
			an.AddLogs(at, r.Logs)
		}
		mu.Unlock()
		if fwd != nil {
			fwd.Enqueue(r)
		}
		return nil
	}
	srv, err := capture.Listen(addr, handler)
	if err != nil {
		if fwd != nil {
			fwd.Close(time.Second)
		}
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("verify: %w%s", err, listenHint(err, listenSet))}
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	rep := &verifyReport{Endpoint: srv.Endpoint(), MaxRatio: o.maxRatio, AllowEmpty: o.allowEmpty}
	for _, a := range o.allow {
		if a = strings.TrimSpace(a); !slices.Contains(rep.Allow, a) {
			rep.Allow = append(rep.Allow, a)
		}
	}
	for _, e := range o.expect {
		if e = strings.TrimSpace(e); !slices.Contains(rep.Expect, e) {
			rep.Expect = append(rep.Expect, e)
		}
	}
	var cmdErr error
	if len(args) > 0 {
		rep.Command, cmdErr = runChild(s, args, srv, sigs, o)
	} else {
		fmt.Fprintf(s.Err, "doubletake: verify: receiving OTLP (gRPC, HTTP/protobuf, HTTP/JSON) on %s %s\n", srv.Endpoint(), untilWhat(o.duration))
		started := time.Now()
		var timeout <-chan time.Time
		if o.duration > 0 {
			t := time.NewTimer(o.duration)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(s.Err, "doubletake: verify: %s received, stopping\n", sig)
		case <-timeout:
		case <-ctx.Done():
		}
		rep.ListenedFor = analyze.Millis(time.Since(started))
	}

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	shutErr := srv.Shutdown(sctx)
	cancel()
	if shutErr != nil {
		_ = srv.Close()
	}
	if fwd != nil {
		st := fwd.Close(10 * time.Second)
		rep.Forward = &st
		if st.Failed > 0 || st.Dropped > 0 {
			fmt.Fprintf(s.Err, "doubletake: verify: forwarding to %s: %d of %d requests failed, %d dropped (last error: %s)\n",
				redactURL(o.forward), st.Failed, st.Received, st.Dropped, termsafe.Escape(st.LastError))
		}
	}
	if cmdErr != nil {
		// CMD never ran: there is nothing to report.
		return &ExitError{Code: ExitCommand, Err: cmdErr}
	}

	mu.Lock()
	rep.Report = an.Report()
	mu.Unlock()
	rep.Report.Malformed = srv.Malformed()
	rep.Ratio = rep.Report.DuplicateRatio()
	rep.decide(o)
	if len(args) > 0 && !o.noScan && doubleExport(rep.Report) {
		// Only after a double export: a clean run costs nothing. The
		// verdict is decided; the scan only adds to the diagnosis.
		rep.ReleaseScan = scanner.run(ctx, args)
	}

	if err := o.report.write(s.Out, renderings{
		value: rep,
		text:  func(w io.Writer) error { return writeVerifyText(w, rep) },
		junit: func(w io.Writer) error { return writeVerifyJUnit(w, rep) },
	}); err != nil {
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("verify: %w", err)}
	}
	if rep.Report.Malformed > 0 {
		fmt.Fprintf(s.Err, "doubletake: verify: %s could not be decoded and refused (see the client's errors)\n",
			countNoun(int(rep.Report.Malformed), "export request", "export requests"))
	}
	if rep.ExitCode == ExitOK {
		return nil
	}
	return &ExitError{Code: rep.ExitCode, Err: errors.New("verify: " + rep.VerdictReason)}
}

// received reports whether any item of signal (traces, metrics, logs)
// arrived.
func (r *verifyReport) received(signal string) bool {
	switch signal {
	case "traces":
		return r.Report.Spans.Received > 0
	case "metrics":
		return r.Report.Metrics.Points > 0
	case "logs":
		return r.Report.Logs.Received > 0
	}
	return false
}

// missing lists what is missing: every expected signal that never
// arrived; all three when nothing arrived at all (no item, no malformed
// request) and that is not allowed.
func (r *verifyReport) missing() []string {
	var out []string
	for _, sig := range r.Expect {
		if !r.received(sig) {
			out = append(out, sig)
		}
	}
	if len(out) > 0 || r.AllowEmpty || r.Report.Malformed > 0 {
		return out
	}
	for _, sig := range expectValues {
		if r.received(sig) {
			return nil
		}
	}
	return slices.Clone(expectValues)
}

// nothingReason says what did not arrive, and the likely causes.
func (r *verifyReport) nothingReason() string {
	if len(r.Expect) == 0 {
		q := r.Report.Requests
		return fmt.Sprintf("nothing arrived: no span, metric point or log record in %s (is the SDK configured to export, to OTEL_EXPORTER_OTLP_ENDPOINT?); --allow-empty if the command exports nothing",
			countNoun(q.Traces+q.Metrics+q.Logs, "request", "requests"))
	}
	return fmt.Sprintf("expected %s never arrived (--expect %s)", strings.Join(r.Missing, " and "), strings.Join(r.Expect, ","))
}

// decide sets the verdict and exit code.
func (r *verifyReport) decide(o verifyOptions) {
	r.Missing = r.missing()
	var problems []string
	if r.Ratio > o.maxRatio {
		problems = append(problems, fmt.Sprintf("duplicate ratio %.4g exceeds --max-duplicate-ratio %g", r.Ratio, o.maxRatio))
	}
	nested := r.Report.NestedDuplicates()
	nestedFails := nested > 0 && !o.allows(allowNestedDuplicates)
	if nestedFails {
		problems = append(problems, nestedSummary(r.Report, "; --allow nested-duplicates to pass"))
	}
	if r.Report.Malformed > 0 {
		problems = append(problems, countNoun(int(r.Report.Malformed), "malformed export request", "malformed export requests"))
	}
	switch {
	case r.Command != nil && r.Command.Failed && !o.ignoreExit:
		r.Verdict, r.ExitCode = "command-failed", ExitCommand
		r.VerdictReason = r.Command.describe()
		if len(problems) > 0 {
			r.VerdictReason += "; also " + strings.Join(problems, ", ")
		}
	case len(problems) > 0:
		r.Verdict, r.ExitCode = "duplicates", ExitFindings
		switch {
		case r.Ratio > o.maxRatio:
		case nestedFails:
			r.Verdict = "nested-duplicates"
		case r.Report.Malformed > 0:
			r.Verdict = "malformed"
		}
		r.VerdictReason = strings.Join(problems, ", ")
	case len(r.Missing) > 0:
		r.Verdict, r.ExitCode = "nothing-received", ExitNothing
		if len(r.Expect) > 0 {
			r.Verdict = "expected-signal-missing"
		}
		r.VerdictReason = r.nothingReason()
	default:
		r.Verdict, r.ExitCode = "clean", ExitOK
		r.VerdictReason = "nothing arrived twice"
		if r.Report.Spans.Received+r.Report.Metrics.Points+r.Report.Logs.Received == 0 {
			r.VerdictReason = "nothing arrived, allowed by --allow-empty"
		}
		if r.Ratio > 0 {
			r.VerdictReason = fmt.Sprintf("duplicate ratio %.4g within --max-duplicate-ratio %g", r.Ratio, o.maxRatio)
		}
		if nested > 0 {
			r.VerdictReason += "; " + nestedSummary(r.Report, "") + " allowed by --allow nested-duplicates"
		}
	}
	if len(r.Missing) > 0 && r.ExitCode != ExitNothing {
		// A failed command or findings decide the code; what is missing
		// is still said.
		r.VerdictReason += "; also " + r.nothingReason()
	}
}

// nestedSummary says how many nested duplicates the report has, with note
// inside the parentheses.
func nestedSummary(r *analyze.Report, note string) string {
	return fmt.Sprintf("%s (double instrumentation, %s%s)",
		countNoun(r.NestedDuplicates(), "nested duplicate", "nested duplicates"),
		countNoun(len(r.Nested.Findings), "finding", "findings"), note)
}

// countNoun renders n with the noun in the right number.
func countNoun(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func untilWhat(d time.Duration) string {
	if d > 0 {
		return fmt.Sprintf("for %s (or until SIGINT/SIGTERM)", d)
	}
	return "until SIGINT/SIGTERM"
}

func listenHint(err error, listenSet bool) string {
	if listenSet && errors.Is(err, syscall.EADDRINUSE) {
		return " (another process holds this port; choose another --listen address, or leave --listen out to use a free port)"
	}
	return ""
}

// childEnv is env with OTEL_EXPORTER_OTLP_ENDPOINT set to endpoint and the
// per-signal endpoint variables removed. It returns the names it removed.
func childEnv(env []string, endpoint string) ([]string, []string) {
	out := make([]string, 0, len(env)+1)
	var removed []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "OTEL_EXPORTER_OTLP_ENDPOINT":
			continue
		case isPerSignalEndpoint(name):
			removed = append(removed, name)
			continue
		}
		out = append(out, kv)
	}
	return append(out, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint), removed
}

func isPerSignalEndpoint(name string) bool {
	for _, v := range perSignalEndpointVars {
		if name == v {
			return true
		}
	}
	return false
}

// runChild runs CMD, passing signals on, then waits for its exports to go
// quiet. The error is set only when CMD could not be started.
func runChild(s Streams, args []string, srv *capture.Server, sigs <-chan os.Signal, o verifyOptions) (*commandResult, error) {
	res := &commandResult{Argv: args, ExitCode: -1}
	c := exec.Command(args[0], args[1:]...)
	env, removed := childEnv(os.Environ(), srv.Endpoint())
	for _, name := range removed {
		fmt.Fprintf(s.Err, "doubletake: verify: %s is not passed to the command, so that every signal goes to the receiver\n", name)
	}
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = s.In, s.Out, s.Err
	if o.report.jsonToStdout() {
		// verify's stdout carries the JSON report alone, so that a parser
		// reading it gets the report alone.
		c.Stdout = s.Err
	}
	started := time.Now()
	if err := c.Start(); err != nil {
		res.Error = err.Error()
		res.Failed = true
		return res, fmt.Errorf("verify: cannot run %q: %w", args[0], unwrapExec(err))
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var waitErr error
wait:
	for {
		select {
		case waitErr = <-done:
			break wait
		case sig := <-sigs:
			// CMD runs in verify's process group: a ^C at a terminal where
			// verify runs in the foreground (asked now: a job can be moved
			// to the background) has reached CMD directly. Only what the
			// terminal cannot have sent (SIGTERM, a SIGINT sent to verify
			// alone) is passed on.
			if sig == os.Interrupt && interruptFromTerminal(s.In, s.Out, s.Err) {
				continue
			}
			_ = c.Process.Signal(sig)
		}
	}
	exited := time.Now()
	res.Elapsed = analyze.Millis(exited.Sub(started))
	if ps := c.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
			res.ExitCode = -1
		}
	}
	if waitErr != nil && c.ProcessState == nil {
		res.Error = waitErr.Error()
	}
	res.Failed = res.ExitCode != 0

	// Final flushes: wait until nothing has arrived for --grace, at most
	// --grace-max after CMD exited; a signal cuts the wait short.
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		last := srv.LastReceived()
		if last.Before(exited) {
			last = exited
		}
		now := time.Now()
		if now.Sub(last) >= o.grace || now.Sub(exited) >= o.graceMax {
			return res, nil
		}
		select {
		case <-tick.C:
		case <-sigs:
			return res, nil
		}
	}
}

// unwrapExec keeps the useful part of an exec error.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func writeVerifyText(w io.Writer, r *verifyReport) error {
	var b strings.Builder
	b.WriteString("doubletake verify: ")
	if r.Command != nil {
		b.WriteString(r.Command.describe())
	} else {
		fmt.Fprintf(&b, "received on %s for %s", r.Endpoint, r.ListenedFor)
	}
	q := r.Report.Requests
	fmt.Fprintf(&b, "\nrequests: %d traces, %d metrics, %d logs on %s", q.Traces, q.Metrics, q.Logs, countNoun(q.Connections, "connection", "connections"))
	if len(q.Protocols) > 0 {
		names := make([]string, 0, len(q.Protocols))
		for p := range q.Protocols {
			names = append(names, p)
		}
		sort.Strings(names)
		for i, p := range names {
			names[i] = fmt.Sprintf("%s %d", p, q.Protocols[p])
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(names, ", "))
	}
	if q.WholeRepeats > 0 {
		fmt.Fprintf(&b, "; %s repeated an earlier request item for item", countNoun(q.WholeRepeats, "request", "requests"))
	}
	if r.Forward != nil {
		fmt.Fprintf(&b, "\nforwarded: %d of %d requests sent, %d failed, %d dropped", r.Forward.Sent, r.Forward.Received, r.Forward.Failed, r.Forward.Dropped)
	}
	b.WriteString("\n\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := analyze.WriteText(w, r.Report); err != nil {
		return err
	}
	if r.ReleaseScan != nil {
		if _, err := io.WriteString(w, "\n"+r.ReleaseScan.text()); err != nil {
			return err
		}
	}
	status := "PASS"
	switch r.ExitCode {
	case ExitOK:
	case ExitNothing:
		status = "NOTHING RECEIVED"
	default:
		status = "FAIL"
	}
	_, err := fmt.Fprintf(w, "\nverdict: %s (exit %d): %s\n", status, r.ExitCode, r.VerdictReason)
	return err
}

func writeVerifyJUnit(w io.Writer, r *verifyReport) error {
	cases := analyze.JUnitCases(r.Report, r.MaxRatio, slices.Contains(r.Allow, allowNestedDuplicates))
	received := analyze.JUnitCase{Name: "telemetry arrives", Class: "doubletake.verify.received"}
	if len(r.Missing) > 0 {
		received.Failure = r.nothingReason()
	}
	if r.ReleaseScan != nil {
		// The release behind a double export belongs with the failures
		// it explains.
		for i := range cases {
			switch cases[i].Class {
			case "doubletake.verify.spans", "doubletake.verify.metrics", "doubletake.verify.logs":
				if cases[i].Failure != "" {
					cases[i].Detail += "\n" + r.ReleaseScan.text()
				}
			}
		}
	}
	cases = append([]analyze.JUnitCase{received}, cases...)
	var elapsed time.Duration
	if r.Command != nil {
		elapsed = time.Duration(r.Command.Elapsed)
		c := analyze.JUnitCase{Name: "command succeeds", Class: "doubletake.verify.command"}
		if r.Command.Failed {
			c.Failure = r.Command.describe()
		}
		cases = append([]analyze.JUnitCase{c}, cases...)
	} else {
		elapsed = time.Duration(r.ListenedFor)
	}
	return analyze.WriteJUnit(w, "doubletake verify", elapsed, cases)
}

// redactURL is a URL flag's value fit for an error or log line: no password.
func redactURL(raw string) string { return termsafe.RedactURL(raw) }
