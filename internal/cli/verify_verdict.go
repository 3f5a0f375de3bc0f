package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
)

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

// newVerifyReport is the report of a run receiving on endpoint, with the
// options that decide its verdict (--allow and --expect without repeats).
func newVerifyReport(endpoint string, o verifyOptions) *verifyReport {
	rep := &verifyReport{Endpoint: endpoint, MaxRatio: o.maxRatio, AllowEmpty: o.allowEmpty}
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
	return rep
}

// judge takes the analysis of what arrived and decides the verdict.
func (r *verifyReport) judge(a *analyze.Report, o verifyOptions) {
	r.Report = a
	r.Ratio = a.DuplicateRatio()
	r.decide(o)
}

// received reports whether any item of signal (traces, metrics, logs)
// arrived.
func (r *verifyReport) received(signal string) bool {
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
func (r *verifyReport) missing() []string {
	var out []string
	for _, sig := range r.Expect {
		if !r.received(sig) {
			out = append(out, sig)
		}
	}
	if len(out) > 0 || r.AllowEmpty || r.Malformed > 0 {
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
		q := r.Requests
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
	nested := r.NestedDuplicates()
	nestedFails := nested > 0 && !o.allows(allowNestedDuplicates)
	if nestedFails {
		problems = append(problems, nestedSummary(r.Report, "; --allow nested-duplicates to pass"))
	}
	if r.Malformed > 0 {
		problems = append(problems, countNoun(int(r.Malformed), "malformed export request", "malformed export requests"))
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
		case r.Malformed > 0:
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
		if r.Spans.Received+r.Metrics.Points+r.Logs.Received == 0 {
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
