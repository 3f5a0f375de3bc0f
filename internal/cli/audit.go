package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/doubletake/doubletake/internal/audit"
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

// auditReportFlags are the output flags every audit takes.
func auditReportFlags(f *pflag.FlagSet, o *reportOutput) {
	f.StringVar(&o.format, "format", "text", "report format: text or json")
	f.StringVarP(&o.output, "output", "o", "", "write the report to this `FILE` instead of stdout")
	f.StringVar(&o.html, "html", "", "also write a self-contained HTML report to this `FILE`")
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
