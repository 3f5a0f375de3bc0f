package verify

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
	"github.com/doubletake/doubletake/internal/scan"
)

// Streams are the standard streams verify gives the command it runs
// (In, Out, Err) and writes its own diagnostics to (Err).
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Defaults of the options.
const (
	DefaultGrace           = 2 * time.Second
	DefaultGraceMax        = 10 * time.Second
	DefaultForwardProtocol = "grpc"
	DefaultScanTimeout     = 2 * time.Second
	DefaultScanMaxFiles    = 1000
)

// AllowNestedDuplicates is the Options.Allow value that passes nested
// duplicates.
const AllowNestedDuplicates = "nested-duplicates"

// AllowValues are the finding kinds Options.Allow accepts.
func AllowValues() []string { return []string{AllowNestedDuplicates} }

// ExpectValues are the signals Options.Expect accepts.
func ExpectValues() []string { return []string{"traces", "metrics", "logs"} }

// Options say how verify receives and what fails a run. Errors and
// verdict reasons name them by the flags of `doubletake verify`.
type Options struct {
	// Listen is the address to receive on (--listen); empty, a free
	// loopback port. Without a command it is required.
	Listen string
	// Duration stops receiving without a command after this long
	// (--duration; 0: until a signal or the end of the context).
	Duration time.Duration
	// Forward also sends everything received to this OTLP endpoint
	// (--forward) over ForwardProtocol, grpc or http (--forward-protocol).
	Forward         string
	ForwardProtocol string
	// Grace and GraceMax bound the wait for the command's final exports:
	// until nothing has arrived for Grace, at most GraceMax after it
	// exited (--grace, --grace-max).
	Grace    time.Duration
	GraceMax time.Duration
	// MaxRatio is the duplicate ratio above which a run fails
	// (--max-duplicate-ratio).
	MaxRatio float64
	// IgnoreExit: a failed command does not decide the verdict
	// (--ignore-exit).
	IgnoreExit bool
	// ExportInterval tells two exporters from a re-send (--export-interval).
	ExportInterval time.Duration
	// Allow names finding kinds that do not fail the run (--allow; see
	// AllowValues).
	Allow []string
	// AllowEmpty: a run in which nothing arrives passes (--allow-empty).
	AllowEmpty bool
	// Expect names signals that must arrive (--expect; see ExpectValues).
	Expect []string
	// ReportOnStdout: the report will be JSON on the command's stdout, so
	// the command's own stdout goes to Streams.Err and Streams.Out carries
	// the report alone.
	ReportOnStdout bool
	// Scan bounds the scan for the release behind a double export.
	Scan ScanOptions
}

// ScanOptions are those of the scan after a double export.
type ScanOptions struct {
	// Disabled turns the scan off (--no-scan).
	Disabled bool
	// Hazards is the hazard database; nil is the built-in one, loaded
	// when a scan runs.
	Hazards *scan.DB
	// Timeout and MaxFiles bound the scan (--scan-timeout,
	// --scan-max-files).
	Timeout  time.Duration
	MaxFiles int
}

// DefaultOptions are the options of `doubletake verify` without flags.
func DefaultOptions() Options {
	return Options{
		ForwardProtocol: DefaultForwardProtocol,
		Grace:           DefaultGrace,
		GraceMax:        DefaultGraceMax,
		ExportInterval:  analyze.DefaultExportInterval,
		Scan:            ScanOptions{Timeout: DefaultScanTimeout, MaxFiles: DefaultScanMaxFiles},
	}
}

// allows reports whether Allow names kind.
func (o *Options) allows(kind string) bool {
	for _, a := range o.Allow {
		if strings.TrimSpace(a) == kind {
			return true
		}
	}
	return false
}

// Validate checks the options for a run of argv (empty: no command). Each
// error names the flag and is a usage error.
func (o *Options) Validate(argv []string) error {
	if o.MaxRatio < 0 || o.MaxRatio > 1 || o.MaxRatio != o.MaxRatio {
		return fmt.Errorf("verify: --max-duplicate-ratio %v: want a number from 0 to 1", o.MaxRatio)
	}
	if o.Grace <= 0 {
		return fmt.Errorf("verify: --grace %s: want a duration above 0", o.Grace)
	}
	if o.GraceMax < o.Grace {
		return fmt.Errorf("verify: --grace-max %s: want at least --grace (%s)", o.GraceMax, o.Grace)
	}
	if o.ExportInterval <= 0 {
		return fmt.Errorf("verify: --export-interval %s: want a duration above 0", o.ExportInterval)
	}
	allow, expect := AllowValues(), ExpectValues()
	for _, a := range o.Allow {
		if !slices.Contains(allow, strings.TrimSpace(a)) {
			return fmt.Errorf("verify: --allow %q: want %s", a, strings.Join(allow, " or "))
		}
	}
	for _, e := range o.Expect {
		if !slices.Contains(expect, strings.TrimSpace(e)) {
			return fmt.Errorf("verify: --expect %q: want %s", e, strings.Join(expect, ", "))
		}
	}
	if o.AllowEmpty && len(o.Expect) > 0 {
		return fmt.Errorf("verify: --allow-empty and --expect contradict each other; give one")
	}
	if o.Scan.Timeout <= 0 {
		return fmt.Errorf("verify: --scan-timeout %s: want a duration above 0", o.Scan.Timeout)
	}
	if o.Scan.MaxFiles <= 0 {
		return fmt.Errorf("verify: --scan-max-files %d: want a number above 0", o.Scan.MaxFiles)
	}
	if o.Duration < 0 {
		return fmt.Errorf("verify: --duration %s: want a duration of 0 or more", o.Duration)
	}
	if len(argv) == 0 {
		if o.Listen == "" {
			return fmt.Errorf("verify: give a command after -- (doubletake verify -- CMD ARGS...), or --listen ADDR to receive from running services")
		}
	} else if o.Duration != 0 {
		return fmt.Errorf("verify: --duration is for --listen without a command; verify stops when CMD exits")
	}
	if o.Listen != "" {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			return fmt.Errorf("verify: --listen %q: want host:port (%w)", o.Listen, err)
		}
	}
	if o.Forward == "" {
		if o.ForwardProtocol != "grpc" && o.ForwardProtocol != "http" {
			return fmt.Errorf("verify: --forward-protocol %q: want grpc or http", o.ForwardProtocol)
		}
		return nil
	}
	if _, err := capture.ParseTarget(o.Forward, o.ForwardProtocol); err != nil {
		return fmt.Errorf("verify: --forward: %w", err)
	}
	return nil
}
