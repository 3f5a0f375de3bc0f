package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/doubletake/doubletake/internal/audit"
	"github.com/doubletake/doubletake/internal/termsafe"
)

// Environment variables that hold audit credentials: secrets never go on
// the command line, where ps and shell history see them.
const (
	envPromToken    = "DOUBLETAKE_PROM_BEARER_TOKEN"
	envPromUser     = "DOUBLETAKE_PROM_USERNAME"
	envPromPassword = "DOUBLETAKE_PROM_PASSWORD"

	envTracesToken    = "DOUBLETAKE_TRACES_BEARER_TOKEN"
	envTracesUser     = "DOUBLETAKE_TRACES_USERNAME"
	envTracesPassword = "DOUBLETAKE_TRACES_PASSWORD"
)

const auditExitStatus = `Exit status: 0 something was audited and nothing found; 1 findings; 2 bad flags
or arguments (a selector the backend refuses included); 4 the backend could
not be read (unreachable, 401/403, malformed answers), an output could not be
written, or nothing matched (an empty audit is not a clean one).`

func newAuditCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Measure the damage already stored: spurious counter resets in Prometheus, duplicate spans in Jaeger, Tempo or OTLP files",
		Long: `audit reads what backends already store and measures what double export did:

  prometheus  counter series with spurious resets: interleaved writers (two
              monotonic chains, alternating dips) against genuine restarts;
              increase() as stored against the dominant writer's increase
  traces      span ids stored more than once per trace, by service and span
              name, in Jaeger (raw, before its query-time deduplication) or
              Tempo; and nested duplicates (one operation stored as two spans,
              one inside the other: double instrumentation)
  otlp        OTLP-JSON-lines files (the collector's file exporter, the
              gateway's default sink), plain, gzip or zstd: everything verify
              reports, nested duplicates included

Each writes a text table (or --format json) and, with --html FILE, a
self-contained HTML report.

` + auditExitStatus,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			return usageError("audit: name what to audit: prometheus, traces or otlp")
		},
	}
	cmd.AddCommand(newAuditPrometheusCommand(s), newAuditTracesCommand(s), newAuditOTLPCommand(s))
	return cmd
}

// auditOutput are the output flags every audit takes.
type auditOutput struct {
	format string
	output string
	html   string
}

func (o *auditOutput) flags(f *pflag.FlagSet) {
	f.StringVar(&o.format, "format", "text", "report format: text or json")
	f.StringVarP(&o.output, "output", "o", "", "write the report to this `FILE` instead of stdout")
	f.StringVar(&o.html, "html", "", "also write a self-contained HTML report to this `FILE`")
}

func (o *auditOutput) validate(name string) error {
	if o.format != "text" && o.format != "json" {
		return usageError("audit %s: --format %q: want text or json", name, o.format)
	}
	return nil
}

// write renders the report to --output (or out) and the HTML page to --html.
func (o *auditOutput) write(out io.Writer, report any, text, html func(io.Writer) error) error {
	var buf bytes.Buffer
	var err error
	if o.format == "json" {
		err = audit.WriteJSON(&buf, report)
	} else {
		// Names in the report come from telemetry: escape what could
		// drive the terminal.
		tw := termsafe.NewWriter(&buf)
		err = errors.Join(text(tw), tw.Flush())
	}
	if err != nil {
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("rendering the report: %w", err)}
	}
	if o.output != "" {
		if err := os.WriteFile(o.output, buf.Bytes(), 0o644); err != nil {
			return &ExitError{Code: ExitInternal, Err: fmt.Errorf("writing the report: %w", err)}
		}
	} else if _, err := out.Write(buf.Bytes()); err != nil {
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("writing the report: %w", err)}
	}
	if o.html != "" {
		var hb bytes.Buffer
		if err := html(&hb); err != nil {
			return &ExitError{Code: ExitInternal, Err: fmt.Errorf("rendering the HTML report: %w", err)}
		}
		if err := os.WriteFile(o.html, hb.Bytes(), 0o644); err != nil {
			return &ExitError{Code: ExitInternal, Err: fmt.Errorf("writing the HTML report: %w", err)}
		}
	}
	return nil
}

// clientFlags configure the HTTP client; secrets come from the
// environment (envToken, envUser, envPassword) or from files.
type clientFlags struct {
	envToken, envUser, envPassword string

	bearerTokenFile string
	username        string
	passwordFile    string
	caFile          string
	certFile        string
	keyFile         string
	serverName      string
	insecure        bool
	tenant          string
	timeout         time.Duration
}

func (c *clientFlags) flags(f *pflag.FlagSet) {
	f.StringVar(&c.bearerTokenFile, "bearer-token-file", "", "read a bearer token from this `FILE` (or set "+c.envToken+")")
	f.StringVar(&c.username, "username", "", "basic auth user `NAME` (or set "+c.envUser+"); the password comes from "+c.envPassword+" or --password-file")
	f.StringVar(&c.passwordFile, "password-file", "", "read the basic auth password from this `FILE`")
	f.StringVar(&c.caFile, "ca-file", "", "verify the server with the CA certificates in this PEM `FILE`")
	f.StringVar(&c.certFile, "cert-file", "", "client certificate PEM `FILE` for mutual TLS (with --key-file)")
	f.StringVar(&c.keyFile, "key-file", "", "client key PEM `FILE` for mutual TLS (with --cert-file)")
	f.StringVar(&c.serverName, "tls-server-name", "", "expect this `NAME` in the server's certificate")
	f.BoolVar(&c.insecure, "insecure-skip-verify", false, "do not verify the server's certificate (testing only)")
	f.StringVar(&c.tenant, "tenant", "", "send this tenant `ID` as X-Scope-OrgID (Mimir, Cortex, Tempo)")
	f.DurationVar(&c.timeout, "timeout", audit.DefaultRequestTimeout, "give up on one request after this long")
}

func (c *clientFlags) options() (audit.ClientOptions, error) {
	for flag, path := range map[string]string{"--bearer-token-file": c.bearerTokenFile, "--password-file": c.passwordFile,
		"--ca-file": c.caFile, "--cert-file": c.certFile, "--key-file": c.keyFile} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return audit.ClientOptions{}, usageError("%s: no such file: %s", flag, path)
			}
			return audit.ClientOptions{}, usageError("%s: %v", flag, err)
		}
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return audit.ClientOptions{}, usageError("--cert-file and --key-file go together")
	}
	o := audit.ClientOptions{
		BearerToken:        os.Getenv(c.envToken),
		BearerTokenFile:    c.bearerTokenFile,
		Username:           c.username,
		Password:           os.Getenv(c.envPassword),
		PasswordFile:       c.passwordFile,
		CAFile:             c.caFile,
		CertFile:           c.certFile,
		KeyFile:            c.keyFile,
		ServerName:         c.serverName,
		InsecureSkipVerify: c.insecure,
		Timeout:            c.timeout,
	}
	if o.Username == "" {
		o.Username = os.Getenv(c.envUser)
	}
	if c.tenant != "" {
		o.Headers = map[string]string{"X-Scope-OrgID": c.tenant}
	}
	return o, nil
}

// checkURL accepts an http or https URL with a host.
func checkURL(flag, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("%s %q: want an http:// or https:// URL", flag, raw)
	}
	if u.User != nil {
		return usageError("%s: credentials in the URL would show in the process list; use the environment or a file", flag)
	}
	return nil
}

// auditFailure maps an audit error to an exit code with advice.
func auditFailure(err error, c *clientFlags) error {
	var se *audit.StatusError
	var ue *audit.UnreachableError
	switch {
	case errors.Is(err, context.Canceled):
		return &ExitError{Code: ExitInternal, Err: err}
	case errors.Is(err, audit.ErrBadQuery):
		return &ExitError{Code: ExitUsage, Err: err}
	case errors.As(err, &se):
		hint := "set " + c.envToken + " or --bearer-token-file, or " + c.envUser + " and " + c.envPassword + " (or --username, --password-file)"
		if se.Code == 403 {
			hint = "the credentials are not allowed to read this"
		}
		return &ExitError{Code: ExitInternal, Err: fmt.Errorf("%w (%s)", err, hint)}
	case errors.As(err, &ue):
		return &ExitError{Code: ExitInternal, Err: err}
	}
	return &ExitError{Code: ExitInternal, Err: err}
}

// timeValue is a flag holding a time: RFC 3339 or Unix seconds.
type timeValue struct{ t *time.Time }

func (v timeValue) String() string {
	if v.t == nil || v.t.IsZero() {
		return ""
	}
	return v.t.Format(time.RFC3339)
}

func (v timeValue) Set(s string) error {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*v.t = t
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		*v.t = time.Unix(0, int64(f*1e9))
		return nil
	}
	return fmt.Errorf("want RFC 3339 (2025-01-02T15:04:05Z) or Unix seconds")
}

func (timeValue) Type() string { return "time" }

// durationValue is a flag holding a Prometheus-style duration (1h, 7d, 2w).
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return model.Duration(*v.d).String()
}

func (v durationValue) Set(s string) error {
	d, err := model.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("want a positive duration")
	}
	*v.d = time.Duration(d)
	return nil
}

func (durationValue) Type() string { return "duration" }

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
	out         auditOutput
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
	o.out.flags(f)
	o.client.flags(f)
	_ = cmd.MarkFlagRequired("url")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
	return cmd
}

func runAuditPrometheus(ctx context.Context, s Streams, o auditPromOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.out.validate("prometheus"); err != nil {
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
	if err := o.out.write(s.Out, rep,
		func(w io.Writer) error { return audit.WritePromText(w, rep, o.top) },
		func(w io.Writer) error { return audit.WritePromHTML(w, rep) }); err != nil {
		return err
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

type auditTracesOptions struct {
	jaeger   string
	tempo    string
	service  string
	lookback time.Duration
	end      time.Time
	limit    int
	out      auditOutput
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
	o.out.flags(f)
	o.client.flags(f)
	_ = cmd.MarkFlagRequired("service")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
	return cmd
}

func runAuditTraces(ctx context.Context, s Streams, o auditTracesOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.out.validate("traces"); err != nil {
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
	if err := o.out.write(s.Out, rep,
		func(w io.Writer) error { return audit.WriteTraceText(w, rep) },
		func(w io.Writer) error { return audit.WriteTraceHTML(w, rep) }); err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "doubletake audit: %s, %d span ids stored more than once (%d extra copies), %s (double instrumentation)\n",
		auditCount(rep.Traces, "trace"), rep.Spans.Duplicated, rep.Spans.ExtraCopies, auditCount(rep.Nested.Pairs, "nested duplicate"))
	if rep.Findings() > 0 {
		return &ExitError{Code: ExitFindings}
	}
	return nil
}

func newAuditOTLPCommand(s Streams) *cobra.Command {
	var out auditOutput
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
			if err := out.validate("otlp"); err != nil {
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
			if err := out.write(s.Out, rep,
				func(w io.Writer) error { return audit.WriteOTLPText(w, rep) },
				func(w io.Writer) error { return audit.WriteOTLPHTML(w, rep) }); err != nil {
				return err
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
	out.flags(cmd.Flags())
	cmd.Flags().BoolVar(&strict, "strict", false, "fail (exit 1) when a line is not OTLP-JSON; without it malformed lines are reported and skipped")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
	return cmd
}

// auditCount renders "1 word" or "n words".
func auditCount(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, " read") {
		return strconv.Itoa(n) + " " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
