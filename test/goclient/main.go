// Command goclient is doubletake's end-to-end test program built on the
// OpenTelemetry Go SDK. It reproduces the setups that export telemetry twice
// (two BatchSpanProcessors on one TracerProvider, a second MeterProvider for
// the same instruments that starts later with fresh state, two log
// processors on one LoggerProvider), runs a fixed workload, shuts every
// provider down (which flushes), prints one JSON summary line on stdout and
// exits.
//
// The exporters take their endpoint from the environment as any SDK user's
// would: OTEL_EXPORTER_OTLP_ENDPOINT (and the per-signal variables, if set).
// OTEL_EXPORTER_OTLP_PROTOCOL picks the exporter: grpc or http/protobuf
// (default, as the specification says).
//
// Flags (each defaults to an environment variable):
//
//	-mode      GOCLIENT_MODE      comma-separated: at most one of traces-single,
//	                              traces-double; one of metrics-single,
//	                              metrics-double, metrics-restart; one of
//	                              logs-single, logs-double;
//	                              or "malformed" alone (POST a body that is not
//	                              OTLP to <endpoint>/v1/traces and report the status).
//	                              Default traces-single,metrics-single.
//	-rollouts  GOCLIENT_ROLLOUTS  iterations (default 20)
//	-every     GOCLIENT_ROLLOUT   time between iterations (default 100ms)
//	-interval  GOCLIENT_INTERVAL  metric export interval (default 500ms)
//	-second    GOCLIENT_SECOND    when the second MeterProvider starts in
//	                              metrics-double, or the first is shut down
//	                              (a final flush) and a new one takes over
//	                              in metrics-restart, as after a process
//	                              restart (default 1s)
//	-hist-offset GOCLIENT_HIST_OFFSET  added to every histogram value
//	                              (default 0): large values make the float
//	                              sums of two readers differ in their last
//	                              digits
//	-batch     GOCLIENT_BATCH     BatchSpanProcessor / log BatchProcessor delay (default 200ms)
//	-service   GOCLIENT_SERVICE   service.name (default goclient)
//	-instance  GOCLIENT_INSTANCE  service.instance.id (default: not set)
//	-deadline  GOCLIENT_DEADLINE  watchdog (default rollouts*every + 60s)
//
// Each iteration i emits spans "rollout" (SERVER) -> "verify" (INTERNAL) with
// rollout.id = i, adds 1 to the counter "rollouts" (unit "1"), records the
// iteration's duration in the histogram "rollout_duration_ms" (unit "ms") and
// emits the log record "rollout <i> done"; scope doubletake-goclient 1.0.0.
//
// The summary's first_counter and first_hist_sum are the last values the
// first MeterProvider exported, as the SDK computed them.
//
// Exit status: 0 all exported; 1 an export or SDK error (printed to stderr);
// 2 bad configuration; 3 the watchdog fired.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const (
	scopeName    = "doubletake-goclient"
	scopeVersion = "1.0.0"
)

type config struct {
	traces, metrics, logs string // "", "single", "double"
	malformed             bool
	protocol              string
	rollouts              int
	every, interval       time.Duration
	second, batch         time.Duration
	service, instance     string
	deadline              time.Duration
	histOffset            float64
	// pinStart, when not zero, is the start time (Unix ns) every exported
	// cumulative point carries: processes given one share a start, as a
	// pre-fork server's workers whose SDK was set up before the fork.
	pinStart int64
	// linger is how long the process idles after its last iteration
	// before it shuts down, so that its last counts travel on its timer.
	linger time.Duration
}

type summary struct {
	Spans     int    `json:"spans"`
	Rollouts  int    `json:"rollouts"` // adds on the first MeterProvider
	Logs      int    `json:"logs"`
	Protocol  string `json:"protocol"`
	Mode      string `json:"mode"`
	Errors    int64  `json:"errors"`
	Status    int    `json:"status,omitempty"` // malformed: the HTTP status received
	Exporters int    `json:"exporters"`
	// Restarted: adds on the MeterProvider that took over (metrics-restart).
	Restarted int `json:"restarted,omitempty"`
	// FirstCounter and FirstHistSum are the last "rollouts" value and
	// "rollout_duration_ms" sum the first MeterProvider exported.
	FirstCounter int64   `json:"first_counter"`
	FirstHistSum float64 `json:"first_hist_sum"`
	// FirstStarts are the start times (Unix ns) of the "rollouts" and
	// "rollout_duration_ms" points the first MeterProvider exported last.
	FirstStarts [2]int64 `json:"first_starts"`
}

var (
	errorCount   atomic.Int64
	shuttingDown atomic.Bool
)

func reportError(where string, err error) {
	if err == nil {
		return
	}
	if shuttingDown.Load() && errors.Is(err, context.Canceled) {
		// Shutdown cancels a periodic metric export in flight and then
		// exports once more: cumulative values lose nothing.
		fmt.Fprintf(os.Stderr, "goclient: note %s: %v (canceled by shutdown)\n", where, err)
		return
	}
	errorCount.Add(1)
	fmt.Fprintf(os.Stderr, "goclient: ERROR %s: %v\n", where, err)
}

func main() {
	cfg, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "goclient: %v\n", err)
		os.Exit(2)
	}
	go func() {
		time.Sleep(cfg.deadline)
		fmt.Fprintf(os.Stderr, "goclient: ERROR watchdog: still running after %s\n", cfg.deadline)
		os.Exit(3)
	}()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { reportError("sdk", err) }))
	s, err := run(context.Background(), cfg)
	if err != nil {
		reportError("setup", err)
	}
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

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("goclient", flag.ContinueOnError)
	mode := fs.String("mode", envOr("GOCLIENT_MODE", "traces-single,metrics-single"), "what to emit")
	rollouts := fs.String("rollouts", envOr("GOCLIENT_ROLLOUTS", "20"), "iterations")
	every := fs.String("every", envOr("GOCLIENT_ROLLOUT", "100ms"), "time between iterations")
	interval := fs.String("interval", envOr("GOCLIENT_INTERVAL", "500ms"), "metric export interval")
	second := fs.String("second", envOr("GOCLIENT_SECOND", "1s"), "when the second MeterProvider starts")
	batch := fs.String("batch", envOr("GOCLIENT_BATCH", "200ms"), "batch processor delay")
	service := fs.String("service", envOr("GOCLIENT_SERVICE", "goclient"), "service.name")
	instance := fs.String("instance", envOr("GOCLIENT_INSTANCE", ""), "service.instance.id")
	deadline := fs.String("deadline", envOr("GOCLIENT_DEADLINE", ""), "watchdog")
	histOffset := fs.String("hist-offset", envOr("GOCLIENT_HIST_OFFSET", "0"), "added to every histogram value")
	pinStart := fs.Int64("pin-start", 0, "start time (Unix ns) of every exported cumulative point; 0: the SDK's")
	linger := fs.Duration("linger", 0, "idle time after the last iteration, before shutdown")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	cfg := config{service: *service, instance: *instance, pinStart: *pinStart, linger: *linger}
	if cfg.pinStart < 0 || cfg.linger < 0 {
		return cfg, fmt.Errorf("pin-start %d, linger %s: want values >= 0", cfg.pinStart, cfg.linger)
	}
	cfg.protocol = envOr("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	if cfg.protocol != "grpc" && cfg.protocol != "http/protobuf" {
		return cfg, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", cfg.protocol)
	}
	for _, m := range strings.Split(*mode, ",") {
		m = strings.TrimSpace(m)
		kind, n, _ := strings.Cut(m, "-")
		if m == "malformed" {
			cfg.malformed = true
			continue
		}
		if n != "single" && n != "double" && (n != "restart" || kind != "metrics") {
			return cfg, fmt.Errorf("mode entry %q: want traces-, metrics- or logs- followed by single or double, or metrics-restart", m)
		}
		var slot *string
		switch kind {
		case "traces":
			slot = &cfg.traces
		case "metrics":
			slot = &cfg.metrics
		case "logs":
			slot = &cfg.logs
		default:
			return cfg, fmt.Errorf("mode entry %q: unknown signal %q", m, kind)
		}
		if *slot != "" {
			return cfg, fmt.Errorf("mode %q: more than one %s entry", *mode, kind)
		}
		*slot = n
	}
	if cfg.malformed && (cfg.traces != "" || cfg.metrics != "" || cfg.logs != "") {
		return cfg, fmt.Errorf("mode %q: malformed goes alone", *mode)
	}
	var err error
	if cfg.rollouts, err = strconv.Atoi(*rollouts); err != nil || cfg.rollouts < 0 {
		return cfg, fmt.Errorf("rollouts %q: want an integer >= 0", *rollouts)
	}
	for _, d := range []struct {
		name string
		raw  string
		dst  *time.Duration
	}{{"every", *every, &cfg.every}, {"interval", *interval, &cfg.interval}, {"second", *second, &cfg.second}, {"batch", *batch, &cfg.batch}} {
		if *d.dst, err = time.ParseDuration(d.raw); err != nil || *d.dst < 0 {
			return cfg, fmt.Errorf("%s %q: want a duration >= 0", d.name, d.raw)
		}
	}
	if cfg.histOffset, err = strconv.ParseFloat(*histOffset, 64); err != nil || math.IsNaN(cfg.histOffset) || math.IsInf(cfg.histOffset, 0) {
		return cfg, fmt.Errorf("hist-offset %q: want a finite number", *histOffset)
	}
	cfg.deadline = time.Duration(cfg.rollouts)*cfg.every + time.Minute
	if *deadline != "" {
		if cfg.deadline, err = time.ParseDuration(*deadline); err != nil || cfg.deadline <= 0 {
			return cfg, fmt.Errorf("deadline %q: want a duration > 0", *deadline)
		}
	}
	return cfg, nil
}

func run(ctx context.Context, cfg config) (s summary, err error) {
	s = summary{Protocol: cfg.protocol, Mode: modeString(cfg)}
	if cfg.malformed {
		st, err := postMalformed(ctx)
		s.Status = st
		return s, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.service)}
	if cfg.instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.instance))
	}
	// One resource, shared by every provider, as in one process.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return s, err
	}

	type instruments struct {
		counter  metric.Int64Counter
		hist     metric.Float64Histogram
		shutdown func(context.Context) error
	}
	var (
		shutdowns []func(context.Context) error
		recording []instruments // the MeterProviders recording now
		first     *lastValues   // what the first MeterProvider exported
	)
	defer func() {
		shuttingDown.Store(true)
		for _, in := range recording {
			shutdowns = append(shutdowns, in.shutdown)
		}
		var wg sync.WaitGroup
		for _, f := range shutdowns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				reportError("shutdown", f(sctx))
			}()
		}
		wg.Wait()
		if first != nil {
			s.FirstCounter, s.FirstHistSum = first.values()
			s.FirstStarts = first.startTimes()
		}
	}()

	var tracer trace.Tracer
	if cfg.traces != "" {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		for range copies(cfg.traces) {
			exp, err := newTraceExporter(ctx, cfg.protocol)
			if err != nil {
				return s, err
			}
			s.Exporters++
			opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(cfg.batch)))
		}
		tp := sdktrace.NewTracerProvider(opts...)
		shutdowns = append(shutdowns, tp.Shutdown)
		tracer = tp.Tracer(scopeName, trace.WithInstrumentationVersion(scopeVersion))
	}

	newMeters := func() error {
		exp, err := newMetricExporter(ctx, cfg.protocol)
		if err != nil {
			return err
		}
		if cfg.pinStart != 0 {
			exp = pinStart{Exporter: exp, start: time.Unix(0, cfg.pinStart)}
		}
		if first == nil {
			first = &lastValues{Exporter: exp}
			exp = first
		}
		s.Exporters++
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(cfg.interval))))
		m := mp.Meter(scopeName, metric.WithInstrumentationVersion(scopeVersion))
		c, err := m.Int64Counter("rollouts", metric.WithUnit("1"), metric.WithDescription("Rollouts performed."))
		if err != nil {
			return err
		}
		h, err := m.Float64Histogram("rollout_duration_ms", metric.WithUnit("ms"), metric.WithDescription("Duration of one rollout iteration."))
		if err != nil {
			return err
		}
		recording = append(recording, instruments{c, h, mp.Shutdown})
		return nil
	}
	if cfg.metrics != "" {
		if err := newMeters(); err != nil {
			return s, err
		}
	}
	var logger otellog.Logger
	if cfg.logs != "" {
		opts := []sdklog.LoggerProviderOption{sdklog.WithResource(res)}
		for range copies(cfg.logs) {
			exp, err := newLogExporter(ctx, cfg.protocol)
			if err != nil {
				return s, err
			}
			s.Exporters++
			opts = append(opts, sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithExportInterval(cfg.batch))))
		}
		lp := sdklog.NewLoggerProvider(opts...)
		shutdowns = append(shutdowns, lp.Shutdown)
		logger = lp.Logger(scopeName, otellog.WithInstrumentationVersion(scopeVersion))
	}

	start := time.Now()
	second := false
	for i := 1; i <= cfg.rollouts; i++ {
		iter := time.Now()
		if cfg.metrics != "single" && cfg.metrics != "" && !second && time.Since(start) >= cfg.second {
			second = true
			if cfg.metrics == "restart" {
				sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err := recording[0].shutdown(sctx) // the final flush
				cancel()
				reportError("shutdown (restart)", err)
				recording = recording[:0]
			}
			if err := newMeters(); err != nil {
				return s, err
			}
		}
		if tracer != nil {
			rctx, rollout := tracer.Start(ctx, "rollout", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.Int("rollout.id", i)))
			_, verify := tracer.Start(rctx, "verify", trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithAttributes(attribute.Int("rollout.id", i)))
			time.Sleep(cfg.every / 4)
			verify.End()
			rollout.End()
			s.Spans += 2
		}
		if logger != nil {
			var rec otellog.Record
			rec.SetTimestamp(time.Now())
			rec.SetSeverity(otellog.SeverityInfo)
			rec.SetBody(attribute.StringValue(fmt.Sprintf("rollout %d done", i)))
			rec.AddAttributes(attribute.Int("rollout.id", i))
			logger.Emit(ctx, rec)
			s.Logs++
		}
		ms := float64(time.Since(iter).Microseconds())/1000 + cfg.histOffset
		for j, in := range recording {
			in.counter.Add(ctx, 1)
			in.hist.Record(ctx, ms)
			switch {
			case j == 0 && second && cfg.metrics == "restart":
				s.Restarted++
			case j == 0:
				s.Rollouts++
			}
		}
		if i < cfg.rollouts {
			time.Sleep(cfg.every - time.Since(iter))
		}
	}
	time.Sleep(cfg.linger)
	return s, nil
}

// pinStart gives every cumulative point it exports one start time.
type pinStart struct {
	sdkmetric.Exporter
	start time.Time
}

func (p pinStart) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for i := range d.DataPoints {
					d.DataPoints[i].StartTime = p.start
				}
			case metricdata.Sum[float64]:
				for i := range d.DataPoints {
					d.DataPoints[i].StartTime = p.start
				}
			case metricdata.Histogram[float64]:
				for i := range d.DataPoints {
					d.DataPoints[i].StartTime = p.start
				}
			case metricdata.Histogram[int64]:
				for i := range d.DataPoints {
					d.DataPoints[i].StartTime = p.start
				}
			}
		}
	}
	return p.Exporter.Export(ctx, rm)
}

// lastValues remembers the last "rollouts" value and "rollout_duration_ms"
// sum its exporter delivered.
type lastValues struct {
	sdkmetric.Exporter
	mu      sync.Mutex
	counter int64
	histSum float64
	starts  [2]int64 // the counter's and the histogram's, Unix ns
}

func (l *lastValues) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := l.Exporter.Export(ctx, rm); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					l.counter, l.starts[0] = p.Value, p.StartTime.UnixNano()
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					l.histSum, l.starts[1] = p.Sum, p.StartTime.UnixNano()
				}
			}
		}
	}
	return nil
}

func (l *lastValues) values() (int64, float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counter, l.histSum
}

func (l *lastValues) startTimes() [2]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starts
}

func copies(n string) []struct{} {
	if n == "double" {
		return make([]struct{}, 2)
	}
	return make([]struct{}, 1)
}

func modeString(cfg config) string {
	if cfg.malformed {
		return "malformed"
	}
	var parts []string
	for _, p := range [][2]string{{"traces", cfg.traces}, {"metrics", cfg.metrics}, {"logs", cfg.logs}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"-"+p[1])
		}
	}
	return strings.Join(parts, ",")
}

// The exporters read their endpoint, headers and TLS settings from the
// environment; nothing is passed explicitly.

func newTraceExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	if protocol == "grpc" {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

func newMetricExporter(ctx context.Context, protocol string) (sdkmetric.Exporter, error) {
	if protocol == "grpc" {
		return otlpmetricgrpc.New(ctx)
	}
	return otlpmetrichttp.New(ctx)
}

func newLogExporter(ctx context.Context, protocol string) (sdklog.Exporter, error) {
	if protocol == "grpc" {
		return otlploggrpc.New(ctx)
	}
	return otlploghttp.New(ctx)
}

// postMalformed sends a body that is not OTLP and returns the HTTP status.
// A refusal (4xx) is the expected outcome and not an error.
func postMalformed(ctx context.Context) (int, error) {
	base := strings.TrimRight(envOr("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/traces", bytes.NewReader([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 4 {
		return resp.StatusCode, errors.New("a malformed request was not refused: status " + resp.Status + " " + string(body))
	}
	fmt.Fprintf(os.Stderr, "goclient: malformed request refused with %s\n", resp.Status)
	return resp.StatusCode, nil
}
