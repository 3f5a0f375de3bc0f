package audit

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"
)

// WritePromText writes a Prometheus audit as a summary and a table of the
// affected series, worst first; top > 0 lists only the first top.
func WritePromText(w io.Writer, r *PromReport, top int) error {
	ew := &errWriter{w: w}
	ew.printf("Prometheus %s, %s ending %s\n", orDash(r.URL), r.Range, r.End.Format(time.RFC3339))
	ew.printf("%s read (%s) from %s of %s; %s skipped as not counter-like\n",
		plural(r.Series, "series", "series"), plural64(r.Samples, "sample"),
		plural(r.CounterNames, "counter-like metric name", "counter-like metric names"),
		plural(r.Names, "name", "names"), plural(r.SkippedNames, "name", "names"))
	ew.printf("interleaved %d, drop %d, restart %d, clean %d",
		r.Classes[ClassInterleaved], r.Classes[ClassDrop], r.Classes[ClassRestart], r.Classes[ClassClean])
	if r.Failed > 0 {
		ew.printf(", %d could not be read", r.Failed)
	}
	ew.printf("\n")
	if len(r.Affected) == 0 {
		ew.printf("\nno series with resets\n")
		writeNotes(ew, r.Warnings, r.Problems)
		return ew.err
	}
	ew.printf("\n")
	if err := writeSeriesTable(ew, r.Affected, top); err != nil {
		return err
	}
	ew.printf("\ninterleaved: alternating dips, two or more monotonic chains: increase() and rate() add a whole chain's value at every dip.\n")
	ew.printf("restart: falls to near zero, the old level never returns: a genuine reset, increase() is right.\n")
	ew.printf("drop: falls but not to near zero, the old level never returns: a change of writer or a late first sample.\n")
	writeWriterNotes(ew, r.Affected, top)
	writeNotes(ew, r.Warnings, r.Problems)
	return ew.err
}

// writeSeriesTable writes series results as a table; top > 0 lists only
// the first top.
func writeSeriesTable(ew *errWriter, list []*SeriesResult, top int) error {
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tCLASS\tRESETS\tSAMPLES\tCHAINS\tINCREASE()\tDOMINANT CHAIN\tFACTOR\tWRITERS\tSERIES")
	n := len(list)
	if top > 0 && top < n {
		n = top
	}
	for i, s := range list[:n] {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", i+1, s.Class, s.Resets, s.Samples, s.Chains,
			fmtNum(float64(s.Increase)), dominantCell(s), fmtFactor(float64(s.Factor)), orDash(s.Writers), s.Series)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n < len(list) {
		ew.printf("... and %d more (--top 0 lists all)\n", len(list)-n)
	}
	return ew.err
}

// writeWriterNotes says, for the interleaved series listed, what their
// writers are and why: the classifier's cause and evidence line.
func writeWriterNotes(ew *errWriter, list []*SeriesResult, top int) {
	n := len(list)
	if top > 0 && top < n {
		n = top
	}
	any := false
	for i, s := range list[:n] {
		if s.Writers == "" {
			continue
		}
		if !any {
			ew.printf("writers of interleaved series, judged from the values (copy: the other chain is the dominant one's values less a constant; peer: it is not):\n")
			any = true
		}
		ew.printf("  %d. %s: %s (%s)\n", i+1, s.Writers, s.Cause, s.Evidence)
	}
}

func writeNotes(ew *errWriter, warnings, problems []string) {
	for _, w := range warnings {
		ew.printf("warning: %s\n", w)
	}
	for _, p := range problems {
		ew.printf("problem: %s\n", p)
	}
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// fmtNum renders a value with up to 6 significant digits; "-" when unknown.
func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// dominantCell is the dominant chain's increase where it is the measure
// to trust instead of increase(): interleaved and drop series. A restart's
// increase() is right as it is.
func dominantCell(s *SeriesResult) string {
	if s.Class != ClassInterleaved && s.Class != ClassDrop {
		return "-"
	}
	return fmtNum(float64(s.DominantIncrease))
}

func fmtFactor(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "inf"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "x"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func plural64(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.FormatInt(n, 10) + " " + word + "s"
}
