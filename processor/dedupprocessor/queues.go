package dedupprocessor

import (
	"sort"
	"sync"

	"go.opentelemetry.io/collector/component"

	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// QueueDepth reads a sending queue now: what it holds and the most it may
// hold, in the unit of its sizer.
type QueueDepth func() (size, capacity int64)

// QueueStatus is one sending queue after dedup, as its exporter reports it.
type QueueStatus struct {
	Exporter string  `json:"exporter"`
	Signal   string  `json:"signal"`
	Sizer    string  `json:"sizer"` // bytes, items or requests
	Size     int64   `json:"size"`
	Capacity int64   `json:"capacity"`
	Fill     float64 `json:"fill"`
	// Upstream is where the exporter sends, and whether it takes what it
	// is sent (see WatchUpstream); nil for an exporter that says nothing.
	Upstream *upstreamhealth.Snapshot `json:"upstream,omitempty"`
}

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

// WatchQueue makes the status page of the dedup processor id show the
// sending queue of exporter (its signal, its sizer's unit), read by depth
// whenever the page is read, until the returned function is called. The
// exporter calls it when it starts, whether or not the processor runs yet,
// and the returned function when it shuts down.
func (t *TakeBack) WatchQueue(id, exporter component.ID, signal, sizer string, depth QueueDepth) (unwatch func()) {
	return t.WatchUpstream(id, exporter, signal, sizer, depth, nil)
}

// WatchUpstream is WatchQueue with the health of the exporter's upstream
// (reachable, refusing, unreachable since when, its last error and
// success) read by upstream, shown beside the queue.
func (t *TakeBack) WatchUpstream(id, exporter component.ID, signal, sizer string, depth QueueDepth, upstream func() upstreamhealth.Snapshot) (unwatch func()) {
	w := &t.f.queues
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

// Queues reads the sending queues watched for the dedup processor id,
// by exporter and signal.
func (t *TakeBack) Queues(id component.ID) []QueueStatus { return t.f.queues.read(id) }

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
