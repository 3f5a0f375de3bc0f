package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	config "github.com/prometheus/common/config"
)

// ClientOptions configure the HTTP client of every backend. Secrets come
// from the environment or from files, never from the command line: the CLI
// fills BearerToken and Password from environment variables.
type ClientOptions struct {
	BearerToken        string
	BearerTokenFile    string
	Username           string
	Password           string
	PasswordFile       string
	CAFile             string
	CertFile           string
	KeyFile            string
	ServerName         string
	InsecureSkipVerify bool
	// Headers are added to every request (e.g. X-Scope-OrgID for a
	// multi-tenant Tempo or Mimir).
	Headers map[string]string
	// Timeout bounds each request; 0 means DefaultRequestTimeout.
	Timeout time.Duration
}

// DefaultRequestTimeout bounds one HTTP request to a backend.
const DefaultRequestTimeout = 2 * time.Minute

// NewHTTPClient builds the client every backend uses: authentication and
// TLS as configured (through prometheus/common's HTTP client config, the one
// Prometheus itself uses for remote read and scraping), and errors a caller
// can tell apart: *StatusError for 401 and 403, *UnreachableError when no
// connection could be made.
func NewHTTPClient(o ClientOptions) (*http.Client, error) {
	cfg := config.DefaultHTTPClientConfig
	switch {
	case o.BearerToken != "" && o.BearerTokenFile != "":
		return nil, errors.New("a bearer token from both the environment and a file: use one")
	case o.BearerToken != "":
		cfg.Authorization = &config.Authorization{Type: "Bearer", Credentials: config.Secret(o.BearerToken)}
	case o.BearerTokenFile != "":
		cfg.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: o.BearerTokenFile}
	}
	if o.Username != "" || o.Password != "" || o.PasswordFile != "" {
		if cfg.Authorization != nil {
			return nil, errors.New("both a bearer token and basic auth: use one")
		}
		if o.Username == "" {
			return nil, errors.New("a basic auth password without a user name")
		}
		if o.Password != "" && o.PasswordFile != "" {
			return nil, errors.New("a basic auth password from both the environment and a file: use one")
		}
		cfg.BasicAuth = &config.BasicAuth{Username: o.Username, Password: config.Secret(o.Password), PasswordFile: o.PasswordFile}
	}
	cfg.TLSConfig = config.TLSConfig{
		CAFile:             o.CAFile,
		CertFile:           o.CertFile,
		KeyFile:            o.KeyFile,
		ServerName:         o.ServerName,
		InsecureSkipVerify: o.InsecureSkipVerify,
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rt, err := config.NewRoundTripperFromConfig(cfg, "doubletake-audit")
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	return &http.Client{
		Transport: &checkedTransport{next: rt, headers: o.Headers},
		Timeout:   timeout,
	}, nil
}

// StatusError is an HTTP answer that says the request was not allowed.
type StatusError struct {
	Method, URL string
	Code        int
	Body        string // the start of the body
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Code, http.StatusText(e.Code))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// UnreachableError says no answer came from a backend.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// checkedTransport adds headers and turns 401/403 answers and failed
// connections into typed errors.
type checkedTransport struct {
	next    http.RoundTripper
	headers map[string]string
}

func (t *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	u := redactURL(req)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &UnreachableError{URL: u, Err: fmt.Errorf("no answer in time: %w", err)}
		}
		return nil, &UnreachableError{URL: u, Err: err}
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &StatusError{Method: req.Method, URL: u, Code: resp.StatusCode, Body: oneLine(string(b))}
	}
	return resp, nil
}

// redactURL is the request's URL without credentials or query.
func redactURL(req *http.Request) string {
	u := *req.URL
	u.User = nil
	u.RawQuery = ""
	return u.String()
}

// oneLine trims s to one short line for an error message.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
