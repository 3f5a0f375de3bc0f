package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/audit"
)

type auditPromOptions struct {
	url         string
	matchers    []string
	rng         time.Duration
	end         time.Time
	concurrency int
	chunk       int
	top         int
	maxCharts   int
	progress    time.Duration
	out         reportOutput
	client      clientFlags
}

func newAuditPrometheusCommand(s Streams) *cobra.Command {
	o := auditPromOptions{
		rng: audit.DefaultRange, concurrency: audit.DefaultConcurrency, chunk: audit.DefaultChunkSeries,
		top: 50, maxCharts: audit.DefaultMaxCharts, progress: audit.DefaultProgressEvery,
		client: clientFlags{envToken: envPromToken, envUser: envPromUser, envPassword: envPromPassword},
	}
	cmd := &cobra.Command{
		Use:   "prometheus --url URL [--match SELECTOR]... [--range 24h]",
		Short: "Find counter series with spurious resets in a Prometheus-API-compatible backend",
		Long: `Read every counter-like series the selectors match over --range through the
Prometheus HTTP API, as stored (raw samples), and for each:

  resets      exactly what PromQL's resets() returns over the range
  class       interleaved: the samples split into two or more monotonic chains
              and alternate between them (A B A): two writers of one series
              restart: every reset falls to near zero (<= 10% of the value
              before it) and the old level never returns: a genuine reset
              drop: a fall not to near zero that never recovers (a change of
              writer): not conclusive
  increase()  what increase() over the range returns, against the same
              computation over the dominant chain (the writer with the most
              samples); their ratio is how wrong increase() and rate() are

Counter-like: type counter (histogram and summary for _bucket, _sum, _count)
in the server's metadata; without metadata, a name ending in _total, _sum,
_count or _bucket. Series are paged: metric names first, then the series of
each name, then their samples (one query per selector for a name with at most
--chunk-series series, otherwise one series per query), --concurrency queries
at a time; a progress line goes to stderr.

Credentials: ` + envPromToken + ` or --bearer-token-file; or
` + envPromUser + ` (or --username) with ` + envPromPassword + ` or
--password-file. Never on the command line.

` + auditExitStatus + ` Findings: interleaved series.`,
		Example: `  doubletake audit prometheus --url http://prometheus:9090 --match '{job="api"}' --range 7d
  DOUBLETAKE_PROM_BEARER_TOKEN=... doubletake audit prometheus --url https://mimir/prometheus --tenant team-a --html audit.html`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuditPrometheus(cmd.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "", "the Prometheus API base `URL` (required), e.g. http://prometheus:9090")
	f.StringArrayVar(&o.matchers, "match", nil, "series `SELECTOR`, repeatable (default "+audit.DefaultMatcher+": every series)")
	f.Var(durationValue{&o.rng}, "range", "how far back to read (Prometheus duration: 1h, 24h, 7d)")
	f.Var(timeValue{&o.end}, "end", "end of the range (RFC 3339 or Unix seconds; default now)")
	f.IntVar(&o.concurrency, "concurrency", o.concurrency, "queries in flight at once")
	f.IntVar(&o.chunk, "chunk-series", o.chunk, "read a metric name with at most this many series in one query per selector; larger ones one series per query")
	f.IntVar(&o.top, "top", o.top, "list at most this many affected series in the text report (0: all)")
	f.IntVar(&o.maxCharts, "max-charts", o.maxCharts, "draw at most this many series (the worst) in the HTML report")
	f.DurationVar(&o.progress, "progress-interval", o.progress, "print a progress line to stderr this often (0: never)")
	auditReportFlags(f, &o.out)
	o.client.flags(f)
	_ = cmd.MarkFlagRequired("url")
	return cmd
}

func runAuditPrometheus(ctx context.Context, s Streams, o auditPromOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.out.validate("audit prometheus"); err != nil {
		return err
	}
	if err := checkURL("--url", o.url); err != nil {
		return err
	}
	if o.concurrency < 1 || o.chunk < 1 || o.top < 0 || o.maxCharts < 0 || o.progress < 0 {
		return usageError("audit prometheus: --concurrency and --chunk-series must be at least 1; --top, --max-charts and --progress-interval not negative")
	}
	copts, err := o.client.options()
	if err != nil {
		return err
	}
	hc, err := audit.NewHTTPClient(copts)
	if err != nil {
		return usageError("audit prometheus: %v", err)
	}
	c, err := api.NewClient(api.Config{Address: o.url, Client: hc})
	if err != nil {
		return usageError("audit prometheus: --url: %v", err)
	}
	popts := audit.PromOptions{
		URL: o.url, Matchers: o.matchers, End: o.end, Range: o.rng,
		Concurrency: o.concurrency, ChunkSeries: o.chunk, MaxCharts: o.maxCharts,
		ProgressEvery: o.progress,
	}
	if o.maxCharts == 0 {
		popts.MaxCharts = -1
	}
	if o.progress > 0 {
		popts.Progress = s.Err
	}
	rep, err := audit.AuditPrometheus(ctx, promv1.NewAPI(c), popts)
	if err != nil {
		return auditFailure(err, &o.client)
	}
	if err := o.out.write(s.Out, renderings{
		value: rep,
		text:  func(w io.Writer) error { return audit.WritePromText(w, rep, o.top) },
		html:  func(w io.Writer) error { return audit.WritePromHTML(w, rep) },
	}); err != nil {
		return &ExitError{Code: ExitInternal, Err: err}
	}
	fmt.Fprintf(s.Err, "doubletake audit: %d interleaved, %d drop, %d restart, %d clean of %s\n",
		rep.Classes[audit.ClassInterleaved], rep.Classes[audit.ClassDrop], rep.Classes[audit.ClassRestart], rep.Classes[audit.ClassClean],
		auditCount(rep.Series, "series read"))
	switch {
	case rep.Findings() > 0:
		return &ExitError{Code: ExitFindings}
	case rep.Failed > 0:
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("%d series or metric names could not be read; the first: %s", rep.Failed, rep.Problems[0])}
	}
	return nil
}
