package dedupprocessor

import (
	"sort"
	"sync"

	"go.opentelemetry.io/collector/component"

	"github.com/doubletake/doubletake/internal/dedupcontract"
	"github.com/doubletake/doubletake/internal/upstreamhealth"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// QueueDepth reads a sending queue now: what it holds and the most it may
// hold, in the unit of its sizer.
type QueueDepth = dedupcontract.QueueDepth

// QueueStatus is one sending queue after dedup, as its exporter reports it
// and the status page shows it.
type QueueStatus = statuspage.QueueStatus

type watchedQueue struct {
	exporter, signal, sizer string
	depth                   QueueDepth
	upstream                func() upstreamhealth.Snapshot
}

// queueWatch holds the sending queues exporters report, per dedup
// processor. Its size is the number of exporters in the config.
type queueWatch struct {
	mu     sync.Mutex
	queues map[component.ID]map[*watchedQueue]struct{}
}

// watch adds a queue to those of the dedup processor id until the returned
// function is called; upstream, when not nil, reads the health of the
// exporter's upstream, shown beside the queue.
func (w *queueWatch) watch(id, exporter component.ID, signal, sizer string, depth QueueDepth, upstream func() upstreamhealth.Snapshot) (unwatch func()) {
	q := &watchedQueue{exporter: exporter.String(), signal: signal, sizer: sizer, depth: depth, upstream: upstream}
	w.mu.Lock()
	if w.queues == nil {
		w.queues = make(map[component.ID]map[*watchedQueue]struct{})
	}
	if w.queues[id] == nil {
		w.queues[id] = make(map[*watchedQueue]struct{})
	}
	w.queues[id][q] = struct{}{}
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(w.queues[id], q)
			if len(w.queues[id]) == 0 {
				delete(w.queues, id)
			}
		})
	}
}

// read reads the queues of the dedup processor id now.
func (w *queueWatch) read(id component.ID) []QueueStatus {
	w.mu.Lock()
	qs := make([]*watchedQueue, 0, len(w.queues[id]))
	for q := range w.queues[id] {
		qs = append(qs, q)
	}
	w.mu.Unlock()
	out := make([]QueueStatus, 0, len(qs))
	for _, q := range qs { // outside the lock: depth takes the queue's
		size, capacity := q.depth()
		s := QueueStatus{Exporter: q.exporter, Signal: q.signal, Sizer: q.sizer, Size: size, Capacity: capacity}
		if capacity > 0 {
			s.Fill = float64(size) / float64(capacity)
		}
		if q.upstream != nil {
			u := q.upstream()
			s.Upstream = &u
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Exporter != out[j].Exporter {
			return out[i].Exporter < out[j].Exporter
		}
		return out[i].Signal < out[j].Signal
	})
	return out
}
