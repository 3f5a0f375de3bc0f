package analyze

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doubletake/doubletake/internal/termsafe"
)

// maxGroupRows bounds the rows per table in the text report; the JSON
// report has them all.
const maxGroupRows = 50

// maxTextExamples bounds the example ids or bodies per signal in the text
// report.
const maxTextExamples = 4

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// WriteText renders r for people: one section per signal, then one line per
// finding.
func WriteText(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	writeSpansText(ew, &r.Spans, r.ArrivalTimes)
	writeNestedText(ew, &r.Nested)
	writeMetricsText(ew, &r.Metrics)
	writeLogsText(ew, &r.Logs, r.ArrivalTimes)
	switch {
	case r.Malformed > 0 && r.ArrivalTimes:
		ew.printf("\nmalformed: %s refused: could not be decoded\n", plural(int(r.Malformed), "request was", "requests were"))
	case r.Malformed > 0:
		ew.printf("\nmalformed: %s skipped: not OTLP-JSON\n", plural(int(r.Malformed), "line was", "lines were"))
	}
	ew.printf("\nfindings:")
	if len(r.Findings) == 0 {
		ew.printf(" none\n")
	} else {
		ew.printf("\n")
		for _, f := range r.Findings {
			ew.printf("  - %s\n", f.Line)
		}
	}
	return ew.err
}

func copiesText(cs []CopyCount) string {
	if len(cs) == 0 {
		return "-"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d×%d", c.IDs, c.Copies)
	}
	return strings.Join(parts, " ")
}

func delaysText(d *Delays) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s", d.Min, d.Median, d.Max)
}

// groupRow is one row of a span or log group table.
type groupRow struct {
	service, what                       string
	received, unique, duplicated, extra int
	copies                              []CopyCount
	delays                              *Delays
}

// writeGroupTable writes the first maxGroupRows of n group rows as an
// indented table; what and copies name the second and the copies columns;
// timed adds the delay column (a source with arrival times).
func writeGroupTable(ew *errWriter, what, copies string, n int, timed bool, row func(int) groupRow) {
	tw := tabwriter.NewWriter(ew.w, 0, 4, 2, ' ', 0)
	tew := &errWriter{w: tw}
	tew.printf("  SERVICE\t%s\tRECEIVED\tUNIQUE\tDUPLICATED\tEXTRA\t%s", what, copies)
	if timed {
		tew.printf("\tDELAY min / median / max")
	}
	tew.printf("\n")
	for i := range n {
		if i == maxGroupRows {
			tew.printf("  … %d more\t\t\t\t\t\t\t\n", n-i)
			break
		}
		r := row(i)
		tew.printf("  %s\t%s\t%d\t%d\t%d\t%d\t%s", orDash(termsafe.Escape(r.service)), orDash(termsafe.Escape(r.what)), r.received, r.unique, r.duplicated, r.extra, copiesText(r.copies))
		if timed {
			tew.printf("\t%s", delaysText(r.delays))
		}
		tew.printf("\n")
	}
	if tew.err == nil {
		tew.err = tw.Flush()
	}
	if ew.err == nil {
		ew.err = tew.err
	}
}

func writeSpansText(ew *errWriter, s *SpanReport, timed bool) {
	ew.printf("spans: %d received, %d unique, %d duplicated ids, %s", s.Received, s.Unique, s.Duplicated, plural(s.ExtraCopies, "extra copy", "extra copies"))
	if s.Conflicting > 0 {
		ew.printf(", %d ids with differing copies", s.Conflicting)
	}
	if s.InvalidIDs > 0 {
		ew.printf(", %d with invalid ids (not compared)", s.InvalidIDs)
	}
	ew.printf("\n")
	if len(s.Groups) == 0 {
		return
	}
	writeGroupTable(ew, "SPAN", "IDS×COPIES", len(s.Groups), timed, func(i int) groupRow {
		g := &s.Groups[i]
		return groupRow{g.Service, g.Name, g.Received, g.Unique, g.Duplicated, g.ExtraCopies, g.Copies, g.Delays}
	})
	shown := 0
	for _, g := range s.Groups {
		for _, ex := range g.Examples {
			if shown++; shown > maxTextExamples {
				break
			}
			ew.printf("  e.g. %s %q trace %s span %s: %d copies", orDash(termsafe.Escape(g.Service)), g.Name, ex.TraceID, ex.SpanID, ex.Copies)
			if timed {
				ew.printf(", later ones %s after the first", millisList(ex.Delays))
			}
			ew.printf("%s\n", pick(ex.Differ, " (content differs)", ""))
		}
	}
}

func writeLogsText(ew *errWriter, l *LogReport, timed bool) {
	ew.printf("\nlogs: %d received, %d unique, %d duplicated records, %s", l.Received, l.Unique, l.Duplicated, plural(l.ExtraCopies, "extra copy", "extra copies"))
	if l.Untimed > 0 {
		ew.printf(", %d without timestamps (not compared)", l.Untimed)
	}
	ew.printf("\n")
	if len(l.Groups) == 0 {
		return
	}
	writeGroupTable(ew, "SCOPE", "RECORDS×COPIES", len(l.Groups), timed, func(i int) groupRow {
		g := &l.Groups[i]
		return groupRow{g.Service, g.Scope, g.Received, g.Unique, g.Duplicated, g.ExtraCopies, g.Copies, g.Delays}
	})
	shown := 0
	for _, g := range l.Groups {
		for _, ex := range g.Examples {
			if shown++; shown > maxTextExamples {
				break
			}
			ew.printf("  e.g. %s: %q: %d copies", orDash(termsafe.Escape(g.Service)), ex.Body, ex.Copies)
			if timed {
				ew.printf(", later ones %s after the first", millisList(ex.Delays))
			}
			ew.printf("\n")
		}
	}
}

func millisList(ds []Millis) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pick[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// JUnitCase is one test case of a JUnit report.
type JUnitCase struct {
	Name    string
	Class   string
	Failure string // empty: passed
	Detail  string
}

// JUnitCases turns r into one case per check: spans, nested duplicates,
// metric streams, logs and decodable requests. maxRatio is the duplicate
// ratio the id-based checks allow; allowNested passes the nested-duplicate
// check (the report still lists its findings).
func JUnitCases(r *Report, maxRatio float64, allowNested bool) []JUnitCase {
	detail := func(sig Signal, nested bool) string {
		var b strings.Builder
		for _, f := range r.Findings {
			if f.Signal == sig && (f.Diagnosis == DiagNestedDuplicate) == nested {
				b.WriteString(f.Line)
				b.WriteString("\n")
			}
		}
		return b.String()
	}
	ratio := func(extra, recv int) bool { return recv > 0 && float64(extra)/float64(recv) > maxRatio }
	cs := []JUnitCase{
		{Name: "spans arrive once", Class: "doubletake.verify.spans"},
		{Name: "operations are recorded once (no nested duplicates)", Class: "doubletake.verify.nested"},
		{Name: "metric streams have one writer", Class: "doubletake.verify.metrics"},
		{Name: "log records arrive once", Class: "doubletake.verify.logs"},
		{Name: "export requests decode", Class: "doubletake.verify.otlp"},
	}
	if ratio(r.Spans.ExtraCopies, r.Spans.Received) {
		cs[0].Failure = fmt.Sprintf("%d of %d spans are extra copies", r.Spans.ExtraCopies, r.Spans.Received)
		cs[0].Detail = detail(SignalSpans, false)
	}
	if n := r.Nested.Pairs; n > 0 && !allowNested {
		cs[1].Failure = fmt.Sprintf("%s (double instrumentation) in %s", plural(n, "nested duplicate", "nested duplicates"),
			plural(len(r.Nested.Findings), "finding", "findings"))
		cs[1].Detail = detail(SignalSpans, true)
	}
	if ratio(r.Metrics.ExtraPoints, r.Metrics.Points) {
		cs[2].Failure = fmt.Sprintf("%d streams with overlapping writers; %d of %d points are extra", r.Metrics.Overlapping, r.Metrics.ExtraPoints, r.Metrics.Points)
		cs[2].Detail = detail(SignalMetrics, false)
	}
	if ratio(r.Logs.ExtraCopies, r.Logs.Received) {
		cs[3].Failure = fmt.Sprintf("%d of %d log records are extra copies", r.Logs.ExtraCopies, r.Logs.Received)
		cs[3].Detail = detail(SignalLogs, false)
	}
	if r.Malformed > 0 {
		cs[4].Failure = fmt.Sprintf("%d export requests could not be decoded", r.Malformed)
	}
	return cs
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Class   string        `xml:"classname,attr"`
	Time    string        `xml:"time,attr"`
	Failure *junitFailure `xml:"failure,omitempty"`
}

type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

// WriteJUnit writes cases as one JUnit XML test suite named suite.
func WriteJUnit(w io.Writer, suite string, elapsed time.Duration, cases []JUnitCase) error {
	s := junitSuite{Name: suite, Tests: len(cases), Time: fmt.Sprintf("%.3f", elapsed.Seconds())}
	for _, c := range cases {
		jc := junitCase{Name: c.Name, Class: c.Class, Time: "0"}
		if c.Failure != "" {
			s.Failures++
			jc.Failure = &junitFailure{Message: c.Failure, Type: "doubletake", Text: c.Detail}
		}
		s.Cases = append(s.Cases, jc)
	}
	all := junitSuites{Name: suite, Tests: s.Tests, Failures: s.Failures, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func writeMetricsText(ew *errWriter, m *MetricReport) {
	ew.printf("\nmetrics: %d points in %s; %d with more than one writer, %d overlapping; %s",
		m.Points, plural(m.Streams, "stream", "streams"), m.MultiWriter, m.Overlapping, plural(m.ExtraPoints, "extra point", "extra points"))
	if len(m.Dropped) > 0 {
		keys := make([]string, 0, len(m.Dropped))
		for k := range m.Dropped {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			keys[i] = fmt.Sprintf("%s %d", k, m.Dropped[k])
		}
		ew.printf(" (%s)", strings.Join(keys, ", "))
	}
	if m.PeerPoints > 0 {
		ew.printf("; %s kept as peers' own series", plural(m.PeerPoints, "point", "points"))
	}
	ew.printf("; counter resets Prometheus would count: %d", m.Resets)
	if m.Unjudged > 0 {
		ew.printf("; %d points of streams beyond the stream limit not judged", m.Unjudged)
	}
	if m.Unsupported > 0 {
		ew.printf("; %d points without a type or temporality not judged", m.Unsupported)
	}
	ew.printf("\n")
	if line := m.WriterRules.String(); line != "" {
		ew.printf("  %s\n", line)
	}
	for i, s := range m.List {
		if i == maxGroupRows {
			ew.printf("  … %d more streams (see --format json)\n", len(m.List)-i)
			break
		}
		ew.printf("  stream %s", termsafe.Escape(s.Name))
		if s.Attributes != "" {
			ew.printf("{%s}", termsafe.Escape(s.Attributes))
		}
		ew.printf(" (%s", s.Type)
		if s.Unit != "" {
			ew.printf(", unit %s", termsafe.Escape(s.Unit))
		}
		ew.printf(") of %s, scope %s", subjectOf(s.Service), orDash(termsafe.Escape(s.Scope)))
		if s.Overlap {
			ew.printf(": %d writers overlap", len(s.Writers)+s.MoreWriters)
		} else if len(s.Writers)+s.MoreWriters > 1 {
			ew.printf(": %d writers, one after the other", len(s.Writers)+s.MoreWriters)
		}
		ew.printf("\n")
		var first uint64
		for j, w := range s.Writers {
			if j == 0 || w.Start < first {
				first = w.Start
			}
		}
		for _, w := range s.Writers {
			ew.printf("    writer start %s", orDash(w.StartTime))
			if w.Start > first {
				ew.printf(" (+%s)", fmtDur(time.Duration(w.Start-first)))
			}
			ew.printf(": %s, values %s → %s%s\n", plural(w.Points, "point", "points"), fmtNum(float64(w.FirstValue)), fmtNum(float64(w.LastValue)), pick(w.Elected, " (elected)", ""))
			if w.Evidence != "" {
				ew.printf("      %s\n", w.Evidence)
			}
		}
		if s.Shared != "" {
			ew.printf("    %s\n", s.Shared)
		}
		if s.MoreWriters > 0 {
			ew.printf("    … and %d more writers\n", s.MoreWriters)
		}
		if len(s.Dropped) > 0 {
			keys := make([]string, 0, len(s.Dropped))
			for k := range s.Dropped {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for i, k := range keys {
				keys[i] = fmt.Sprintf("%s %d", k, s.Dropped[k])
			}
			ew.printf("    the gateway would drop: %s\n", strings.Join(keys, ", "))
		}
		if s.PeerPoints > 0 {
			ew.printf("    the gateway would keep as peers' own series: %s\n", plural(s.PeerPoints, "point", "points"))
		}
		if p := s.Prometheus; p != nil {
			ew.printf("    Prometheus: %d samples stored in arrival order, %d refused (timestamp not after the previous), resets() = %d\n", p.Samples, p.Rejected, p.Resets)
		}
	}
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
