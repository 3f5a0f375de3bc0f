package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/audit"
)

func newAuditOTLPCommand(s Streams) *cobra.Command {
	var out reportOutput
	var strict bool
	cmd := &cobra.Command{
		Use:   "otlp FILE...",
		Short: "Find duplicate spans, nested duplicates, log records and metric writers in OTLP-JSON-lines files",
		Long: `Read OTLP-JSON-lines files, one export request per line, as the collector's
file exporter (format: json) and the gateway's default sink write them;
plain, gzip or zstd (recognised by their first bytes). The files are read in
the order given, as one stream, and analysed as verify analyses what it
receives: duplicate span ids, nested duplicates (one operation recorded as
two spans, one inside the other: double instrumentation), duplicate log
records, metric streams with more than one writer and the resets Prometheus
would count. Files record no arrival times and no connections: copies are
told apart by how they were batched (a request repeated item for item, or
the same items in differently batched requests), and each diagnosis cites
a file and line.

Lines that are not OTLP-JSON are skipped, counted and reported (stderr and
the report); they do not change the exit status unless --strict is given.

` + auditExitStatus + ` Findings: any duplicate, nested duplicate or overlap;
with --strict, malformed lines too.`,
		Example:       `  doubletake audit otlp doubletake-data/traces.jsonl doubletake-data/logs.jsonl`,
		Args:          cobra.MinimumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(_ *cobra.Command, files []string) error {
			if err := out.validate("audit otlp"); err != nil {
				return err
			}
			for _, p := range files {
				st, err := os.Stat(p)
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return usageError("audit otlp: no such file: %s", p)
					}
					return &ExitError{Code: ExitInternal, Err: err}
				}
				if st.IsDir() {
					return usageError("audit otlp: %s is a directory; name the files", p)
				}
			}
			rep, err := audit.AuditOTLPFiles(files)
			if err != nil {
				return &ExitError{Code: ExitInternal, Err: err}
			}
			if err := out.write(s.Out, renderings{
				value: rep,
				text:  func(w io.Writer) error { return audit.WriteOTLPText(w, rep) },
				html:  func(w io.Writer) error { return audit.WriteOTLPHTML(w, rep) },
			}); err != nil {
				return &ExitError{Code: ExitInternal, Err: err}
			}
			malformed := 0
			for _, f := range rep.Files {
				malformed += f.Malformed
			}
			fmt.Fprintf(s.Err, "doubletake audit: %s read, %s, %s skipped as malformed; %s (double instrumentation)\n",
				auditCount(len(rep.Files), "file"), auditCount(rep.Findings(), "finding"), auditCount(malformed, "line"),
				auditCount(rep.Analysis.NestedDuplicates(), "nested duplicate"))
			switch {
			case rep.Findings() > 0:
				return &ExitError{Code: ExitFindings}
			case malformed > 0 && strict:
				return &ExitError{Code: ExitFindings, Err: fmt.Errorf("audit otlp: %s could not be read as OTLP-JSON (--strict)", auditCount(malformed, "line"))}
			}
			return nil
		},
	}
	auditReportFlags(cmd.Flags(), &out)
	cmd.Flags().BoolVar(&strict, "strict", false, "fail (exit 1) when a line is not OTLP-JSON; without it malformed lines are reported and skipped")
	return cmd
}
