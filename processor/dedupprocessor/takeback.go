package dedupprocessor

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// TakeBack lets a component after a dedup processor hand back items it had
// accepted (dedup then recorded them as delivered) and afterwards lost for
// good, typically an exporter whose queued request the backend refused with
// a permanent error. dedup forgets the spans' ids and the log records'
// digests, in its window and in its journal, so that a re-send passes
// instead of being dropped as a duplicate, and counts the loss in
// otelcol_processor_dedup_lost_items and logs it with its cause.
//
// A TakeBack reaches the processors of the factory it was made with, by
// component ID: NewFactoryWithTakeBack's, or the factory a component finds
// through the host (dedupcontract.Find). It is safe for concurrent use.
type TakeBack struct {
	f *factory
}

// running returns the state of the processor id while it runs.
func (t *TakeBack) running(id component.ID) (*state, error) {
	t.f.mu.Lock()
	st := t.f.states[id]
	t.f.mu.Unlock()
	if st == nil {
		return nil, fmt.Errorf("dedup processor %q is not running", id)
	}
	return st, nil
}

// Traces takes back the spans of td, lost after dedup id accepted them
// because of cause. It returns how many entries were taken back.
func (t *TakeBack) Traces(ctx context.Context, id component.ID, td ptrace.Traces, cause error) (int, error) {
	st, err := t.running(id)
	if err != nil {
		return 0, err
	}
	return takeBackLost(ctx, st, &st.traces.keyedUnit, st.traces.takeBack, td, td.SpanCount(), cause)
}

// Logs takes back the log records of ld, lost after dedup id accepted them
// because of cause. It returns how many entries were taken back.
func (t *TakeBack) Logs(ctx context.Context, id component.ID, ld plog.Logs, cause error) (int, error) {
	st, err := t.running(id)
	if err != nil {
		return 0, err
	}
	return takeBackLost(ctx, st, &st.logs.keyedUnit, st.logs.takeBack, ld, ld.LogRecordCount(), cause)
}

// takeBackLost takes back from u the entries of req (items in all) that
// take forgets (spanUnit.takeBack, logUnit.takeBack), journals that they
// were, and reports the loss.
func takeBackLost[K comparable, V, T any](ctx context.Context, st *state, u *keyedUnit[K, V], take func(T) []K, req T, items int, cause error) (int, error) {
	u.unsettled.order.Lock()
	keys := take(req)
	var err error
	if len(keys) > 0 {
		err = st.whileOpen(func() error { return u.forgetKeys(ctx, keys) })
	}
	u.unsettled.order.Unlock()
	st.reportLoss(ctx, u.window(), int64(items), len(keys), cause, err)
	return len(keys), err
}

// Metrics counts and logs the loss of md's points. The writers' elections
// are not taken back: a re-sent point is judged against them again.
func (t *TakeBack) Metrics(ctx context.Context, id component.ID, md pmetric.Metrics, cause error) error {
	st, err := t.running(id)
	if err != nil {
		return err
	}
	st.reportLoss(ctx, st.metrics.window(), int64(md.DataPointCount()), 0, cause, nil)
	return nil
}

// whileOpen runs write against the storage while it is open: under the
// state's lock, since a take back may race the processor's shutdown (the
// exporter after it shuts down last).
func (s *state) whileOpen(write func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.persist == nil {
		return nil
	}
	return write()
}

func (s *state) reportLoss(ctx context.Context, w *signalWindow, items int64, takenBack int, cause, journalErr error) {
	s.tel.lost.Add(ctx, items, w.signalOpt)
	fields := []zap.Field{
		zap.Stringer("dedup", s.id),
		zap.String("signal", w.signal),
		zap.Int64("items", items),
		zap.Int("entries_taken_back", takenBack),
		zap.NamedError("cause", cause),
	}
	if journalErr != nil {
		fields = append(fields, zap.NamedError("journal_error", journalErr))
	}
	s.logger.Error("Items lost after dedup had accepted them; their records are taken back so that a re-send passes", fields...)
}

// WatchQueue makes the status page of the dedup processor id show the
// sending queue of exporter (its signal, its sizer's unit), read by depth
// whenever the page is read, until the returned function is called. The
// exporter calls it when it starts, whether or not the processor runs yet,
// and the returned function when it shuts down.
func (t *TakeBack) WatchQueue(id, exporter component.ID, signal, sizer string, depth QueueDepth) (unwatch func()) {
	return t.watched().watch(id, exporter, signal, sizer, depth, nil)
}

// WatchUpstream is WatchQueue with the health of the exporter's upstream
// (reachable, refusing, unreachable since when, its last error and
// success) read by upstream, shown beside the queue.
func (t *TakeBack) WatchUpstream(id, exporter component.ID, signal, sizer string, depth QueueDepth, upstream func() upstreamhealth.Snapshot) (unwatch func()) {
	return t.watched().watch(id, exporter, signal, sizer, depth, upstream)
}

// Queues reads the sending queues watched for the dedup processor id,
// by exporter and signal.
func (t *TakeBack) Queues(id component.ID) []QueueStatus { return t.watched().read(id) }

// watched is where t's exporters report their sending queues: where the
// status pages of the processors t reaches read them.
func (t *TakeBack) watched() *queueWatch {
	return &t.f.queues
}
