#!/usr/bin/env node
// doubletake end-to-end test client: "an SDK nobody here wrote".
//
// Emits traces and/or metrics with the official OpenTelemetry JS SDK
// (sdk-trace-base / sdk-metrics 2.12.0, OTLP exporters 0.223.0) so the tests
// can check doubletake against the duplicate-telemetry failures that real
// SDK setups produce. It runs a fixed workload, flushes and shuts down every
// provider, prints ONE JSON summary line on stdout and exits on its own.
//
// Environment variables (empty counts as unset):
//
//   OTEL_EXPORTER_OTLP_ENDPOINT  Base OTLP endpoint, passed explicitly to every
//                                exporter. Default http://127.0.0.1:4317 for grpc,
//                                http://127.0.0.1:4318 for the http protocols.
//                                grpc uses it as is; http/* append /v1/traces and
//                                /v1/metrics (a trailing "/" is stripped first).
//   CLIENT_PROTOCOL              grpc | http/protobuf | http/json. Default grpc.
//   CLIENT_SERVICE               resource service.name. Default jsclient.
//   CLIENT_INSTANCE              resource service.instance.id; not set at all
//                                when empty/unset.
//   CLIENT_MODE                  comma-separated, at most one traces-* and one
//                                metrics-* entry. Default traces-single,metrics-single.
//     traces-single   one TracerProvider, one BatchSpanProcessor, one OTLP exporter.
//     traces-double   one TracerProvider with TWO BatchSpanProcessors, each with its
//                     own OTLP exporter to the same endpoint: every span is exported
//                     twice (the FastAPI 0.142 failure).
//     metrics-single  one MeterProvider, one PeriodicExportingMetricReader
//                     (cumulative temporality; delta when
//                     OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta).
//     metrics-double  a second, independent pipeline for the same instruments joins
//                     CLIENT_SECOND_DELAY_MS later with fresh aggregation state (see
//                     the comment at startSecondMetricsPipeline below).
//     metrics-restart one pipeline; after CLIENT_SECOND_DELAY_MS it is shut down
//                     (final flush) and a new MeterProvider takes over, as after a
//                     process restart: the counter starts again from 0 with a new
//                     start time.
//   CLIENT_METRIC_INTERVAL_MS    metric export interval. Default 1000.
//   CLIENT_SECOND_DELAY_MS       ms after the workload starts when the second metrics
//                                pipeline starts (double) or the restart happens
//                                (restart). Checked before each iteration. Default 2500.
//   CLIENT_HIST_OFFSET           number added to every histogram value. Default 0.
//                                Large values make the float sums of two readers
//                                differ in their last digits.
//   CLIENT_START_AT_MS           Unix ms at which the SDK is set up and the workload
//                                starts (processes started together given distinct
//                                ones make their first measurements in distinct
//                                milliseconds). Default: at once.
//   CLIENT_ROLLOUTS              number of workload iterations. Default 20.
//   CLIENT_ROLLOUT_MS            ms between the starts of two iterations. Default 200.
//   CLIENT_EXPORT_TIMEOUT_MS     per-export timeout of every OTLP exporter. Default 5000.
//                                (A metric reader's own timeout is min(this, interval).)
//   CLIENT_SPAN_DELAY_MS         BatchSpanProcessor scheduled delay. Default 500.
//   CLIENT_DEADLINE_MS           watchdog: exit 3 if still running after this many ms.
//                                Default rollouts*rollout_ms + 60000.
//   CLIENT_VERBOSE               "1": progress notes on stderr.
//
// Workload, per iteration i = 1..CLIENT_ROLLOUTS: span "rollout" (SERVER) with a
// child span "verify" (INTERNAL), both with attribute rollout.id = i (int); the
// counter "rollouts" (unit "1", add 1 -- named without _total so a Prometheus
// translation gives rollouts_total, not rollouts_total_total) and the histogram
// "rollout_duration_ms" (unit "ms", the iteration's duration). Meter/tracer scope:
// doubletake-jsclient 1.0.0. Metric points carry no attributes.
//
// Output: one JSON line on stdout, e.g.
//   {"spans":40,"rollouts":20,"metricNames":["rollouts","rollout_duration_ms"],
//    "protocol":"grpc","mode":"traces-single,metrics-single", ...details...}
//   spans    = spans created (2 per iteration when a traces mode is on, else 0);
//   rollouts = counter adds on the FIRST metrics pipeline (in metrics-restart that
//              is the pre-restart provider only; 0 without a metrics mode);
//   details: iterations, tracePipelines[] and metricPipelines[] with per-exporter
//   counts, the last exported "rollouts" point (value, start/time in unix ns) and
//   the last exported "rollout_duration_ms" sum and start time in unix ns
//   (lastHistogramSum, lastHistogramStart).
//
// Exit status: 0 all good; 1 any export failure / SDK error (printed to stderr as
// "jsclient: ERROR ...", including failures while flushing at shutdown); 2 bad
// configuration; 3 watchdog deadline hit.

import { performance } from 'node:perf_hooks';
import { format } from 'node:util';

import { context, diag, DiagLogLevel, SpanKind, trace } from '@opentelemetry/api';
import { ExportResultCode, setGlobalErrorHandler } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { ATTR_SERVICE_INSTANCE_ID, ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPMetricExporter as GrpcMetricExporter } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPMetricExporter as ProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import {
  AggregationTemporalityPreference,
  OTLPMetricExporter as JsonMetricExporter,
} from '@opentelemetry/exporter-metrics-otlp-http';

const SCOPE_NAME = 'doubletake-jsclient';
const SCOPE_VERSION = '1.0.0';
const COUNTER_NAME = 'rollouts';
const HISTOGRAM_NAME = 'rollout_duration_ms';

// ---------------------------------------------------------------- config ---

function fail(code, msg) {
  process.stderr.write(`jsclient: ${msg}\n`);
  process.exit(code);
}

function envStr(name, def) {
  const v = process.env[name];
  return v === undefined || v.trim() === '' ? def : v.trim();
}

function envInt(name, def, min) {
  const raw = envStr(name, undefined);
  if (raw === undefined) return def;
  if (!/^\d+$/.test(raw) || Number(raw) < min) {
    fail(2, `invalid ${name}=${JSON.stringify(raw)} (want an integer >= ${min})`);
  }
  return Number(raw);
}

const PROTOCOLS = ['grpc', 'http/protobuf', 'http/json'];
const protocol = envStr('CLIENT_PROTOCOL', 'grpc');
if (!PROTOCOLS.includes(protocol)) {
  fail(2, `invalid CLIENT_PROTOCOL=${JSON.stringify(protocol)} (want one of ${PROTOCOLS.join(', ')})`);
}
const endpoint = envStr(
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  protocol === 'grpc' ? 'http://127.0.0.1:4317' : 'http://127.0.0.1:4318',
).replace(/\/+$/, '');
const serviceName = envStr('CLIENT_SERVICE', 'jsclient');
const serviceInstance = envStr('CLIENT_INSTANCE', undefined);

const MODES = ['traces-single', 'traces-double', 'metrics-single', 'metrics-double', 'metrics-restart'];
const modeStr = envStr('CLIENT_MODE', 'traces-single,metrics-single');
const modes = modeStr.split(',').map((m) => m.trim()).filter((m) => m !== '');
for (const m of modes) {
  if (!MODES.includes(m)) fail(2, `invalid CLIENT_MODE entry ${JSON.stringify(m)} (want ${MODES.join(', ')})`);
}
const traceModes = modes.filter((m) => m.startsWith('traces-'));
const metricModes = modes.filter((m) => m.startsWith('metrics-'));
if (modes.length === 0 || traceModes.length > 1 || metricModes.length > 1) {
  fail(2, `invalid CLIENT_MODE=${JSON.stringify(modeStr)} (need at least one entry, at most one traces-* and one metrics-*)`);
}
const traceMode = traceModes[0];
const metricMode = metricModes[0];

const metricIntervalMs = envInt('CLIENT_METRIC_INTERVAL_MS', 1000, 1);
const secondDelayMs = envInt('CLIENT_SECOND_DELAY_MS', 2500, 0);
const rolloutCount = envInt('CLIENT_ROLLOUTS', 20, 0);
const rolloutMs = envInt('CLIENT_ROLLOUT_MS', 200, 0);
const startAtMs = envInt('CLIENT_START_AT_MS', 0, 0);
const exportTimeoutMs = envInt('CLIENT_EXPORT_TIMEOUT_MS', 5000, 1);
const spanDelayMs = envInt('CLIENT_SPAN_DELAY_MS', 500, 1);
const deadlineMs = envInt('CLIENT_DEADLINE_MS', rolloutCount * rolloutMs + 60000, 1);
const verbose = envStr('CLIENT_VERBOSE', '') === '1';
const histOffsetRaw = envStr('CLIENT_HIST_OFFSET', '0');
const histOffset = Number(histOffsetRaw);
if (!Number.isFinite(histOffset)) {
  fail(2, `invalid CLIENT_HIST_OFFSET=${JSON.stringify(histOffsetRaw)} (want a finite number)`);
}

function note(msg) {
  if (verbose) process.stderr.write(`jsclient: ${msg}\n`);
}

// Wait for CLIENT_START_AT_MS before any SDK part exists: the metric readers'
// export timers start with the workload, as in a process that starts then.
if (startAtMs > Date.now()) {
  await new Promise((resolve) => setTimeout(resolve, startAtMs - Date.now()));
}

// ------------------------------------------------------- error tracking ---

let errorCount = 0;
// A periodic metric export that times out is not lost: the readers here are
// cumulative, so the next export carries the same points again, and a test
// that needs them fails on what arrives. On a loaded machine the reader's
// timeout (clamped to its interval) can pass while the gateway is still
// answering, so such a timeout is counted and printed, not fatal.
let exportTimeouts = 0;

function reportError(where, err) {
  errorCount++;
  process.exitCode = 1;
  const describe = (e) => (e instanceof Error ? `${e.name}: ${e.message}` : format('%s', e));
  const msg = Array.isArray(err) ? err.map(describe).join('; ') : describe(err);
  process.stderr.write(`jsclient: ERROR ${where}: ${msg}\n`);
}

// Errors the SDK does not surface through a promise (periodic metric export,
// scheduled span batches) end up in the global error handler.
setGlobalErrorHandler((err) => reportError('sdk', err));
// The SDK and exporters also log through diag; treat diag.error as an error
// (e.g. "metrics export timed out"), print warnings, drop the rest.
diag.setLogger(
  {
    error: (...args) => {
      const msg = format(...args);
      if (/PeriodicExportingMetricReader: metrics export timed out/.test(msg)) {
        exportTimeouts++;
        process.stderr.write(`jsclient: WARN diag: ${msg}\n`);
        return;
      }
      reportError('diag', msg);
    },
    warn: (...args) => process.stderr.write(`jsclient: WARN diag: ${format(...args)}\n`),
    info: () => {},
    debug: () => {},
    verbose: () => {},
  },
  { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
);

process.on('unhandledRejection', (err) => reportError('unhandled rejection', err));
process.on('uncaughtException', (err) => {
  reportError('uncaught exception', err);
  process.exit(1);
});

const watchdog = setTimeout(() => {
  process.stderr.write(`jsclient: ERROR watchdog: still running after ${deadlineMs}ms, giving up\n`);
  process.exit(3);
}, deadlineMs);
watchdog.unref();

// ------------------------------------------------------------- exporters ---

function hrToNanos(hr) {
  return (BigInt(hr[0]) * 1000000000n + BigInt(hr[1])).toString();
}

// Wraps exporter.export so every export result is counted and every failure is
// reported (the exporter itself is otherwise untouched).
function watchExporter(exporter, stats, countItems) {
  const original = exporter.export.bind(exporter);
  exporter.export = (items, resultCallback) => {
    stats.exports++;
    original(items, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        stats.succeeded++;
        countItems(items, stats);
      } else {
        stats.failed++;
        reportError(`${stats.label} export to ${stats.url}`, result.error ?? 'export failed');
      }
      resultCallback(result);
    });
  };
  return exporter;
}

function signalUrl(path) {
  return protocol === 'grpc' ? endpoint : `${endpoint}${path}`;
}

function newTraceExporter(label) {
  const url = signalUrl('/v1/traces');
  const opts = { url, timeoutMillis: exportTimeoutMs };
  const exporter =
    protocol === 'grpc'
      ? new GrpcTraceExporter(opts)
      : protocol === 'http/protobuf'
        ? new ProtoTraceExporter(opts)
        : new JsonTraceExporter(opts);
  const stats = { label, url, exports: 0, succeeded: 0, failed: 0, spansExported: 0 };
  watchExporter(exporter, stats, (spans, s) => {
    s.spansExported += spans.length;
  });
  return { exporter, stats };
}

function newMetricExporter(label) {
  const url = signalUrl('/v1/metrics');
  const opts = {
    url,
    timeoutMillis: exportTimeoutMs,
    // Cumulative unless the standard variable asks for delta (as the
    // vendors' guides do): the e2e delta cases set it.
    temporalityPreference:
      (process.env.OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE || '').toLowerCase() === 'delta'
        ? AggregationTemporalityPreference.DELTA
        : AggregationTemporalityPreference.CUMULATIVE,
  };
  const exporter =
    protocol === 'grpc'
      ? new GrpcMetricExporter(opts)
      : protocol === 'http/protobuf'
        ? new ProtoMetricExporter(opts)
        : new JsonMetricExporter(opts);
  const stats = { label, url, exports: 0, succeeded: 0, failed: 0, lastCounter: null, lastHistogramSum: null, lastHistogramStart: null };
  watchExporter(exporter, stats, (resourceMetrics, s) => {
    for (const sm of resourceMetrics.scopeMetrics) {
      for (const md of sm.metrics) {
        if (md.descriptor.name === HISTOGRAM_NAME) {
          for (const dp of md.dataPoints) {
            s.lastHistogramSum = dp.value.sum;
            s.lastHistogramStart = hrToNanos(dp.startTime);
          }
          continue;
        }
        if (md.descriptor.name !== COUNTER_NAME) continue;
        for (const dp of md.dataPoints) {
          s.lastCounter = {
            value: dp.value,
            startTimeUnixNano: hrToNanos(dp.startTime),
            timeUnixNano: hrToNanos(dp.endTime),
          };
        }
      }
    }
  });
  return { exporter, stats };
}

// -------------------------------------------------------------- resource ---

// One resource object, shared by every provider (in particular by both
// MeterProviders of metrics-double / metrics-restart).
const resourceAttrs = { [ATTR_SERVICE_NAME]: serviceName };
if (serviceInstance !== undefined) resourceAttrs[ATTR_SERVICE_INSTANCE_ID] = serviceInstance;
const resource = defaultResource().merge(resourceFromAttributes(resourceAttrs));

// ---------------------------------------------------------------- traces ---

const tracePipelines = [];
let tracerProvider;
let tracer;
if (traceMode !== undefined) {
  const n = traceMode === 'traces-double' ? 2 : 1;
  const processors = [];
  for (let i = 1; i <= n; i++) {
    const { exporter, stats } = newTraceExporter(`traces#${i}`);
    tracePipelines.push(stats);
    processors.push(
      new BatchSpanProcessor(exporter, {
        scheduledDelayMillis: spanDelayMs,
        // Longer than the exporter's own timeout, so the exporter's result
        // (and its error) is what decides, not the processor giving up.
        exportTimeoutMillis: exportTimeoutMs + 1000,
      }),
    );
  }
  // sdk-trace 2.x: span processors can only be given to the constructor
  // (addSpanProcessor is gone); two processors on one provider both see
  // every ended span.
  tracerProvider = new BasicTracerProvider({
    resource,
    sampler: new AlwaysOnSampler(),
    spanProcessors: processors,
  });
  tracer = tracerProvider.getTracer(SCOPE_NAME, SCOPE_VERSION);
}

// --------------------------------------------------------------- metrics ---

const metricPipelines = [];

function newMetricsPipeline(label) {
  const { exporter, stats } = newMetricExporter(label);
  const reader = new PeriodicExportingMetricReader({
    exporter,
    exportIntervalMillis: metricIntervalMs,
    exportTimeoutMillis: Math.min(exportTimeoutMs, metricIntervalMs),
  });
  const provider = new MeterProvider({ resource, readers: [reader] });
  const meter = provider.getMeter(SCOPE_NAME, SCOPE_VERSION);
  const pipeline = {
    label,
    stats,
    provider,
    counter: meter.createCounter(COUNTER_NAME, {
      unit: '1',
      description: 'Rollouts performed.',
    }),
    histogram: meter.createHistogram(HISTOGRAM_NAME, {
      unit: 'ms',
      description: 'Duration of one rollout iteration.',
    }),
    adds: 0,
    createdAtMs: Date.now(),
    shutDown: false,
  };
  metricPipelines.push(pipeline);
  return pipeline;
}

// Pipelines that receive measurements right now.
let recording = [];
if (metricMode !== undefined) recording = [newMetricsPipeline('metrics#1')];

// metrics-double. What we reproduce: a second exporting pipeline (reader)
// attached to the same instruments LATER, with its own fresh aggregation
// state: two writers of one stream (same resource, scope, name) whose
// cumulative points have different StartTimeUnixNano and different values.
//
// How sdk-metrics 2.x behaves (read from its source, and visible in the
// lastCounter details of the output):
//  - readers can only be passed to the MeterProvider constructor
//    (`readers: [...]`); MeterProvider.addMetricReader no longer exists, so a
//    reader cannot join later;
//  - all readers of one provider share the same recorded accumulations: a
//    cumulative stream's start time is the time of its first measurement,
//    and every reader reports that same start time and the same value. Two
//    readers in one constructor would only produce exact duplicates.
// So a late reader is emulated with a SECOND MeterProvider, using the SAME
// resource object, the same meter name/version and the same instrument
// names/units/descriptions, and from then on every measurement is recorded on
// both providers' instruments -- exactly what a second reader attached to the
// same instruments would have seen. Its counter starts at 0 and its start time
// is its first measurement (i.e. about CLIENT_SECOND_DELAY_MS after the first
// provider's start time).
function startSecondMetricsPipeline() {
  recording.push(newMetricsPipeline('metrics#2'));
  note(`metrics-double: second pipeline started after ${Date.now() - workloadStart}ms`);
}

// metrics-restart: the first provider is shut down (which collects and
// exports one final time) and a fresh provider takes over, like a restarted
// process: new start time, counter from 0.
async function restartMetricsPipeline() {
  const old = recording[0];
  recording = [];
  old.shutDown = true;
  try {
    await old.provider.shutdown();
  } catch (err) {
    reportError(`${old.label} shutdown (restart)`, err);
  }
  recording = [newMetricsPipeline('metrics#2')];
  note(`metrics-restart: restarted after ${Date.now() - workloadStart}ms`);
}

// -------------------------------------------------------------- workload ---

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const verifyMs = Math.min(20, Math.floor(rolloutMs / 4));

let spansCreated = 0;
let switched = false;
const workloadStart = Date.now();
note(
  `protocol=${protocol} endpoint=${endpoint} mode=${modes.join(',')} ` +
    `metrics=${metricMode ? `${COUNTER_NAME},${HISTOGRAM_NAME}` : 'none'}`,
);

for (let i = 1; i <= rolloutCount; i++) {
  const iterStart = performance.now();

  if (!switched && metricMode !== undefined && metricMode !== 'metrics-single' &&
      Date.now() - workloadStart >= secondDelayMs) {
    switched = true;
    if (metricMode === 'metrics-double') startSecondMetricsPipeline();
    else await restartMetricsPipeline();
  }

  if (tracer !== undefined) {
    const rollout = tracer.startSpan('rollout', {
      kind: SpanKind.SERVER,
      attributes: { 'rollout.id': i },
    });
    const verify = tracer.startSpan(
      'verify',
      { kind: SpanKind.INTERNAL, attributes: { 'rollout.id': i } },
      trace.setSpan(context.active(), rollout),
    );
    spansCreated += 2;
    if (verifyMs > 0) await sleep(verifyMs);
    verify.end();
    rollout.end();
  } else if (verifyMs > 0) {
    await sleep(verifyMs);
  }

  const durationMs = performance.now() - iterStart + histOffset;
  for (const p of recording) {
    p.counter.add(1);
    p.adds++;
    p.histogram.record(durationMs);
  }

  if (i < rolloutCount) {
    const rest = rolloutMs - (performance.now() - iterStart);
    if (rest > 0) await sleep(rest);
  }
}

// -------------------------------------------------------------- shutdown ---

async function flushAndShutdown(label, provider) {
  try {
    await provider.forceFlush();
  } catch (err) {
    reportError(`${label} forceFlush`, err);
  }
  try {
    await provider.shutdown();
  } catch (err) {
    reportError(`${label} shutdown`, err);
  }
}

const closing = [];
if (tracerProvider !== undefined) closing.push(flushAndShutdown('traces', tracerProvider));
for (const p of metricPipelines) {
  if (!p.shutDown) {
    p.shutDown = true;
    closing.push(flushAndShutdown(p.label, p.provider));
  }
}
await Promise.all(closing);

const summary = {
  spans: spansCreated,
  rollouts: metricPipelines.length > 0 ? metricPipelines[0].adds : 0,
  metricNames: metricMode !== undefined ? [COUNTER_NAME, HISTOGRAM_NAME] : [],
  protocol,
  mode: modes.join(','),
  iterations: rolloutCount,
  endpoint,
  service: serviceName,
  instance: serviceInstance ?? null,
  errors: errorCount,
  exportTimeouts,
  tracePipelines: tracePipelines.map((s) => ({
    label: s.label,
    url: s.url,
    exports: s.exports,
    failed: s.failed,
    spansExported: s.spansExported,
  })),
  metricPipelines: metricPipelines.map((p) => ({
    label: p.label,
    url: p.stats.url,
    adds: p.adds,
    startedAfterMs: p.createdAtMs - workloadStart,
    exports: p.stats.exports,
    failed: p.stats.failed,
    lastCounter: p.stats.lastCounter,
    lastHistogramSum: p.stats.lastHistogramSum,
    lastHistogramStart: p.stats.lastHistogramStart,
  })),
};
process.stdout.write(`${JSON.stringify(summary)}\n`);

process.exitCode = errorCount > 0 ? 1 : 0;
// Everything is shut down; should a transport still hold a handle, do not
// let it keep the process alive.
setTimeout(() => process.exit(errorCount > 0 ? 1 : 0), 2000).unref();
