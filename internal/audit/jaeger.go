package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// maxResponseBytes bounds one answer read from a trace backend.
const maxResponseBytes = 512 << 20

// Jaeger reads stored spans from Jaeger's query service through its api/v3
// HTTP endpoints (tested with Jaeger v2.13.0, Go module v1.76.0).
//
// Jaeger's query service runs adjusters over every trace it answers with
// (cmd/query/app/querysvc/v2/adjuster.StandardAdjusters): among them
// DeduplicateSpans, which drops every span whose resource, scope and span
// serialise to the same bytes as one already seen, and
// DeduplicateClientServerSpanIDs, which gives a server span sharing its id
// with a client span a new id. Either hides exactly what an audit looks
// for. The api/v3 find endpoint takes query.raw_traces=true, which makes
// the query service skip the adjusters (and the aggregation of a trace's
// chunks): the answer is the spans as the storage backend returns them.
// (The parameter reaches the v2 query service since v1.65.0 / v2.2.0.)
//
// In v2.13.0 the adjusters modify the trace in place, and the memory
// storage hands out the trace it holds: once a trace has been read through
// the default API, its copies are gone from memory storage too.
type Jaeger struct {
	base   string
	client *http.Client
}

// NewJaeger reads from the Jaeger query service at base (e.g.
// http://jaeger:16686, with its --query.base-path if it has one).
func NewJaeger(base string, client *http.Client) *Jaeger {
	return &Jaeger{base: strings.TrimRight(base, "/"), client: client}
}

// Name implements TraceSource.
func (*Jaeger) Name() string { return "jaeger" }

// Read implements TraceSource.
func (*Jaeger) Read() string {
	return "Jaeger api/v3 GET /api/v3/traces with query.raw_traces=true: spans as stored, before the query service's adjusters (DeduplicateSpans would drop identical copies)"
}

// Resolution implements TraceSource: api/v3 takes RFC 3339 times with
// nanoseconds; a microsecond is as fine as span start times usually are.
func (*Jaeger) Resolution() time.Duration { return time.Microsecond }

// Services implements TraceSource.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	body, status, err := j.get(ctx, "/api/v3/services", nil)
	if err != nil {
		if status == http.StatusNotFound {
			return nil, fmt.Errorf("%w (is it the query service's URL, with its base path? api/v3 is needed)", err)
		}
		return nil, err
	}
	var resp struct {
		Services []string `json:"services"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("%w: /api/v3/services: %w", ErrMalformed, err)
	}
	if resp.Services == nil {
		resp.Services = []string{}
	}
	return resp.Services, nil
}

// Find implements TraceSource.
func (j *Jaeger) Find(ctx context.Context, q TraceQuery) (ptrace.Traces, int, error) {
	v := url.Values{}
	v.Set("query.service_name", q.Service)
	v.Set("query.start_time_min", q.Start.UTC().Format(time.RFC3339Nano))
	v.Set("query.start_time_max", q.End.UTC().Format(time.RFC3339Nano))
	v.Set("query.num_traces", strconv.Itoa(q.Limit))
	v.Set("query.raw_traces", "true")
	body, status, err := j.get(ctx, "/api/v3/traces", v)
	if err != nil {
		if status == http.StatusNotFound && bytes.Contains(body, []byte("No traces found")) {
			return ptrace.NewTraces(), 0, nil
		}
		return ptrace.Traces{}, 0, err
	}
	td, err := decodeJaegerTraces(body)
	if err != nil {
		return ptrace.Traces{}, 0, err
	}
	return td, countTraces(td), nil
}

// decodeJaegerTraces decodes an api/v3 answer: {"result": <OTLP-JSON
// TracesData>} or {"error": {...}}.
func decodeJaegerTraces(body []byte) (ptrace.Traces, error) {
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			HTTPCode int    `json:"httpCode"`
			Message  string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: /api/v3/traces: %w", ErrMalformed, err)
	}
	if env.Error != nil {
		return ptrace.Traces{}, fmt.Errorf("/api/v3/traces: %d %s", env.Error.HTTPCode, env.Error.Message)
	}
	if len(env.Result) == 0 || string(env.Result) == "null" {
		return ptrace.Traces{}, fmt.Errorf("%w: /api/v3/traces: no result", ErrMalformed)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(env.Result)
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: /api/v3/traces: %w", ErrMalformed, err)
	}
	return td, nil
}

// get fetches base+path?query and returns the body of a 2xx answer; for
// other answers it returns the body, the status and an error.
func (j *Jaeger) get(ctx context.Context, path string, query url.Values) ([]byte, int, error) {
	a, err := httpGet(ctx, j.client, j.base+path, query, "application/json")
	return a.body, a.status, err
}

// answer is what httpGet read.
type answer struct {
	body        []byte
	status      int
	contentType string
}

// httpGet is a GET that reads at most maxResponseBytes and turns non-2xx
// answers into errors that quote the body.
func httpGet(ctx context.Context, client *http.Client, rawURL string, query url.Values, accept string) (answer, error) {
	if len(query) > 0 {
		rawURL += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return answer{}, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, unwrapURLError(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return a, &UnreachableError{URL: redactURL(req), Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if len(a.body) > maxResponseBytes {
		return a, fmt.Errorf("%s: answer larger than %d MiB: lower --limit", redactURL(req), maxResponseBytes>>20)
	}
	if resp.StatusCode/100 != 2 {
		return a, fmt.Errorf("%s: %s: %s", redactURL(req), resp.Status, oneLine(string(a.body)))
	}
	return a, nil
}

// unwrapURLError drops net/http's *url.Error wrapper around our typed
// errors, whose messages already name the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	var se *StatusError
	var re *UnreachableError
	if errors.As(ue.Err, &se) || errors.As(ue.Err, &re) {
		return ue.Err
	}
	if ue.Timeout() {
		u, _ := url.Parse(ue.URL)
		if u != nil {
			u.RawQuery = ""
			return &UnreachableError{URL: u.String(), Err: fmt.Errorf("no answer in time: %w", ue.Err)}
		}
	}
	return err
}
