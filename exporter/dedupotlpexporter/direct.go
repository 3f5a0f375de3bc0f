package dedupotlpexporter

import (
	"context"

	"go.opentelemetry.io/collector/consumer/consumererror"
)

// maxDirectCalls bounds the requests one direct send merges (their
// encoded size is bounded by max_request_bytes) and the requests that wait
// for direct sends: past it a request goes to the queue.
const maxDirectCalls = 1024

// sized is a request with its encoded size, which bounds a direct group.
type sized[T any] struct {
	data T
	size int
}

// queueEmpty says whether the sending queue holds nothing, neither
// waiting nor being exported: only then may a request overtake it. A
// queue whose size cannot be read counts as not empty.
func (up *upstream) queueEmpty() bool {
	if !up.queue.readable() {
		return false
	}
	size, _ := up.queue.read()
	return size == 0
}

// forwardGroup sends the requests of one direct group as one.
func (w *wrapped[T]) forwardGroup(ctx context.Context, first sized[T], rest []sized[T]) error {
	for _, r := range rest {
		w.sig.ops.moveTo(r.data, first.data)
	}
	return w.forward(ctx, first.data)
}

// forward sends data straight to the upstream, through the same send as
// the queue's (split around permanent refusals, the refused items handed
// back to dedup), and returns once the upstream has answered. What the
// upstream did not take in time, or refused with a retryable error, goes
// to the queue, and so does everything once the queue holds anything
// (a group that waited behind a direct send that failed). The callers'
// contexts only carry values here: once merged, a request is answered
// with its group.
func (w *wrapped[T]) forward(ctx context.Context, data T) error {
	ctx = context.WithoutCancel(ctx)
	if !w.up.queueEmpty() {
		return w.enqueue(ctx, data)
	}
	sctx, cancel := context.WithTimeout(ctx, w.up.cfg.Direct.Timeout)
	err := w.push(sctx, data)
	cancel()
	if err == nil || consumererror.IsPermanent(err) {
		// Delivered; or what the upstream refused for good was handed
		// back to dedup (counted, logged) and the rest delivered.
		return nil
	}
	return w.enqueue(ctx, data)
}
