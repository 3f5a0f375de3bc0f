package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/scan"
)

func newScanCommand(s Streams) *cobra.Command {
	var (
		hazardFiles   []string
		format        string
		opts          scan.Options
		failNotJudged bool
	)
	cmd := &cobra.Command{
		Use:   "scan [PATH...]",
		Short: "Find Python environments and lockfiles that install, lock or admit a telemetry-doubling release",
		Long: `scan walks PATHs (default: the current directory) and checks installed
Python environments (site-packages *.dist-info/METADATA), uv.lock,
poetry.lock, *requirements*.txt, constraints*.txt, requirements/*.txt and
pyproject.toml (PEP 621, PEP 735, uv and Poetry tables) against a database
of releases known to export telemetry twice, such as FastAPI 0.142.0 to
0.142.4. It reads only regular files inside each PATH and never follows a
symbolic link out of it.

Each finding is one of:
  installed  an environment has an affected release: it exports twice now
  locked     uv.lock or an == pin selects an affected release
  admits     a specifier allows an affected release on the next resolve

What it saw but could not judge (dynamic dependencies, URLs, VCS and path
requirements, unsupported manifests, skipped symbolic links and special
files) is listed in a separate "not judged" section.

Exit status: 0 nothing found, 1 findings, 2 bad flags or paths,
4 a file could not be read or parsed and nothing was found,
` + strconv.Itoa(ExitNotJudged) + ` (with --fail-not-judged) nothing found but something was not judged.`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, paths []string) error {
			if format != "text" && format != "json" {
				return usageError("invalid --format %q: want text or json", format)
			}
			for _, p := range paths {
				if _, err := os.Stat(p); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return usageError("no such file or directory: %s", p)
					}
					return &ExitError{Code: ExitInternal, Err: err}
				}
			}
			db, err := loadHazards(hazardFiles)
			if err != nil {
				return err
			}

			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if opts.MaxFileBytes <= 0 || opts.MaxLineBytes <= 0 || opts.MaxPerFile <= 0 || opts.MaxIncludeDepth <= 0 {
				return usageError("--max-file-bytes, --max-line-bytes, --max-per-file and --max-include-depth must be positive")
			}
			res := scan.ScanWith(ctx, db, opts, paths...)
			if format == "json" {
				err = scan.WriteJSON(s.Out, res)
			} else {
				err = scan.WriteText(s.Out, res.Findings)
				if err == nil {
					err = scan.WriteNotJudged(s.Out, res.NotJudged, len(res.Findings) > 0)
				}
			}
			if err != nil {
				return &ExitError{Code: ExitInternal, Err: fmt.Errorf("writing results: %w", err)}
			}
			if err := scan.WriteProblems(s.Err, res.Problems); err != nil {
				return &ExitError{Code: ExitInternal, Err: fmt.Errorf("writing problems: %w", err)}
			}
			fmt.Fprintf(s.Err, "doubletake scan: %s, %s, %d not judged (%s read, %s checked)\n",
				plural(len(res.Findings), "finding"), plural(len(res.Problems), "problem"), len(res.NotJudged),
				plural(res.FilesRead, "file"), plural(db.Len(), "hazard"))

			switch {
			case len(res.Findings) > 0:
				return &ExitError{Code: ExitFindings}
			case len(res.Problems) > 0:
				// Nothing found, but not everything could be checked.
				return &ExitError{Code: ExitInternal}
			case failNotJudged && len(res.NotJudged) > 0:
				return &ExitError{Code: ExitNotJudged}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&hazardFiles, "hazards", nil, "also load hazard entries from this YAML `FILE` (repeatable)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().Int64Var(&opts.MaxFileBytes, "max-file-bytes", scan.DefaultMaxFileBytes, "read at most this many bytes of one file (a larger TOML file is not read; a requirements file is read up to the cap)")
	cmd.Flags().IntVar(&opts.MaxLineBytes, "max-line-bytes", scan.DefaultMaxLineBytes, "skip (and report) requirements lines longer than this")
	cmd.Flags().IntVar(&opts.MaxPerFile, "max-per-file", scan.DefaultMaxPerFile, "list at most this many findings, problems and not-judged entries per file (the rest are counted)")
	cmd.Flags().IntVar(&opts.MaxIncludeDepth, "max-include-depth", scan.DefaultMaxIncludeDepth, "follow -r / -c includes at most this deep")
	cmd.Flags().BoolVar(&failNotJudged, "fail-not-judged", false, fmt.Sprintf("exit %d when nothing is found but something could not be judged", ExitNotJudged))
	return cmd
}

// loadHazards returns the built-in hazards plus those in files. A file that
// cannot be read is an internal error; one that does not validate is a
// usage error.
func loadHazards(files []string) (*scan.DB, error) {
	hazards, err := scan.BuiltinHazards()
	if err != nil {
		return nil, &ExitError{Code: ExitInternal, Err: err}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, &ExitError{Code: ExitInternal, Err: fmt.Errorf("reading hazards file: %w", err)}
		}
		extra, err := scan.ParseHazards(data, f)
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("invalid hazards file:\n%w", err)}
		}
		hazards = append(hazards, extra...)
	}
	return scan.NewDB(hazards...), nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
