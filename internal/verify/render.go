package verify

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/analyze"
)

// WriteText writes r as the text report: how the command ended, what
// arrived, the analysis, the release behind a double export, and the
// verdict with r.ExitCode.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString("doubletake verify: ")
	if r.Command != nil {
		b.WriteString(r.Command.Describe())
	} else {
		fmt.Fprintf(&b, "received on %s for %s", r.Endpoint, r.ListenedFor)
	}
	q := r.Requests
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
	status := "FAIL"
	switch {
	case r.Verdict == Clean:
		status = "PASS"
	case r.Verdict.nothing():
		status = "NOTHING RECEIVED"
	}
	_, err := fmt.Fprintf(w, "\nverdict: %s (exit %d): %s\n", status, r.ExitCode, r.VerdictReason)
	return err
}

// WriteJUnit writes r as a JUnit XML report: one test case for the
// command, one for what arrived, and analyze's cases.
func WriteJUnit(w io.Writer, r *Report) error {
	cases := analyze.JUnitCases(r.Report, r.MaxRatio, slices.Contains(r.Allow, AllowNestedDuplicates))
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
			c.Failure = r.Command.Describe()
		}
		cases = append([]analyze.JUnitCase{c}, cases...)
	} else {
		elapsed = time.Duration(r.ListenedFor)
	}
	return analyze.WriteJUnit(w, "doubletake verify", elapsed, cases)
}
