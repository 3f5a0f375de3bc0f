// Package streams tells metric streams and their writers apart, following
// the OpenTelemetry metrics data model's single-writer rule: "All metric
// data streams within OTLP MUST have one logical writer."
//
// It has four parts, shared by the dedup processor, `doubletake verify` and
// `doubletake audit`:
//
//   - [Hasher] computes a stream's [ID], a 128-bit digest of exactly what the
//     data model calls a stream's identity: resource attributes; scope name,
//     version and attributes; metric name, unit, type, monotonicity and
//     temporality; point attributes. Description and start time are not
//     part of it. Attribute order is not either: attributes are sorted by key
//     before they are hashed.
//   - [Tracker] keeps bounded per-stream state and judges every point: the
//     stream's elected writer (cumulative streams: the earliest
//     StartTimeUnixNano that is alive), exact repeats, points out of order,
//     overlapping delta intervals, gauges written twice. It returns a
//     [Decision] and never touches pdata itself.
//   - [Pair] tells a stream's second writer a copy (a second metric reader
//     in one process: the first writer's values less a constant) or a peer
//     (another process with the same identity) from the values; with
//     Policy.Auto the Tracker keeps a bounded set of them, pooled per writer
//     ([Tracker.ObserveFrom], [Tracker.Judgement]), labels peers and judges
//     copies as it judges without Split. A writer that goes quiet while
//     its elected writer goes on is a peer (the quiet rule, judge.go).
//     [DeltaPair] does the same for delta writers, each a chain of
//     intervals, from their running totals. Writers that share one start
//     are split by the values that fall and their export phase
//     (shared.go, [Tracker.Shared]). [Fold] folds a stream's later
//     writers into the stream's class, for every report.
//   - [Resets] and [ResetCounter] count counter resets exactly as PromQL's
//     resets() does: any decrease between consecutive samples.
//
// Nothing here depends on collector component code; pdata is the only OTel
// dependency. Nothing is safe for concurrent use: callers hold a lock.
package streams // import "github.com/doubletake/doubletake/internal/streams"
