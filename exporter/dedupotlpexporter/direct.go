package dedupotlpexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// maxDirectCalls bounds the requests one direct send merges (their
// encoded size is bounded by max_request_bytes) and the requests that wait
// for direct sends: past it a request goes to the queue.
const maxDirectCalls = 1024

// directMin is the smallest request sent directly: the queue batcher's
// min_size in bytes, at most directMinCap. A request that size gains
// nothing from the queue; a smaller one, sent alone, pays a whole upstream
// send (gRPC, compression, a wake-up per request) for a few items, where
// the queue appends it to its storage and sends it upstream with the
// others (bench/ab.sh -matrix: 64 and 512-span requests from few senders).
// Without a batcher, or sized in items or requests, every request
// qualifies.
func directMin(q *exporterhelper.QueueBatchConfig) int {
	if !q.Batch.HasValue() || q.Batch.Get().Sizer.String() != "bytes" {
		return 0
	}
	return min(int(q.Batch.Get().MinSize), directMinCap)
}

// directMinCap is the largest direct threshold: a 1 MiB request (about
// 4,000 spans) already amortizes its upstream send (8192-span requests
// sent directly cost 0.47-0.58 of a stock collector's CPU per span). A
// batcher may gather more than that: the embedded default's min_size is
// the upstream's limit, so that while the queue holds a backlog its one
// request in flight carries as much as the upstream takes.
const directMinCap = 1 << 20

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
	w.sendingSince.Store(time.Now().UnixNano())
	defer w.sendingSince.Store(0)
	return w.forward(ctx, first.data)
}

// slow says whether the direct send under way has run longer than
// direct::slow_after: the requests that arrive now go to the queue rather
// than wait for it.
func (w *wrapped[T]) slow() bool {
	since := w.sendingSince.Load()
	return since != 0 && time.Since(time.Unix(0, since)) > w.up.cfg.Direct.SlowAfter
}

// forward sends data straight to the upstream, through the same send as
// the queue's (split around permanent refusals, the refused items handed
// back to dedup), and returns once the upstream has answered, within the
// exporter's timeout. What the upstream did not take, refused with a
// retryable error or did not answer in time, goes to the queue, and so
// does everything once the queue holds anything (a group that waited
// behind a direct send that failed). The callers' contexts only carry
// values here: once merged, a request is answered with its group.
func (w *wrapped[T]) forward(ctx context.Context, data T) error {
	ctx = context.WithoutCancel(ctx)
	if !w.up.queueEmpty() {
		return w.enqueue(ctx, data)
	}
	err := w.push(ctx, data)
	if err == nil || consumererror.IsPermanent(err) {
		// Delivered; or what the upstream refused for good was handed
		// back to dedup (counted, logged) and the rest delivered.
		return nil
	}
	return w.enqueue(ctx, data)
}
