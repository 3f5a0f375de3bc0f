package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/audit"
)

type auditTracesOptions struct {
	jaeger   string
	tempo    string
	service  string
	lookback time.Duration
	end      time.Time
	limit    int
	out      reportOutput
	client   clientFlags
}

func newAuditTracesCommand(s Streams) *cobra.Command {
	o := auditTracesOptions{lookback: audit.DefaultLookback, limit: audit.DefaultTraceLimit,
		client: clientFlags{envToken: envTracesToken, envUser: envTracesUser, envPassword: envTracesPassword}}
	cmd := &cobra.Command{
		Use:   "traces (--jaeger URL | --tempo URL) --service S [--lookback 1h]",
		Short: "Count span ids stored more than once, and nested duplicates, in Jaeger or Tempo",
		Long: `Read the stored traces of one service over --lookback and count span ids
stored more than once per trace, by service and span name, and nested
duplicates: one operation recorded as two spans with different ids, one
inside the other (double instrumentation: two instrumentations of one
framework, or one applied twice), each with a diagnosis naming both
instrumentation scopes.

Jaeger: its query service deduplicates at query time (the DeduplicateSpans
adjuster drops identical copies), so the default API hides the damage. audit
reads /api/v3/traces with query.raw_traces=true, which skips the adjusters:
the spans as the storage backend returns them (Jaeger v2.2 and later; tested
with v2.13.0). With Jaeger's memory storage the adjusters rewrite the stored
trace: once a trace is viewed through the default API (the UI) its copies are
gone. Audit before viewing.

Tempo: /api/search (TraceQL) then /api/traces/<id> as OTLP protobuf. Tempo's
trace combiner keeps one copy per span id and kind across the parts of a trace
it merges, so only copies within one part are visible. Not tested against a
real Tempo.

Windows are paged: one that returns --limit traces is split in halves.

Credentials: ` + envTracesToken + ` or --bearer-token-file; or
` + envTracesUser + ` (or --username) with ` + envTracesPassword + ` or
--password-file.

` + auditExitStatus + ` Findings: duplicate span ids, nested duplicates.`,
		Example: `  doubletake audit traces --jaeger http://jaeger:16686 --service checkout --lookback 6h
  doubletake audit traces --tempo http://tempo:3200 --service checkout --format json`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuditTraces(cmd.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.jaeger, "jaeger", "", "Jaeger query service base `URL`, e.g. http://jaeger:16686")
	f.StringVar(&o.tempo, "tempo", "", "Tempo base `URL`, e.g. http://tempo:3200")
	f.StringVar(&o.service, "service", "", "the service.name whose traces to read (`NAME`, required)")
	f.Var(durationValue{&o.lookback}, "lookback", "how far back to read (1h, 24h, 7d)")
	f.Var(timeValue{&o.end}, "end", "end of the lookback (RFC 3339 or Unix seconds; default now)")
	f.IntVar(&o.limit, "limit", o.limit, "traces per request; a window returning this many is split")
	auditReportFlags(f, &o.out)
	o.client.flags(f)
	_ = cmd.MarkFlagRequired("service")
	return cmd
}

func runAuditTraces(ctx context.Context, s Streams, o auditTracesOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.out.validate("audit traces"); err != nil {
		return err
	}
	if (o.jaeger == "") == (o.tempo == "") {
		return usageError("audit traces: give exactly one of --jaeger URL and --tempo URL")
	}
	if strings.TrimSpace(o.service) == "" {
		return usageError("audit traces: --service must not be empty")
	}
	if o.limit < 1 {
		return usageError("audit traces: --limit must be at least 1")
	}
	base, flag := o.jaeger, "--jaeger"
	if o.tempo != "" {
		base, flag = o.tempo, "--tempo"
	}
	if err := checkURL(flag, base); err != nil {
		return err
	}
	copts, err := o.client.options()
	if err != nil {
		return err
	}
	hc, err := audit.NewHTTPClient(copts)
	if err != nil {
		return usageError("audit traces: %v", err)
	}
	var src audit.TraceSource
	if o.jaeger != "" {
		src = audit.NewJaeger(base, hc)
	} else {
		src = audit.NewTempo(base, hc)
	}
	rep, err := audit.AuditTraces(ctx, src, audit.TraceOptions{
		URL: base, Service: o.service, End: o.end, Lookback: o.lookback, Limit: o.limit,
	})
	if err != nil {
		return auditFailure(err, &o.client)
	}
	if err := o.out.write(s.Out, renderings{
		value: rep,
		text:  func(w io.Writer) error { return audit.WriteTraceText(w, rep) },
		html:  func(w io.Writer) error { return audit.WriteTraceHTML(w, rep) },
	}); err != nil {
		return &ExitError{Code: ExitInternal, Err: err}
	}
	fmt.Fprintf(s.Err, "doubletake audit: %s, %d span ids stored more than once (%d extra copies), %s (double instrumentation)\n",
		auditCount(rep.Traces, "trace"), rep.Spans.Duplicated, rep.Spans.ExtraCopies, auditCount(rep.Nested.Pairs, "nested duplicate"))
	if rep.Findings() > 0 {
		return &ExitError{Code: ExitFindings}
	}
	return nil
}
