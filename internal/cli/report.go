package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/doubletake/doubletake/internal/reportjson"
	"github.com/doubletake/doubletake/internal/termsafe"
)

// reportOutput is where a command's report goes, as its flags say: the
// report as --format (text or json) on stdout or to the --output file, and
// the other renderings it offers in the files --html or --junit name. Every
// command that writes a report writes it through write.
type reportOutput struct {
	format string // text or json
	output string // a file instead of stdout
	html   string // a file for the HTML rendering (audit)
	junit  string // a file for the JUnit XML rendering (verify)
}

// validate checks --format; cmd names the command in the error.
func (o *reportOutput) validate(cmd string) error {
	if o.format != "text" && o.format != "json" {
		return usageError("%s: --format %q: want text or json", cmd, o.format)
	}
	return nil
}

// jsonToStdout reports whether the report is JSON on stdout.
func (o *reportOutput) jsonToStdout() bool { return o.format == "json" && o.output == "" }

// renderings are the forms one report can be written in: value as JSON,
// text, and html and junit for the commands that offer them (nil
// otherwise).
type renderings struct {
	value any
	text  func(io.Writer) error
	html  func(io.Writer) error
	junit func(io.Writer) error
}

// write renders the report to --output (or out) as --format, then to the
// files --html and --junit name. Each is rendered whole before its file is
// written: a rendering that fails leaves no partial file.
func (o *reportOutput) write(out io.Writer, r renderings) error {
	var buf bytes.Buffer
	var err error
	if o.format == "json" {
		err = reportjson.Write(&buf, r.value)
	} else {
		// Names in a report come from telemetry: escape what could drive
		// the terminal.
		tw := termsafe.NewWriter(&buf)
		err = errors.Join(r.text(tw), tw.Flush())
	}
	if err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	if o.output != "" {
		err = os.WriteFile(o.output, buf.Bytes(), 0o644)
	} else {
		_, err = out.Write(buf.Bytes())
	}
	if err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	for _, extra := range []struct {
		path, name string
		render     func(io.Writer) error
	}{
		{o.html, "the HTML report", r.html},
		{o.junit, "--junit " + o.junit, r.junit},
	} {
		if extra.path == "" || extra.render == nil {
			continue
		}
		var eb bytes.Buffer
		if err := extra.render(&eb); err != nil {
			return fmt.Errorf("rendering %s: %w", extra.name, err)
		}
		if err := os.WriteFile(extra.path, eb.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", extra.name, err)
		}
	}
	return nil
}
