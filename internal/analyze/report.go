package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/termsafe"
)

// Diagnosis is the likely cause of a finding.
type Diagnosis string

// The diagnoses, one per finding.
const (
	// DiagTwoExporters: identical copies from one resource within an export
	// interval: two exporters (span processors, metric readers) in one process.
	DiagTwoExporters Diagnosis = "two-exporters"
	// DiagResentBatch: a whole request repeated, or identical copies further
	// apart than an export interval: a retry or replay re-sent the data.
	DiagResentBatch Diagnosis = "resent-batch"
	// DiagIdentityCollision: independent writers share an identity: copies
	// of one span id differ, or a metric stream's second writer is a peer
	// (its values are not the first writer's less a constant: another
	// process without its own service.instance.id).
	DiagIdentityCollision Diagnosis = "identity-collision"
	// DiagSecondWriter: a metric stream has a second writer whose values
	// have not told yet whether it is a copy (a second reader in one
	// process) or a peer (another process with the same identity).
	DiagSecondWriter Diagnosis = "second-writer"
)

// Report is the outcome of an analysis.
type Report struct {
	Requests RequestCounts `json:"requests"`
	Spans    SpanReport    `json:"spans"`
	// Nested: spans recording another span's operation a second time
	// (double instrumentation); not counted in the duplicate ratio.
	Nested    NestedReport `json:"nested_duplicates"`
	Metrics   MetricReport `json:"metrics"`
	Logs      LogReport    `json:"logs"`
	Findings  []Finding    `json:"findings"`
	Malformed uint64       `json:"malformed_requests"` // set by the caller: requests refused as undecodable
	// ArrivalTimes: the source recorded when each request arrived and on
	// which connection (verify); files and trace backends do not, and
	// their reports have no delays and no connections.
	ArrivalTimes bool `json:"arrival_times"`
}

// RequestCounts counts export requests.
type RequestCounts struct {
	Traces      int            `json:"traces"`
	Metrics     int            `json:"metrics"`
	Logs        int            `json:"logs"`
	Connections int            `json:"connections,omitempty"` // 0: unknown (no arrival facts)
	Protocols   map[string]int `json:"protocols,omitempty"`
	// WholeRepeats counts requests whose items repeat an earlier request's
	// items one for one.
	WholeRepeats int `json:"whole_repeats"`
}

// Finding is one problem with its diagnosis.
type Finding struct {
	Signal    Signal    `json:"signal"`
	Diagnosis Diagnosis `json:"diagnosis"`
	// Subject names what is affected: a service, or a metric stream.
	Subject string `json:"subject"`
	// Items is the number of extra copies (spans, log records) or of points
	// from writers other than the first (metrics).
	Items int `json:"items"`
	// Line is the one-line diagnosis printed in the text report.
	Line string `json:"line"`
}

// Delays summarises the delays between the first copy of an item and its
// later copies.
type Delays struct {
	Min    Millis `json:"min_ms"`
	Median Millis `json:"median_ms"`
	Max    Millis `json:"max_ms"`
}

// Millis is a duration that marshals as fractional milliseconds.
type Millis time.Duration

// MarshalJSON renders m as milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", float64(m)/1e6)), nil
}

func (m Millis) String() string { return fmtDur(time.Duration(m)) }

// copyCounts lists how many ids (or records) came in how many copies,
// fewest copies first.
func copyCounts(copies map[uint32]int) []CopyCount {
	var out []CopyCount
	for c, n := range copies {
		if n > 0 {
			out = append(out, CopyCount{Copies: int(c), IDs: n})
		}
	}
	slices.SortFunc(out, func(a, b CopyCount) int { return cmp.Compare(a.Copies, b.Copies) })
	return out
}

// delaysOrNil is delaysOf(ds), or nil when there are no delays.
func delaysOrNil(ds []time.Duration) *Delays {
	if len(ds) == 0 {
		return nil
	}
	d := delaysOf(ds)
	return &d
}

func delaysOf(ds []time.Duration) Delays {
	if len(ds) == 0 {
		return Delays{}
	}
	slices.Sort(ds)
	return Delays{Min: Millis(ds[0]), Median: Millis(ds[len(ds)/2]), Max: Millis(ds[len(ds)-1])}
}

// fmtDur renders d rounded to a readable precision.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// DuplicateRatio is the share of received items that are extra copies:
// spans and log records after their first copy, metric points from writers
// other than each stream's elected one, and duplicate points. Nested
// duplicates are not in it: their spans have ids of their own.
func (r *Report) DuplicateRatio() float64 {
	recv := r.Spans.Received + r.Logs.Received + r.Metrics.Points
	if recv == 0 {
		return 0
	}
	return float64(r.Spans.ExtraCopies+r.Logs.ExtraCopies+r.Metrics.ExtraPoints) / float64(recv)
}

// Clean reports whether nothing was duplicated or overlapped, and no
// operation was recorded twice.
func (r *Report) Clean() bool {
	return r.Spans.ExtraCopies == 0 && r.Logs.ExtraCopies == 0 && r.Metrics.ExtraPoints == 0 && r.Metrics.PeerPoints == 0 && r.Nested.Pairs == 0
}

// sortFindings orders findings by signal (nested duplicates after the
// other span findings), size and subject.
func sortFindings(fs []Finding) {
	order := map[Signal]int{SignalSpans: 0, SignalMetrics: 1, SignalLogs: 2}
	nestedLast := func(d Diagnosis) int {
		if d == DiagNestedDuplicate {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(order[a.Signal], order[b.Signal]),
			cmp.Compare(nestedLast(a.Diagnosis), nestedLast(b.Diagnosis)),
			cmp.Compare(b.Items, a.Items),
			strings.Compare(a.Subject, b.Subject),
			strings.Compare(string(a.Diagnosis), string(b.Diagnosis)),
		)
	})
}

// listNames renders up to max names, escaped for a terminal, then "and N
// more".
func listNames(names []string, max int) string {
	shown := names[:min(len(names), max)]
	esc := make([]string, len(shown))
	for i, n := range shown {
		esc[i] = termsafe.Escape(n)
	}
	if len(names) <= max {
		return strings.Join(esc, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(esc, ", "), len(names)-max)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
