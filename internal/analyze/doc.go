// Package analyze finds telemetry that arrived more than once: duplicate
// spans and log records, metric streams with more than one writer, and the
// counter resets Prometheus would compute on them. It gives every finding
// one line of diagnosis: two exporters in one process, a re-sent batch, or
// an identity collision.
//
// It is shared by `doubletake verify` (fed by the in-process receiver in
// internal/capture) and `doubletake audit`: feed an Analyzer the captured
// requests in arrival order with AddTraces, AddMetrics and AddLogs, each
// with its Arrival (sequence, time, connection), then call Report. The
// Analyzer keeps a compact index of what it saw (about 120 bytes per span id),
// never the pdata, so requests can be released as soon as they are added.
//
// Metric stream identity, writer election and the resets() rule are not
// implemented here: they come from internal/streams, the same code the
// gateway's processor runs, so verify reports exactly what the gateway
// would drop.
//
// WriteText, WriteJUnit and JUnitCases render a Report; it also marshals
// to JSON as it is.
package analyze
