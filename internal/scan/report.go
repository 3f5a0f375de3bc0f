package scan

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteText writes one block per finding:
//
//	path:line: fastapi 0.142.4 is locked (affected >=0.142.0,<0.143.0)
//	  effect: FastAPI 0.142.0 to 0.142.4 configure ...
//	  see:    fastapi/fastapi#16476
//	  fix:    add "fastapi!=0.142.*" to the project's dependencies ...
func WriteText(w io.Writer, findings []Finding) error {
	bw := bufio.NewWriter(w)
	for i, f := range findings {
		if i > 0 {
			bw.WriteByte('\n')
		}
		fmt.Fprintf(bw, "%s: %s (affected %s)\n", location(f.Path, f.Line), headline(f), f.Affected)
		writeWrapped(bw, "  effect: ", f.Effect)
		writeWrapped(bw, "  see:    ", f.Reference)
		writeWrapped(bw, "  fix:    ", f.Fix)
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

// WriteProblems writes one "path[:line]: message" line per problem.
func WriteProblems(w io.Writer, problems []Problem) error {
	bw := bufio.NewWriter(w)
	for _, p := range problems {
		fmt.Fprintf(bw, "%s: %s\n", location(p.Path, p.Line), p.Message)
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
	if line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return path
}

// writeWrapped writes text after prefix, wrapped at 80 columns with
// continuation lines indented like the text.
func writeWrapped(w *bufio.Writer, prefix, text string) {
	const width = 80
	w.WriteString(prefix)
	col := len(prefix)
	indent := strings.Repeat(" ", len(prefix))
	for i, word := range strings.Fields(text) {
		if i > 0 && col+1+len(word) > width {
			w.WriteByte('\n')
			w.WriteString(indent)
			col = len(indent)
		} else if i > 0 {
			w.WriteByte(' ')
			col++
		}
		w.WriteString(word)
		col += len(word)
	}
	w.WriteByte('\n')
}
