package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
)

// Verdict is what a run comes to.
type Verdict string

// The verdicts.
const (
	Clean                 Verdict = "clean"                   // nothing arrived twice, or within what the options allow
	Duplicates            Verdict = "duplicates"              // the duplicate ratio exceeds Options.MaxRatio
	NestedDuplicates      Verdict = "nested-duplicates"       // nested duplicates, not allowed
	Malformed             Verdict = "malformed"               // undecodable OTLP arrived
	CommandFailed         Verdict = "command-failed"          // the command failed (unless Options.IgnoreExit)
	CommandNotStarted     Verdict = "command-not-started"     // the command could not be started
	NothingReceived       Verdict = "nothing-received"        // nothing arrived at all (unless Options.AllowEmpty)
	ExpectedSignalMissing Verdict = "expected-signal-missing" // a signal Options.Expect names never arrived
)

// nothing reports whether v says that something did not arrive.
func (v Verdict) nothing() bool { return v == NothingReceived || v == ExpectedSignalMissing }

// Report is what verify found and decided.
type Report struct {
	Endpoint    string                `json:"endpoint"`
	Command     *CommandResult        `json:"command,omitempty"`
	ListenedFor analyze.Millis        `json:"listened_ms,omitempty"`
	Forward     *capture.ForwardStats `json:"forward,omitempty"`
	MaxRatio    float64               `json:"max_duplicate_ratio"`
	Allow       []string              `json:"allow"`
	AllowEmpty  bool                  `json:"allow_empty,omitempty"`
	Expect      []string              `json:"expect"`
	// Missing names the signals of which nothing arrived: every signal
	// --expect names that did not, or all three when nothing arrived.
	Missing []string `json:"missing"`
	Ratio   float64  `json:"duplicate_ratio"`
	Verdict Verdict  `json:"verdict"`
	// ExitCode is the exit status of the command that reports the
	// verdict: Run leaves it to its caller, which sets it before the
	// report is written.
	ExitCode      int    `json:"exit_code"`
	VerdictReason string `json:"verdict_reason"`
	// ReleaseScan is what the scan of CMD's environment found after a
	// double export; absent when there was no double export, no CMD, or
	// --no-scan.
	ReleaseScan *ReleaseScan `json:"release_scan,omitempty"`
	*analyze.Report
}

// newReport is the report of a run receiving on endpoint, with the
// options that decide its verdict (--allow and --expect without repeats).
func newReport(endpoint string, o Options) *Report {
	rep := &Report{Endpoint: endpoint, MaxRatio: o.MaxRatio, AllowEmpty: o.AllowEmpty}
	for _, a := range o.Allow {
		if a = strings.TrimSpace(a); !slices.Contains(rep.Allow, a) {
			rep.Allow = append(rep.Allow, a)
		}
	}
	for _, e := range o.Expect {
		if e = strings.TrimSpace(e); !slices.Contains(rep.Expect, e) {
			rep.Expect = append(rep.Expect, e)
		}
	}
	return rep
}

// judge takes the analysis of what arrived and decides the verdict.
func (r *Report) judge(a *analyze.Report, o Options) {
	r.Report = a
	r.Ratio = a.DuplicateRatio()
	r.decide(o)
}

// received reports whether any item of signal (traces, metrics, logs)
// arrived.
func (r *Report) received(signal string) bool {
	switch signal {
	case "traces":
		return r.Spans.Received > 0
	case "metrics":
		return r.Metrics.Points > 0
	case "logs":
		return r.Logs.Received > 0
	}
	return false
}

// missing lists what is missing: every expected signal that never
// arrived; all three when nothing arrived at all (no item, no malformed
// request) and that is not allowed.
func (r *Report) missing() []string {
	var out []string
	for _, sig := range r.Expect {
		if !r.received(sig) {
			out = append(out, sig)
		}
	}
	if len(out) > 0 || r.AllowEmpty || r.Malformed > 0 {
		return out
	}
	all := ExpectValues()
	for _, sig := range all {
		if r.received(sig) {
			return nil
		}
	}
	return all
}

// nothingReason says what did not arrive, and the likely causes.
func (r *Report) nothingReason() string {
	if len(r.Expect) == 0 {
		q := r.Requests
		return fmt.Sprintf("nothing arrived: no span, metric point or log record in %s (is the SDK configured to export, to OTEL_EXPORTER_OTLP_ENDPOINT?); --allow-empty if the command exports nothing",
			countNoun(q.Traces+q.Metrics+q.Logs, "request", "requests"))
	}
	return fmt.Sprintf("expected %s never arrived (--expect %s)", strings.Join(r.Missing, " and "), strings.Join(r.Expect, ","))
}

// decide sets the verdict and exit code.
func (r *Report) decide(o Options) {
	r.Missing = r.missing()
	var problems []string
	if r.Ratio > o.MaxRatio {
		problems = append(problems, fmt.Sprintf("duplicate ratio %.4g exceeds --max-duplicate-ratio %g", r.Ratio, o.MaxRatio))
	}
	nested := r.NestedDuplicates()
	nestedFails := nested > 0 && !o.allows(AllowNestedDuplicates)
	if nestedFails {
		problems = append(problems, nestedSummary(r.Report, "; --allow nested-duplicates to pass"))
	}
	if r.Malformed > 0 {
		problems = append(problems, countNoun(int(r.Malformed), "malformed export request", "malformed export requests"))
	}
	switch {
	case r.Command != nil && r.Command.Failed && !o.IgnoreExit:
		r.Verdict = CommandFailed
		r.VerdictReason = r.Command.Describe()
		if len(problems) > 0 {
			r.VerdictReason += "; also " + strings.Join(problems, ", ")
		}
	case len(problems) > 0:
		r.Verdict = Duplicates
		switch {
		case r.Ratio > o.MaxRatio:
		case nestedFails:
			r.Verdict = NestedDuplicates
		case r.Malformed > 0:
			r.Verdict = Malformed
		}
		r.VerdictReason = strings.Join(problems, ", ")
	case len(r.Missing) > 0:
		r.Verdict = NothingReceived
		if len(r.Expect) > 0 {
			r.Verdict = ExpectedSignalMissing
		}
		r.VerdictReason = r.nothingReason()
	default:
		r.Verdict = Clean
		r.VerdictReason = "nothing arrived twice"
		if r.Spans.Received+r.Metrics.Points+r.Logs.Received == 0 {
			r.VerdictReason = "nothing arrived, allowed by --allow-empty"
		}
		if r.Ratio > 0 {
			r.VerdictReason = fmt.Sprintf("duplicate ratio %.4g within --max-duplicate-ratio %g", r.Ratio, o.MaxRatio)
		}
		if nested > 0 {
			r.VerdictReason += "; " + nestedSummary(r.Report, "") + " allowed by --allow nested-duplicates"
		}
	}
	if len(r.Missing) > 0 && !r.Verdict.nothing() {
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
