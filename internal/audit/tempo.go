package audit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Tempo reads traces from Grafana Tempo's HTTP API: GET /api/search with a
// TraceQL query for the service's trace ids, then GET /api/traces/<id> for
// each, asking for OTLP protobuf (Tempo's Trace message is wire-compatible
// with OTLP's TracesData); a JSON answer is read too, with its trace list
// under "batches" (older releases) or "resourceSpans", and ids in hex or
// base64.
//
// UNTESTED AGAINST A REAL TEMPO: it was written from Tempo's documented API
// and tested against a fixture server built from that documentation.
//
// What an audit can see in Tempo is limited: Tempo's trace combiner (at
// query time, and when blocks are compacted) keeps the first span of each
// span id and kind across the parts of a trace it merges, so copies that
// landed in different parts are gone before any API answers; only copies
// within one part, or with a different kind, remain visible. Span metrics
// from Tempo's metrics-generator were counted before that and stay doubled.
type Tempo struct {
	base        string
	client      *http.Client
	concurrency int
}

// NewTempo reads from the Tempo query frontend (or monolithic Tempo) at
// base, e.g. http://tempo:3200.
func NewTempo(base string, client *http.Client) *Tempo {
	return &Tempo{base: strings.TrimRight(base, "/"), client: client, concurrency: 4}
}

// Name implements TraceSource.
func (*Tempo) Name() string { return "tempo" }

// Read implements TraceSource.
func (*Tempo) Read() string {
	return "Tempo GET /api/search (TraceQL resource.service.name) then GET /api/traces/<id> as OTLP protobuf; Tempo's combiner keeps one copy per span id and kind across the parts of a trace, so only copies within one part are visible (untested against a real Tempo)"
}

// Resolution implements TraceSource: search takes Unix seconds.
func (*Tempo) Resolution() time.Duration { return time.Second }

// Services implements TraceSource. It returns nil when Tempo cannot list
// them (tag values may cover recent data only).
func (t *Tempo) Services(ctx context.Context) ([]string, error) {
	a, err := httpGet(ctx, t.client, t.base+"/api/search/tag/service.name/values", nil, "application/json")
	if err != nil {
		var se *StatusError
		var ue *UnreachableError
		if errors.As(err, &se) || errors.As(err, &ue) {
			return nil, err
		}
		return nil, nil
	}
	var resp struct {
		TagValues []string `json:"tagValues"`
	}
	if json.Unmarshal(a.body, &resp) != nil || len(resp.TagValues) == 0 {
		return nil, nil
	}
	return resp.TagValues, nil
}

// Find implements TraceSource.
func (t *Tempo) Find(ctx context.Context, q TraceQuery) (ptrace.Traces, int, error) {
	v := url.Values{}
	v.Set("q", "{resource.service.name="+strconv.Quote(q.Service)+"}")
	v.Set("start", strconv.FormatInt(q.Start.Unix(), 10))
	v.Set("end", strconv.FormatInt(int64(math.Ceil(float64(q.End.UnixNano())/1e9)), 10))
	v.Set("limit", strconv.Itoa(q.Limit))
	v.Set("spss", "1")
	a, err := httpGet(ctx, t.client, t.base+"/api/search", v, "application/json")
	if err != nil {
		return ptrace.Traces{}, 0, err
	}
	ids, err := decodeTempoSearch(a.body)
	if err != nil {
		return ptrace.Traces{}, 0, err
	}

	// Fetch the traces, a few at a time, and merge them in search order.
	results := make([]ptrace.Traces, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, t.concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = t.trace(ctx, id)
		}()
	}
	wg.Wait()
	all := ptrace.NewTraces()
	for i := range ids {
		if errs[i] != nil {
			return ptrace.Traces{}, 0, errs[i]
		}
		if results[i].ResourceSpans().Len() > 0 {
			results[i].ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
		}
	}
	return all, len(ids), nil
}

// trace fetches one trace; a trace gone since the search is empty.
func (t *Tempo) trace(ctx context.Context, id string) (ptrace.Traces, error) {
	a, err := httpGet(ctx, t.client, t.base+"/api/traces/"+url.PathEscape(id), nil, "application/protobuf")
	if err != nil {
		if a.status == http.StatusNotFound {
			return ptrace.NewTraces(), nil
		}
		return ptrace.Traces{}, err
	}
	td, err := decodeTempoTrace(a.body, a.contentType)
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("/api/traces/%s: %w", id, err)
	}
	return td, nil
}

// decodeTempoSearch reads the trace ids of a search answer.
func decodeTempoSearch(body []byte) ([]string, error) {
	var resp struct {
		Traces *[]struct {
			TraceID string `json:"traceID"`
		} `json:"traces"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("%w: /api/search: %w", ErrMalformed, err)
	}
	if resp.Traces == nil {
		// An answer without "traces" is not a search result (Tempo sends
		// "traces": [] when nothing matches).
		if !bytes.Contains(body, []byte(`"traces"`)) {
			return nil, fmt.Errorf("%w: /api/search: no \"traces\" in the answer", ErrMalformed)
		}
		return nil, nil
	}
	seen := map[string]struct{}{}
	var ids []string
	for _, tr := range *resp.Traces {
		if tr.TraceID == "" {
			return nil, fmt.Errorf("%w: /api/search: a trace without traceID", ErrMalformed)
		}
		if _, dup := seen[tr.TraceID]; dup {
			continue
		}
		seen[tr.TraceID] = struct{}{}
		ids = append(ids, tr.TraceID)
	}
	return ids, nil
}

// decodeTempoTrace decodes a trace-by-id answer: OTLP protobuf, or Tempo's
// JSON.
func decodeTempoTrace(body []byte, contentType string) (ptrace.Traces, error) {
	if strings.Contains(contentType, "protobuf") {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return td, nil
	}
	return decodeTempoJSON(body)
}

// decodeTempoJSON reads Tempo's JSON trace: {"batches": [...]} or
// {"resourceSpans": [...]}, or either inside {"trace": ...} (api/v2), with
// span and trace ids in hex or base64 (gogo's JSON encoding of bytes).
func decodeTempoJSON(body []byte) (ptrace.Traces, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if inner, ok := top["trace"]; ok {
		if err := json.Unmarshal(inner, &top); err != nil {
			return ptrace.Traces{}, fmt.Errorf("%w: trace: %w", ErrMalformed, err)
		}
	}
	raw, ok := top["resourceSpans"]
	if !ok {
		raw, ok = top["batches"]
	}
	if !ok {
		if len(top) == 0 {
			return ptrace.NewTraces(), nil
		}
		return ptrace.Traces{}, fmt.Errorf("%w: neither \"batches\" nor \"resourceSpans\" in the trace", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var rs any
	if err := dec.Decode(&rs); err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := hexIDs(rs); err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	otlp, err := json.Marshal(map[string]any{"resourceSpans": rs})
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(otlp)
	if err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return td, nil
}

// idLengths are the byte lengths of the id fields.
var idLengths = map[string]int{"traceId": 16, "spanId": 8, "parentSpanId": 8}

// hexIDs rewrites base64 ids to the hex OTLP-JSON wants, in place.
func hexIDs(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := idLengths[k]; ok {
				s, isStr := e.(string)
				if !isStr {
					return fmt.Errorf("%s is not a string", k)
				}
				h, err := hexID(s, n)
				if err != nil {
					return fmt.Errorf("%s %q: %w", k, s, err)
				}
				x[k] = h
				continue
			}
			if err := hexIDs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := hexIDs(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// hexID returns s as n bytes in hex: s is hex already, or base64.
func hexID(s string, n int) (string, error) {
	if s == "" {
		return s, nil
	}
	if len(s) == 2*n {
		if _, err := hex.DecodeString(s); err == nil {
			return strings.ToLower(s), nil
		}
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != n {
		return "", fmt.Errorf("neither %d hex digits nor base64 of %d bytes", 2*n, n)
	}
	return hex.EncodeToString(b), nil
}
