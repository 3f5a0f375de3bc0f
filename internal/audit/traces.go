package audit

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/analyze"
)

// TraceQuery selects stored traces: those of Service that started within
// [Start, End], at most Limit of them.
type TraceQuery struct {
	Service    string
	Start, End time.Time
	Limit      int
}

// TraceSource reads stored traces from a backend.
type TraceSource interface {
	// Find returns the traces q selects, as stored: without the backend's
	// query-time deduplication wherever the backend allows it. n is the
	// number of distinct traces in td.
	Find(ctx context.Context, q TraceQuery) (td ptrace.Traces, n int, err error)
	// Services lists the services the backend knows; nil (no error) when
	// it cannot tell.
	Services(ctx context.Context) ([]string, error)
	// Name is the backend's name; Read says how stored spans are read.
	Name() string
	Read() string
	// Resolution is the shortest time window a query can name.
	Resolution() time.Duration
}

// Defaults of TraceOptions.
const (
	DefaultLookback    = time.Hour
	DefaultTraceLimit  = 500
	maxTruncatedWindow = 10
)

// TraceOptions tune a trace audit.
type TraceOptions struct {
	URL      string // for the report only
	Service  string
	End      time.Time
	Lookback time.Duration
	// Limit is the most traces one request asks for; a window that returns
	// Limit traces is split in two and read again, down to MinWindow
	// (default: the source's Resolution).
	Limit     int
	MinWindow time.Duration
	Progress  io.Writer
}

func (o TraceOptions) withDefaults() TraceOptions {
	if o.End.IsZero() {
		o.End = time.Now()
	}
	if o.Lookback <= 0 {
		o.Lookback = DefaultLookback
	}
	if o.Limit <= 0 {
		o.Limit = DefaultTraceLimit
	}
	return o
}

// TraceReport is the outcome of a trace audit.
type TraceReport struct {
	Backend  string    `json:"backend"`
	URL      string    `json:"url,omitempty"`
	Service  string    `json:"service"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Read     string    `json:"read"`
	Traces   int       `json:"traces"`
	Requests int       `json:"requests"`
	// Truncated lists windows that held more traces than Limit even at
	// MinWindow: some of their traces were not read.
	Truncated []string `json:"truncated"`
	// Spans counts spans and duplicate span ids per service and span name
	// (internal/analyze, the analysis verify uses).
	Spans analyze.SpanReport `json:"spans"`
	// Nested counts nested duplicates: one operation stored as two spans
	// with different ids, one inside the other (double instrumentation;
	// internal/analyze's detector, the one verify runs).
	Nested analyze.NestedReport `json:"nested_duplicates"`
}

// Findings counts span ids stored more than once and nested duplicates.
func (r *TraceReport) Findings() int { return r.Spans.Duplicated + r.Nested.Pairs }

// AuditTraces reads the traces of one service over the lookback and counts
// duplicate span ids and nested duplicates. Windows are paged: one that
// returns Limit traces is split in halves, so no request holds more than
// Limit traces.
func AuditTraces(ctx context.Context, src TraceSource, o TraceOptions) (*TraceReport, error) {
	o = o.withDefaults()
	if o.MinWindow <= 0 {
		o.MinWindow = src.Resolution()
	}
	end := o.End
	start := end.Add(-o.Lookback)
	rep := &TraceReport{Backend: src.Name(), URL: o.URL, Service: o.Service, Start: start.UTC(), End: end.UTC(), Read: src.Read()}

	services, err := src.Services(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	if services != nil && !contains(services, o.Service) {
		return nil, fmt.Errorf("%w: %s knows no service %q (it knows %s)", ErrNoData, src.Name(), o.Service, listSome(services, 10))
	}

	// A trace backend records no arrival times or connections.
	an := analyze.New(analyze.Options{NoArrival: true})
	seen := map[pcommon.TraceID]struct{}{}
	type window struct{ from, to time.Time }
	stack := []window{{start, end}}
	for len(stack) > 0 {
		w := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		td, n, err := src.Find(ctx, TraceQuery{Service: o.Service, Start: w.from, End: w.to, Limit: o.Limit})
		rep.Requests++
		if err != nil {
			return nil, fmt.Errorf("reading traces of %s from %s to %s: %w", o.Service, w.from.UTC().Format(time.RFC3339), w.to.UTC().Format(time.RFC3339), err)
		}
		if n >= o.Limit {
			if half := w.to.Sub(w.from) / 2; half >= o.MinWindow {
				mid := w.from.Add(half)
				// Later half first out of the stack: read oldest first.
				stack = append(stack, window{mid, w.to}, window{w.from, mid})
				continue
			}
			if len(rep.Truncated) < maxTruncatedWindow {
				rep.Truncated = append(rep.Truncated, fmt.Sprintf("%s to %s: %d traces or more, %d read",
					w.from.UTC().Format(time.RFC3339Nano), w.to.UTC().Format(time.RFC3339Nano), n, n))
			}
		}
		fresh := dropSeen(td, seen)
		rep.Traces += fresh
		an.AddTraces(analyze.Arrival{Seq: uint64(rep.Requests)}, td)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "doubletake audit: progress: %d traces read in %d requests, %d windows left\n", rep.Traces, rep.Requests, len(stack))
		}
	}
	if rep.Traces == 0 {
		return nil, fmt.Errorf("%w: %s has no traces of %q between %s and %s", ErrNoData, src.Name(), o.Service,
			start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	}
	ar := an.Report()
	rep.Spans, rep.Nested = ar.Spans, ar.Nested
	return rep, nil
}

// dropSeen removes from td the spans of traces an earlier response already
// held (a trace returned by two windows is counted once), records td's
// traces as seen, and returns how many traces were new.
func dropSeen(td ptrace.Traces, seen map[pcommon.TraceID]struct{}) int {
	fresh := map[pcommon.TraceID]struct{}{}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				id := sp.TraceID()
				if _, old := seen[id]; old {
					return true
				}
				fresh[id] = struct{}{}
				return false
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	for id := range fresh {
		seen[id] = struct{}{}
	}
	return len(fresh)
}

// countTraces counts the distinct trace ids in td.
func countTraces(td ptrace.Traces) int {
	ids := map[pcommon.TraceID]struct{}{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				ids[sp.TraceID()] = struct{}{}
			}
		}
	}
	return len(ids)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func listSome(list []string, n int) string {
	if len(list) == 0 {
		return "none"
	}
	s := ""
	for i, v := range list {
		if i == n {
			return fmt.Sprintf("%s and %d more", s, len(list)-n)
		}
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", v)
	}
	return s
}
