package audit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/doubletake/doubletake/internal/analyze"
)

// maxExamples bounds the example ids printed per span group.
const maxExamples = 3

// WriteTraceText writes a trace audit: a summary, the span groups with
// duplicate ids, and the nested duplicates.
func WriteTraceText(w io.Writer, r *TraceReport) error {
	ew := &errWriter{w: w}
	ew.printf("%s %s, service %q, %s to %s\n", r.Backend, orDash(r.URL), r.Service, r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339))
	ew.printf("read: %s\n", r.Read)
	s := &r.Spans
	ew.printf("%s in %s: %d spans, %d distinct ids; %d ids stored more than once (%s)",
		plural(r.Traces, "trace", "traces"), plural(r.Requests, "request", "requests"), s.Received, s.Unique, s.Duplicated,
		plural(s.ExtraCopies, "extra copy", "extra copies"))
	if s.Conflicting > 0 {
		ew.printf(", %d with differing copies", s.Conflicting)
	}
	if s.InvalidIDs > 0 {
		ew.printf(", %d spans with invalid ids (not compared)", s.InvalidIDs)
	}
	ew.printf("\n")
	writeSpanGroups(ew, s.Groups)
	if ew.err == nil {
		ew.err = analyze.WriteNestedText(ew.w, &r.Nested)
	}
	for _, t := range r.Truncated {
		ew.printf("warning: window %s: raise --limit or shorten --lookback\n", t)
	}
	return ew.err
}

func writeSpanGroups(ew *errWriter, groups []analyze.SpanGroup) {
	dup := 0
	for _, g := range groups {
		if g.Duplicated > 0 {
			dup++
		}
	}
	if dup == 0 {
		ew.printf("\nno duplicate span ids\n")
		return
	}
	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSPAN NAME\tSPANS\tDISTINCT IDS\tDUPLICATED IDS\tEXTRA COPIES\tDIFFERING\tIDS x COPIES")
	for _, g := range groups {
		if g.Duplicated == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", orDash(g.Service), orDash(g.Name), g.Received, g.Unique,
			g.Duplicated, g.ExtraCopies, g.Conflicting, copiesOf(g.Copies))
	}
	if err := tw.Flush(); err != nil {
		return
	}
	for _, g := range groups {
		for i, ex := range g.Examples {
			if i == maxExamples {
				break
			}
			differ := ""
			if ex.Differ {
				differ = " (copies differ)"
			}
			ew.printf("  e.g. %s %q: trace %s span %s stored %d times%s\n", orDash(g.Service), g.Name, ex.TraceID, ex.SpanID, ex.Copies, differ)
		}
	}
}

func copiesOf(cs []analyze.CopyCount) string {
	if len(cs) == 0 {
		return "-"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%dx%d", c.IDs, c.Copies)
	}
	return strings.Join(parts, " ")
}

// WriteTraceHTML writes a trace audit as a self-contained HTML page.
func WriteTraceHTML(w io.Writer, r *TraceReport) error {
	p := htmlPage{Title: "doubletake audit: traces in " + r.Backend}
	p.Meta = append(p.Meta,
		fmt.Sprintf("%s %s, service %q, %s to %s", r.Backend, orDash(r.URL), r.Service, r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339)),
		"read: "+r.Read)
	s := &r.Spans
	p.Summary = append(p.Summary, fmt.Sprintf("%s: %d spans, %d distinct ids; %d ids stored more than once (%s), %d with differing copies.",
		plural(r.Traces, "trace", "traces"), s.Received, s.Unique, s.Duplicated, plural(s.ExtraCopies, "extra copy", "extra copies"), s.Conflicting))
	if t, ok := spanTable(s.Groups); ok {
		p.Tables = append(p.Tables, t)
	}
	addNested(&p, &r.Nested, true)
	for _, t := range r.Truncated {
		p.Notes = append(p.Notes, "window "+t+": raise --limit or shorten --lookback")
	}
	return writePage(w, p)
}

// addNested adds the nested duplicates to a page: a summary line, a table
// and, with notes, each finding's diagnosis as a note (an OTLP audit has
// them among its findings already).
func addNested(p *htmlPage, n *analyze.NestedReport, notes bool) {
	if n.Stats.Spans == 0 && len(n.Findings) == 0 {
		return
	}
	if len(n.Findings) == 0 {
		p.Summary = append(p.Summary, fmt.Sprintf("nested duplicates (one operation recorded as two spans, one inside the other): none in %s.",
			plural(n.Stats.Spans, "span", "spans")))
	} else {
		p.Summary = append(p.Summary, fmt.Sprintf("nested duplicates (one operation recorded as two spans, one inside the other: double instrumentation): %s in %s.",
			plural(n.Pairs, "nested duplicate", "nested duplicates"), plural(len(n.Findings), "finding", "findings")))
		t := htmlTable{Caption: "Nested duplicates: one operation recorded as two spans (double instrumentation)",
			Head: []string{"#", "service", "kind", "span name", "outer scope", "inner scope", "traces", "pairs", "share of the kind's spans", "example (trace / outer / inner)"}}
		for i, f := range n.Findings {
			name := f.Name
			if f.InnerName != "" {
				name += " / " + f.InnerName
			}
			ex := ""
			if len(f.Examples) > 0 {
				ex = f.Examples[0].TraceID + " / " + f.Examples[0].OuterSpanID + " / " + f.Examples[0].InnerSpanID
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), orDash(f.Service), f.Kind, orDash(name), f.OuterScope.String(), f.InnerScope.String(),
				strconv.Itoa(f.Traces), strconv.Itoa(f.Occurrences), fmt.Sprintf("%d of %d (%s)", f.AffectedSpans, f.KindSpans, strconv.FormatFloat(100*f.Share, 'f', 1, 64)+"%"), ex})
			if notes {
				p.Notes = append(p.Notes, "nested duplicate: "+f.Diagnosis)
			}
		}
		p.Tables = append(p.Tables, t)
	}
	if st := n.Stats; st.Evicted > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("nested duplicates: %s forgotten to stay within %d held (%d before their parent arrived): a pair split across them was not compared.",
			plural(st.Evicted, "span was", "spans were"), st.MaxSpans, st.EvictedWaiting))
	}
}

func spanTable(groups []analyze.SpanGroup) (htmlTable, bool) {
	t := htmlTable{Caption: "Span ids stored more than once, by service and span name",
		Head: []string{"#", "service", "span name", "spans", "distinct ids", "duplicated ids", "extra copies", "differing", "ids x copies", "example (trace / span)"}}
	for _, g := range groups {
		if g.Duplicated == 0 {
			continue
		}
		ex := ""
		if len(g.Examples) > 0 {
			ex = g.Examples[0].TraceID + " / " + g.Examples[0].SpanID
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(len(t.Rows) + 1), orDash(g.Service), orDash(g.Name), strconv.Itoa(g.Received),
			strconv.Itoa(g.Unique), strconv.Itoa(g.Duplicated), strconv.Itoa(g.ExtraCopies), strconv.Itoa(g.Conflicting), copiesOf(g.Copies), ex})
	}
	return t, len(t.Rows) > 0
}

// WriteOTLPText writes an OTLP file audit: the files, then internal/analyze's
// text report.
func WriteOTLPText(w io.Writer, r *OTLPReport) error {
	ew := &errWriter{w: w}
	for _, f := range r.Files {
		ew.printf("%s: %s read (%s)", f.Path, plural(f.Requests, "export request", "export requests"), compressionText(f.Compression))
		if f.Malformed > 0 {
			ew.printf("; %s skipped: not OTLP-JSON", plural(f.Malformed, "malformed line", "malformed lines"))
		}
		ew.printf("\n")
	}
	ew.printf("\n")
	if ew.err != nil {
		return ew.err
	}
	if err := analyze.WriteText(w, r.Analysis); err != nil {
		return err
	}
	if len(r.Series) > 0 {
		ew.printf("\ncumulative streams with resets, as Prometheus would store them, worst first:\n")
		if err := writeSeriesTable(ew, r.Series, 0); err != nil {
			return err
		}
	}
	for _, p := range r.Problems {
		ew.printf("problem: %s\n", p)
	}
	return ew.err
}

// compressionText says how a file was stored, for people.
func compressionText(c Compression) string {
	switch c {
	case CompressionNone:
		return "OTLP-JSON lines, uncompressed"
	case CompressionGzip:
		return "OTLP-JSON lines, gzip"
	case CompressionZstd:
		return "OTLP-JSON lines, zstd"
	case CompressionZstdFramed:
		return "OTLP-JSON, one length-prefixed zstd frame per request"
	}
	return string(c)
}

// WriteOTLPHTML writes an OTLP file audit as a self-contained HTML page.
func WriteOTLPHTML(w io.Writer, r *OTLPReport) error {
	p := htmlPage{Title: "doubletake audit: OTLP files"}
	for _, f := range r.Files {
		p.Meta = append(p.Meta, fmt.Sprintf("%s: %s read (%s), %s skipped", f.Path, plural(f.Requests, "export request", "export requests"), compressionText(f.Compression), plural(f.Malformed, "malformed line", "malformed lines")))
	}
	a := r.Analysis
	p.Summary = append(p.Summary,
		fmt.Sprintf("spans: %d received, %d duplicated ids, %s.", a.Spans.Received, a.Spans.Duplicated, plural(a.Spans.ExtraCopies, "extra copy", "extra copies")),
		fmt.Sprintf("metrics: %d points in %d streams, %d with more than one writer, %d overlapping, %d resets.",
			a.Metrics.Points, a.Metrics.Streams, a.Metrics.MultiWriter, a.Metrics.Overlapping, a.Metrics.Resets),
		fmt.Sprintf("logs: %d received, %d duplicated records, %s.", a.Logs.Received, a.Logs.Duplicated, plural(a.Logs.ExtraCopies, "extra copy", "extra copies")))
	if t, ok := spanTable(a.Spans.Groups); ok {
		p.Tables = append(p.Tables, t)
	}
	addNested(&p, &a.Nested, false)
	if len(a.Metrics.List) > 0 {
		t := htmlTable{Caption: "Metric streams with more than one writer, dropped points or resets",
			Head: []string{"#", "stream", "type", "service", "points", "writers", "overlap", "resets()", "diagnosis"}}
		for i, m := range a.Metrics.List {
			resets := "-"
			if m.Prometheus != nil {
				resets = strconv.Itoa(m.Prometheus.Resets)
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), m.Name + "{" + m.Attributes + "}", m.Type, orDash(m.Service), strconv.Itoa(m.Points),
				strconv.Itoa(len(m.Writers) + m.MoreWriters), strconv.FormatBool(m.Overlap), resets, orDash(string(m.Diagnosis))})
		}
		p.Tables = append(p.Tables, t)
	}
	if len(a.Logs.Groups) > 0 {
		t := htmlTable{Caption: "Log records stored more than once, by service and scope",
			Head: []string{"#", "service", "scope", "records", "distinct", "duplicated", "extra copies"}}
		for _, g := range a.Logs.Groups {
			if g.Duplicated == 0 {
				continue
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(len(t.Rows) + 1), orDash(g.Service), orDash(g.Scope), strconv.Itoa(g.Received),
				strconv.Itoa(g.Unique), strconv.Itoa(g.Duplicated), strconv.Itoa(g.ExtraCopies)})
		}
		if len(t.Rows) > 0 {
			p.Tables = append(p.Tables, t)
		}
	}
	addSeries(&p, "Cumulative streams with resets, as Prometheus would store them, worst first", r.Series, r.Charts)
	for _, f := range a.Findings {
		p.Notes = append(p.Notes, f.Line)
	}
	for _, pr := range r.Problems {
		p.Notes = append(p.Notes, "problem: "+pr)
	}
	return writePage(w, p)
}
