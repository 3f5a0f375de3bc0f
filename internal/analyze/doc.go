// Package analyze finds telemetry that arrived more than once: duplicate
// spans and log records, metric streams with more than one writer, the
// counter resets Prometheus would compute on them, and nested duplicates
// (one operation recorded as two spans with different ids, one inside the
// other: double instrumentation). It gives every finding one line of
// diagnosis: two exporters in one process, a re-sent batch, an identity
// collision, or a nested duplicate (internal/nested's diagnosis, naming
// both instrumentation scopes).
//
// It is shared by `doubletake verify` (fed by the in-process receiver in
// internal/capture) and `doubletake audit`: feed an Analyzer the captured
// requests in arrival order with AddTraces, AddMetrics and AddLogs, each
// with its Arrival (sequence, time, connection), then call Report. The
// Analyzer keeps a compact index of what it saw (about 120 bytes per span id),
// never the pdata, so requests can be released as soon as they are added.
// Nested duplicates come from an internal/nested Detector fed every traces
// request in arrival order; it holds at most Options.Nested.MaxSpans spans
// and reports what it had to forget (NestedReport.Stats.Evicted).
//
// Metric stream identity, writer election and the resets() rule are not
// implemented here: they come from internal/streams, the same code the
// gateway's processor runs, so verify reports exactly what the gateway
// would drop.
//
// WriteText, WriteJUnit and JUnitCases render a Report; it also marshals
// to JSON as it is.
package analyze
