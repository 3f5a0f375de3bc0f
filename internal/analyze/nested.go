package analyze

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/doubletake/doubletake/internal/nested"
)

// DiagNestedDuplicate: one operation recorded as two spans with different
// ids, one inside the other (double instrumentation: two instrumentations
// of one framework active, or one applied twice). internal/nested states
// the rule; no id-based dedup can see these.
const DiagNestedDuplicate Diagnosis = "nested-duplicate"

// NestedReport is the nested-duplicate part of a Report: internal/nested's
// detector run over every traces request in arrival order.
type NestedReport struct {
	// Findings aggregate the pairs by service, kind, span name and the two
	// scopes, the most frequent first; each has its Diagnosis line.
	Findings []nested.Finding `json:"findings"`
	// Pairs is the number of nested duplicates (inner spans) found.
	Pairs int `json:"pairs"`
	// MinCoverage and Skew are the detector's timing rule (nested.Options).
	MinCoverage float64 `json:"min_coverage"`
	Skew        Millis  `json:"skew_ms"`
	// Stats are the detector's counters, its evictions among them: spans
	// forgotten to stay within max_spans (a pair split across them is not
	// compared).
	Stats nested.Stats `json:"stats"`
}

// nestedReport fills r.Nested and adds one finding per nested finding.
func (a *Analyzer) nestedReport(r *Report) {
	rep := a.nested.Report()
	nr := &r.Nested
	nr.Findings = rep.Findings
	if nr.Findings == nil {
		nr.Findings = []nested.Finding{}
	}
	nr.Stats = rep.Stats
	nr.Pairs = rep.Stats.Pairs
	nr.MinCoverage = a.opts.Nested.MinCoverage
	if nr.MinCoverage <= 0 || nr.MinCoverage > 1 || nr.MinCoverage != nr.MinCoverage {
		nr.MinCoverage = nested.DefaultMinCoverage
	}
	nr.Skew = Millis(a.opts.Nested.Skew)
	if a.opts.Nested.Skew <= 0 {
		nr.Skew = Millis(nested.DefaultSkew)
	}
	for _, f := range nr.Findings {
		r.Findings = append(r.Findings, Finding{
			Signal:    SignalSpans,
			Diagnosis: DiagNestedDuplicate,
			Subject:   subjectOf(f.Service),
			Items:     f.Occurrences,
			Line:      NestedLine(f),
		})
	}
}

// NestedLine is the findings-list line of a nested finding: where, how
// many, and the finding's own diagnosis (nested.Diagnosis: both scopes and
// versions, the span name, the share of the service's spans of its kind).
func NestedLine(f nested.Finding) string {
	return fmt.Sprintf("spans of %s: double instrumentation, %s in %s: %s",
		subjectOf(f.Service), plural(f.Occurrences, "nested duplicate", "nested duplicates"), plural(f.Traces, "trace", "traces"), f.Diagnosis)
}

// NestedDuplicates is the number of nested duplicates found (inner spans
// that record their outer span's operation a second time).
func (r *Report) NestedDuplicates() int { return r.Nested.Pairs }

// sharePercent renders a share in [0, 1] as a percentage without rounding
// a part up to 100% or down to 0%.
func sharePercent(n, total int) string {
	if total <= 0 {
		return "?%"
	}
	if n >= total {
		return "100%"
	}
	if n <= 0 {
		return "0%"
	}
	p := 100 * float64(n) / float64(total)
	switch {
	case p < 0.1:
		return "<0.1%"
	case p > 99.9:
		return ">99.9%"
	}
	return strings.TrimSuffix(strconv.FormatFloat(p, 'f', 1, 64), ".0") + "%"
}

// WriteNestedText renders the nested-duplicate section: nothing when no
// span was checked, else a summary line, then each finding with its
// diagnosis line, counts, scopes and an example, then a warning for what
// the detector had to forget.
func WriteNestedText(w io.Writer, n *NestedReport) error {
	ew := &errWriter{w: w}
	writeNestedText(ew, n)
	return ew.err
}

func writeNestedText(ew *errWriter, n *NestedReport) {
	st := &n.Stats
	if st.Spans == 0 && len(n.Findings) == 0 {
		return
	}
	ew.printf("\nnested duplicates (one operation recorded as two spans, one inside the other): ")
	if len(n.Findings) == 0 {
		ew.printf("none in %s\n", plural(st.Spans, "span", "spans"))
	} else {
		ew.printf("%s in %s, %s\n", plural(n.Pairs, "nested duplicate", "nested duplicates"), plural(st.Spans, "span", "spans"),
			plural(len(n.Findings), "finding", "findings"))
	}
	for i, f := range n.Findings {
		if i == maxGroupRows {
			ew.printf("  … %d more (see --format json)\n", len(n.Findings)-i)
			break
		}
		ew.printf("  - %s\n", f.Diagnosis)
		ew.printf("    service %s, %s span %q", orDash(f.Service), f.Kind, f.Name)
		if f.InnerName != "" {
			ew.printf(" (inner %q)", f.InnerName)
		}
		ew.printf(": %s in %s", plural(f.Occurrences, "pair", "pairs"), plural(f.Traces, "trace", "traces"))
		if f.Siblings > 0 {
			ew.printf(" (%d as sibling SERVER spans under one parent)", f.Siblings)
		}
		ew.printf("; %d of %d %s spans of the service (%s) are part of one; matched by %s\n",
			f.AffectedSpans, f.KindSpans, strings.ToLower(f.Kind), sharePercent(f.AffectedSpans, f.KindSpans), f.MatchedBy)
		ew.printf("    outer scope %s, inner scope %s\n", f.OuterScope, f.InnerScope)
		if len(f.Examples) > 0 {
			ex := f.Examples[0]
			ew.printf("    e.g. trace %s: span %s inside span %s\n", ex.TraceID, ex.InnerSpanID, ex.OuterSpanID)
		}
	}
	if st.Evicted > 0 {
		ew.printf("  warning: %s forgotten to stay within %d held (%d before their parent arrived): a pair split across them was not compared\n",
			plural(st.Evicted, "span was", "spans were"), st.MaxSpans, st.EvictedWaiting)
	}
	if st.EvictedBytes > 0 {
		ew.printf("  warning: %s forgotten to stay within %d bytes held: a pair split across them was not compared\n",
			plural(st.EvictedBytes, "span was", "spans were"), st.MaxBytes)
	}
	if st.UnlistedPairs > 0 {
		ew.printf("  warning: %d pairs of further patterns not listed (at most %d findings)\n", st.UnlistedPairs, nested.MaxFindings)
	}
	if st.TraceMarksEvicted > 0 {
		ew.printf("  warning: %d (finding, trace) marks forgotten: a trace seen again after that counts twice in traces\n", st.TraceMarksEvicted)
	}
	if st.SiblingOverflow > 0 {
		ew.printf("  warning: %s not compared with their siblings (more than %d SERVER children of one parent)\n",
			plural(st.SiblingOverflow, "SERVER span", "SERVER spans"), nested.MaxSiblings)
	}
}
