// Package nested finds double instrumentation: one operation recorded as
// two spans with different ids, one inside the other, because two
// instrumentations (or one applied twice) are active. Id-based dedup
// cannot see these; span-metrics and latency percentiles count them twice.
//
// # The rule
//
// Within one trace and one service (resource service.name), span C
// records span P's operation a second time when all of these hold:
//
//   - Structure: C is a child of P; or both are SERVER spans with the
//     same parent (each instrumentation extracted the incoming trace
//     context, as two otelhttp handlers do when the client propagates
//     it), P being the one whose time contains C's (when each contains
//     the other within Skew, the one without a route, else the longer).
//   - Kind: the same (UNSPECIFIED reads as INTERNAL). INTERNAL inside
//     INTERNAL counts only between different scopes: one scope nesting
//     its own INTERNAL span under the same name is nearly always
//     recursion. Options.InternalInServer also admits an INTERNAL span
//     inside a SERVER span of another scope (OpenTelemetry Python starts
//     INTERNAL spans when a server span is already active). For other
//     kinds the scope may differ (two libraries) or be the same (one
//     library applied twice).
//   - Operation: the same name; or the same route (http.route, else
//     url.template) and HTTP method (http.request.method, else
//     http.method); or, for two SERVER spans of one method, one of them
//     has no route and is named by the method alone ("POST", "HTTP
//     POST"), or by the method and the request's path ("GET /items/2",
//     as OpenTelemetry Python's ASGI middleware names it) that the other
//     span's route fits ("/items/{item_id}"): a wrapper outside the
//     router never learns the route.
//   - Time: C starts no earlier than P less Options.Skew and ends no later
//     than P plus Skew, and lasts at least Options.MinCoverage of P less
//     Skew (defaults 0.9 and 1ms).
//
// Not flagged: a CLIENT span inside a SERVER span of the same name (other
// kind); a retry loop's attempts (siblings that do not contain each other,
// and non-SERVER siblings are never compared); a short child inside a long
// parent (coverage).
//
// # Detecting
//
// Detector reads a stream of batches with bounded memory (Options.MaxSpans
// held, oldest evicted and counted); parent and child may arrive in either
// order and in different batches. Findings aggregate pairs by Key
// (service, kind, outer span name, outer and inner scope) with trace and
// occurrence counts, the share of the service's spans of that kind
// affected, and a one-line Diagnosis. Detect does one batch.
//
// # Collapsing
//
// Collapse removes the inner span of each pair found within one batch,
// re-parents its children to the outer span and gives the outer span the
// attributes it lacks; State carries, between batches, where removed spans
// went (for children arriving later) and which parent ids spans already
// passed on name (so that an inner span with children in an earlier batch
// is kept rather than orphaning them). See Collapse and docs/nested.md for when
// that is and is not safe.
package nested
