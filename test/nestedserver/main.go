// Command nestedserver is doubletake's test program for double
// instrumentation: one operation recorded as two spans. It runs an HTTP
// server whose handler is wrapped twice with otelhttp.NewHandler from
// opentelemetry-go-contrib (or once, the negative case), sends it real
// requests from its own client, exports every span over OTLP, flushes and
// exits, printing one JSON summary line on stdout: what was sent and
// exported, and the trace, start and end of every SERVER span exported.
//
// The exporter takes its endpoint from the environment as any SDK user's
// would: OTEL_EXPORTER_OTLP_ENDPOINT (and OTEL_EXPORTER_OTLP_TRACES_*).
// OTEL_EXPORTER_OTLP_PROTOCOL picks it: grpc or http/protobuf (default).
//
// Flags (each defaults to an environment variable):
//
//	-wrap       NESTEDSERVER_WRAP       double: the route's handler is wrapped twice
//	                                    (both spans named "POST /rollouts/{id}",
//	                                    with http.route); single: once; mux: the
//	                                    ServeMux is wrapped twice (the outer span,
//	                                    which never learns the route, is named "POST",
//	                                    the inner one "POST /rollouts/{id}").
//	                                    Default double.
//	-propagate  NESTEDSERVER_PROPAGATE  the client injects W3C trace context and the
//	                                    handlers extract it (default true). Each
//	                                    otelhttp handler extracts the incoming
//	                                    context, so with it the two server spans are
//	                                    siblings under the client span; without it
//	                                    the inner one is a child of the outer one.
//	-requests   NESTEDSERVER_REQUESTS   requests sent, one after another (default 10)
//	-flush      NESTEDSERVER_FLUSH      when spans are exported: end (once, at
//	                                    shutdown), request (after each response), or
//	                                    child (inside the handler, right after its
//	                                    child span ends, so that the child is
//	                                    exported in an earlier batch than the server
//	                                    spans; the rest at shutdown). Default end.
//	-late-child NESTEDSERVER_LATE_CHILD the handler also starts "notify rollout",
//	                                    which ends after the response (and, with
//	                                    -flush request, is exported in a later batch
//	                                    than its server span). Default false.
//	-work       NESTEDSERVER_WORK       time spent in the child span (default 20ms)
//	-service    NESTEDSERVER_SERVICE    service.name (default nestedserver)
//	-deadline   NESTEDSERVER_DEADLINE   watchdog (default 60s + 100ms a request)
//
// Each request i is POST /rollouts/{i}: a CLIENT span (otelhttp transport),
// one or two SERVER spans (otelhttp handler, scope
// go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp) and the
// handler's INTERNAL child "load rollout" (scope doubletake-nestedserver
// 1.0.0) with rollout.id = i.
//
// Exit status: 0 all exported; 1 an export, SDK or request error (printed
// to stderr); 2 bad configuration; 3 the watchdog fired.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const (
	scopeName    = "doubletake-nestedserver"
	scopeVersion = "1.0.0"
	pattern      = "POST /rollouts/{id}"
)

type config struct {
	wrap      string
	propagate bool
	requests  int
	flush     string
	lateChild bool
	work      time.Duration
	service   string
	protocol  string
	deadline  time.Duration
}

type summary struct {
	Requests  int    `json:"requests"`
	Wrap      string `json:"wrap"`
	Propagate bool   `json:"propagate"`
	Flush     string `json:"flush"`
	LateChild bool   `json:"late_child"`
	Protocol  string `json:"protocol"`
	Spans     int64  `json:"spans"`   // spans the exporter had accepted
	Exports   int64  `json:"exports"` // export calls that succeeded
	Errors    int64  `json:"errors"`
	// ServerSpans are the SERVER spans the exporter had accepted, with
	// their timing as exported: whether a request's two server spans
	// nest closely enough to count as one request recorded twice
	// depends on how long the process waited for a CPU between its two
	// wrappers, which only the spans tell.
	ServerSpans []serverSpan `json:"server_spans"`
}

// serverSpan is one exported SERVER span: its trace and its start and end
// in Unix nanoseconds.
type serverSpan struct {
	TraceID string `json:"trace_id"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
}

var errorCount atomic.Int64

func reportError(where string, err error) {
	if err == nil {
		return
	}
	errorCount.Add(1)
	fmt.Fprintf(os.Stderr, "nestedserver: ERROR %s: %v\n", where, err)
}

func main() {
	cfg, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "nestedserver: %v\n", err)
		os.Exit(2)
	}
	go func() {
		time.Sleep(cfg.deadline)
		fmt.Fprintf(os.Stderr, "nestedserver: ERROR watchdog: still running after %s\n", cfg.deadline)
		os.Exit(3)
	}()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { reportError("sdk", err) }))
	s, err := run(context.Background(), cfg)
	reportError("run", err)
	s.Errors = errorCount.Load()
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	if s.Errors > 0 {
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

func envBool(name string, def bool) (bool, error) {
	v := envOr(name, "")
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("nestedserver", flag.ContinueOnError)
	wrap := fs.String("wrap", envOr("NESTEDSERVER_WRAP", "double"), "double, single or mux")
	propEnv, err := envBool("NESTEDSERVER_PROPAGATE", true)
	if err != nil {
		return config{}, err
	}
	lateEnv, err := envBool("NESTEDSERVER_LATE_CHILD", false)
	if err != nil {
		return config{}, err
	}
	propagate := fs.Bool("propagate", propEnv, "propagate W3C trace context")
	requests := fs.String("requests", envOr("NESTEDSERVER_REQUESTS", "10"), "requests")
	flush := fs.String("flush", envOr("NESTEDSERVER_FLUSH", "end"), "end, request or child")
	late := fs.Bool("late-child", lateEnv, "a child span ending after the response")
	work := fs.String("work", envOr("NESTEDSERVER_WORK", "20ms"), "time in the child span")
	service := fs.String("service", envOr("NESTEDSERVER_SERVICE", "nestedserver"), "service.name")
	deadline := fs.String("deadline", envOr("NESTEDSERVER_DEADLINE", ""), "watchdog")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := config{wrap: *wrap, flush: *flush, service: *service, propagate: *propagate, lateChild: *late}
	switch cfg.wrap {
	case "double", "single", "mux":
	default:
		return cfg, fmt.Errorf("wrap %q: want double, single or mux", cfg.wrap)
	}
	switch cfg.flush {
	case "end", "request", "child":
	default:
		return cfg, fmt.Errorf("flush %q: want end, request or child", cfg.flush)
	}
	if cfg.requests, err = strconv.Atoi(*requests); err != nil || cfg.requests < 0 {
		return cfg, fmt.Errorf("requests %q: want an integer >= 0", *requests)
	}
	if cfg.work, err = time.ParseDuration(*work); err != nil || cfg.work < 0 {
		return cfg, fmt.Errorf("work %q: want a duration >= 0", *work)
	}
	cfg.deadline = time.Minute + time.Duration(cfg.requests)*(100*time.Millisecond+cfg.work)
	if *deadline != "" {
		if cfg.deadline, err = time.ParseDuration(*deadline); err != nil || cfg.deadline <= 0 {
			return cfg, fmt.Errorf("deadline %q: want a duration > 0", *deadline)
		}
	}
	cfg.protocol = envOr("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", envOr("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
	if cfg.protocol != "grpc" && cfg.protocol != "http/protobuf" {
		return cfg, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", cfg.protocol)
	}
	return cfg, nil
}

// countingExporter counts what its exporter accepted and keeps the timing
// of the SERVER spans among it.
type countingExporter struct {
	sdktrace.SpanExporter
	spans, exports atomic.Int64
	mu             sync.Mutex
	server         []serverSpan
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.spans.Add(int64(len(spans)))
		c.exports.Add(1)
		c.mu.Lock()
		for _, sp := range spans {
			if sp.SpanKind() == trace.SpanKindServer {
				c.server = append(c.server, serverSpan{TraceID: sp.SpanContext().TraceID().String(),
					Start: sp.StartTime().UnixNano(), End: sp.EndTime().UnixNano()})
			}
		}
		c.mu.Unlock()
	}
	return err
}

func (c *countingExporter) serverSpans() []serverSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]serverSpan{}, c.server...)
}

func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	if protocol == "grpc" {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

func run(ctx context.Context, cfg config) (s summary, err error) {
	s = summary{Wrap: cfg.wrap, Propagate: cfg.propagate, Flush: cfg.flush, LateChild: cfg.lateChild, Protocol: cfg.protocol}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", cfg.service)))
	if err != nil {
		return s, err
	}
	raw, err := newExporter(ctx, cfg.protocol)
	if err != nil {
		return s, err
	}
	exp := &countingExporter{SpanExporter: raw}
	// Only explicit flushes and shutdown export, each in one request, so
	// that what arrives in which batch is what -flush says.
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp,
			sdktrace.WithBatchTimeout(time.Hour),
			sdktrace.WithMaxQueueSize(1<<16),
			sdktrace.WithMaxExportBatchSize(1<<16)),
	)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		reportError("shutdown", tp.Shutdown(sctx))
		s.Spans, s.Exports, s.ServerSpans = exp.spans.Load(), exp.exports.Load(), exp.serverSpans()
	}()
	flush := func(ctx context.Context) {
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		reportError("flush", tp.ForceFlush(fctx))
	}
	tracer := tp.Tracer(scopeName, trace.WithInstrumentationVersion(scopeVersion))

	prop := propagation.NewCompositeTextMapPropagator()
	if cfg.propagate {
		prop = propagation.TraceContext{}
	}
	// otelhttp's default span name formatter names a server span
	// "METHOD route" once the request has matched a ServeMux pattern.
	hopts := []otelhttp.Option{otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop)}

	var late sync.WaitGroup
	release := make(chan chan struct{}, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		ctx := r.Context()
		_, child := tracer.Start(ctx, "load rollout", trace.WithAttributes(attribute.String("rollout.id", id)))
		time.Sleep(cfg.work)
		child.End()
		if cfg.flush == "child" {
			flush(ctx)
		}
		if cfg.lateChild {
			_, notify := tracer.Start(ctx, "notify rollout", trace.WithAttributes(attribute.String("rollout.id", id)))
			done := make(chan struct{})
			late.Add(1)
			go func() {
				defer late.Done()
				<-done
				notify.End()
			}()
			release <- done
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "rollout %s\n", id)
	})

	mux := http.NewServeMux()
	var root http.Handler = mux
	switch cfg.wrap {
	case "double":
		mux.Handle(pattern, otelhttp.NewHandler(otelhttp.NewHandler(handler, "inner", hopts...), "outer", hopts...))
	case "single":
		mux.Handle(pattern, otelhttp.NewHandler(handler, "server", hopts...))
	case "mux":
		mux.Handle(pattern, handler)
		root = otelhttp.NewHandler(otelhttp.NewHandler(mux, "inner", hopts...), "outer", hopts...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, err
	}
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			reportError("serve", err)
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reportError("server shutdown", srv.Shutdown(sctx))
	}()

	client := &http.Client{
		Transport: otelhttp.NewTransport(http.DefaultTransport.(*http.Transport).Clone(), hopts...),
		Timeout:   30 * time.Second,
	}
	base := "http://" + ln.Addr().String()
	for i := 1; i <= cfg.requests; i++ {
		body := strings.NewReader(fmt.Sprintf(`{"rollout":%d}`, i))
		resp, err := client.Post(fmt.Sprintf("%s/rollouts/%d", base, i), "application/json", body)
		if err != nil {
			return s, fmt.Errorf("request %d: %w", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close() // ends the client span
		if resp.StatusCode != http.StatusOK {
			return s, fmt.Errorf("request %d: status %s", i, resp.Status)
		}
		s.Requests++
		if cfg.flush == "request" {
			flush(ctx)
		}
		if cfg.lateChild {
			close(<-release)
			late.Wait()
		}
	}
	return s, nil
}
