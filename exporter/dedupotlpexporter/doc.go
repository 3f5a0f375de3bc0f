//go:generate ../../scripts/generate.sh

// Package dedupotlpexporter holds the dedup_otlp_grpc and dedup_otlp_http
// exporters: the collector's otlp_grpc and otlp_http exporters, configured
// with the same keys, wrapped so that what a dedup processor recorded as
// delivered is delivered:
//
//   - their sending_queue (persistent with storage) and retry_on_failure
//     run around the inner exporter's send, so that a request the backend
//     refuses for good is seen here: a merged batch is split in halves and
//     re-sent until only the items that caused the refusal are left (a
//     permanent error affects only them), and those are handed back to the
//     dedup processor named by `dedup` (its TakeBack, found at Start through
//     the host by component ID: internal/dedupcontract), which
//     forgets them so that a re-send passes, counts them and logs the cause;
//   - a request holding an item that cannot fit into one upstream request
//     of max_request_bytes is refused whole before it is queued (gRPC
//     InvalidArgument, HTTP 400), so dedup takes its records back at once
//     and its sender learns why, instead of the queue accepting and then
//     dropping it;
//   - with a batch, it must be sized in bytes, at most max_request_bytes,
//     so that a merged batch never exceeds the upstream's receive limit;
//   - group_commit merges the requests that wait for the sending queue
//     into one queue entry.
//
// A config:
//
//	exporters:
//	  dedup_otlp_grpc:
//	    endpoint: upstream:4317
//	    dedup: dedup
//	    sending_queue: {enabled: true, storage: file_storage}
package dedupotlpexporter
