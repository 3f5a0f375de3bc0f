package scan

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText writes the findings grouped by hazard: what the hazard is
// known to do, once, then each finding and the fix for it there:
//
//	fastapi >=0.142.0,<0.143.0 (2 findings)
//	  effect: FastAPI 0.142.0 to 0.142.4 configure ...
//	  see:    fastapi/fastapi#16476
//	  fixed:  0.143.0
//
//	path:line: fastapi 0.142.4 is locked
//	  fix:    add "fastapi!=0.142.*" to the project's dependencies ...
//	path:line: fastapi>=0.135 in project.dependencies admits fastapi 0.142.0
//	  fix:    require fastapi>=0.135,!=0.142.*, then re-lock and reinstall
//
// Hazards come in the order of their first finding, findings in the order
// given.
func WriteText(w io.Writer, findings []Finding) error {
	type group struct {
		about    Finding // the first finding, for the hazard's fields
		findings []Finding
	}
	type hazardKey struct{ pkg, affected, effect, reference string }
	var groups []*group
	byHazard := map[hazardKey]*group{}
	for _, f := range findings {
		k := hazardKey{f.Package, f.Affected, f.Effect, f.Reference}
		g := byHazard[k]
		if g == nil {
			g = &group{about: f}
			byHazard[k] = g
			groups = append(groups, g)
		}
		g.findings = append(g.findings, f)
	}
	bw := bufio.NewWriter(w)
	for i, g := range groups {
		if i > 0 {
			_ = bw.WriteByte('\n') // sticky; Flush reports it
		}
		h := g.about
		fmt.Fprintf(bw, "%s %s (%s)\n", safeText(h.Package, maxTextField), safeText(h.Affected, maxTextField), plural(len(g.findings), "finding"))
		writeWrapped(bw, "  effect: ", safeText(h.Effect, 4*maxTextField))
		writeWrapped(bw, "  see:    ", safeText(h.Reference, maxTextField))
		if h.Fixed != "" {
			writeWrapped(bw, "  fixed:  ", safeText(h.Fixed, maxTextField))
		}
		_ = bw.WriteByte('\n')
		for _, f := range g.findings {
			fmt.Fprintf(bw, "%s: %s\n", location(f.Path, f.Line), safeText(headline(f), maxTextField))
			writeWrapped(bw, "  fix:    ", safeText(f.Fix, 2*maxTextField))
		}
	}
	return bw.Flush()
}

func headline(f Finding) string {
	switch f.Kind {
	case KindInstalled:
		return fmt.Sprintf("%s %s is installed", f.Package, f.Version)
	case KindLocked:
		if f.Requirement != "" {
			return fmt.Sprintf("%s is pinned", f.Requirement)
		}
		return fmt.Sprintf("%s %s is locked", f.Package, f.Version)
	default:
		where := ""
		if f.Section != "" {
			where = " in " + f.Section
		}
		return fmt.Sprintf("%s%s admits %s %s", f.Requirement, where, f.Package, f.Admits)
	}
}

// maxTextField caps a field of the text output (a requirement or message
// can carry up to a whole line of a hostile file).
const maxTextField = 300

// WriteProblems writes one "path[:line]: message" line per problem.
func WriteProblems(w io.Writer, problems []Problem) error {
	bw := bufio.NewWriter(w)
	for _, p := range problems {
		fmt.Fprintf(bw, "%s: %s\n", location(p.Path, p.Line), safeText(p.Message, maxTextField))
	}
	return bw.Flush()
}

// WriteNotJudged writes a "not judged" section: one
// "path[:line]: reason: detail" line per entry, after a heading (nothing
// when there are none).
func WriteNotJudged(w io.Writer, entries []NotJudged, afterFindings bool) error {
	if len(entries) == 0 {
		return nil
	}
	bw := bufio.NewWriter(w)
	if afterFindings {
		_ = bw.WriteByte('\n') // sticky; Flush reports it
	}
	fmt.Fprintf(bw, "not judged (%d): the scan saw these but could not check them\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(bw, "  %s: %s: %s\n", location(e.Path, e.Line), e.Reason, safeText(e.Detail, maxTextField))
	}
	return bw.Flush()
}

// WriteJSON writes the result as one indented JSON document.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

func location(path string, line int) string {
	path = safeText(path, 4096)
	if line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return path
}

// writeWrapped writes text after prefix, wrapped at 80 columns with
// continuation lines indented like the text. A bufio.Writer's errors are
// sticky, so the caller's Flush reports any failed write here.
func writeWrapped(w *bufio.Writer, prefix, text string) {
	const width = 80
	_, _ = w.WriteString(prefix)
	col := len(prefix)
	indent := strings.Repeat(" ", len(prefix))
	for i, word := range strings.Fields(text) {
		if i > 0 && col+1+len(word) > width {
			_ = w.WriteByte('\n')
			_, _ = w.WriteString(indent)
			col = len(indent)
		} else if i > 0 {
			_ = w.WriteByte(' ')
			col++
		}
		_, _ = w.WriteString(word)
		col += len(word)
	}
	_ = w.WriteByte('\n')
}
