package dedupprocessor

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/streams"
)

// Metric points wait for their originals as spans and log records do
// (copies.go): a point dropped as an exact repeat of its writer's newest
// point (streams.ReasonDuplicate) while a request that changed its stream
// is still in the next consumer is set aside, its request waits for that
// one, and the point is judged again once it is settled: dropped if the
// original was accepted, passed on as new if it was refused (its changes
// taken back). The streams have no write sequence: a request in flight is
// a flight of one number, and the requests in flight are listed with
// their journals (inflight), whose stream slots say which streams they
// changed. A stream changed by a request in flight may have had its
// writer's newest point set by another request since; the copy then waits
// for a request it did not need to, never too few.

// register lists sc as in flight. Call under the unit's mu, once sc is
// judged and has changes.
func (m *metricFlights) register(sc *metricScratch) {
	f := &sc.mflight
	f.slots, f.sorted = f.slots[:0], false
	m.flights.register(&f.flight, m.next, m.next+1)
	m.next++
	m.inflight = append(m.inflight, sc)
}

// unlist takes sc off the list. Call under the unit's mu, before its
// journal is reset; then settle it.
func (m *metricFlights) unlist(sc *metricScratch) {
	if i := slices.Index(m.inflight, sc); i >= 0 {
		m.inflight = slices.Delete(m.inflight, i, i+1)
	}
}

// changed reports whether sc's journal changed the stream in slot.
func (f *metricFlight) changed(j *streams.Journal, slot uint32) bool {
	if !f.sorted {
		f.slots = j.Slots(f.slots[:0])
		slices.Sort(f.slots)
		f.sorted = true
	}
	_, ok := slices.BinarySearch(f.slots, slot)
	return ok
}

// check parks the point just judged a repeat, whose stream's change is
// the journal's n-th, when a request in flight changed that stream: its
// observation is taken back (so that the original's refusal can still
// take the original's change back), and the flights are noted. Call under
// the unit's mu.
func (p *metricPark) check(m *metricFlights, t *streams.Tracker, n int) {
	if len(m.inflight) == 0 {
		return
	}
	slot, ok := p.journal.Slot(n)
	if !ok {
		return
	}
	for _, sc := range m.inflight {
		if sc != p.self && sc.mflight.changed(&sc.journal, slot) {
			p.this = true
			if s := sc.mflight.flight.start; !slices.Contains(p.starts, s) {
				p.starts = append(p.starts, s)
			}
		}
	}
	if p.this {
		t.UndoFrom(p.journal, n)
	}
}

// add copies the point just parked into wait, under its resource and
// scope, in a metric of its own that put makes (as for a held point).
func (p *metricPark) add(j *judging, put func(m pmetric.Metric, reuse bool) (pcommon.Map, bool)) {
	p.this = false
	if p.wait == (pmetric.Metrics{}) {
		p.wait = pmetric.NewMetrics()
	}
	if p.rm == (pmetric.ResourceMetrics{}) || p.srcRM != j.rm {
		p.srcRM, p.srcSM = j.rm, pmetric.ScopeMetrics{}
		p.rm = p.wait.ResourceMetrics().AppendEmpty()
		j.rm.Resource().CopyTo(p.rm.Resource())
		p.rm.SetSchemaUrl(j.rm.SchemaUrl())
	}
	if p.srcSM != j.sm {
		p.srcSM = j.sm
		p.sm = p.rm.ScopeMetrics().AppendEmpty()
		j.sm.Scope().CopyTo(p.sm.Scope())
		p.sm.SetSchemaUrl(j.sm.SchemaUrl())
	}
	m := p.sm.Metrics().AppendEmpty()
	m.SetName(j.m.Name())
	m.SetDescription(j.m.Description())
	m.SetUnit(j.m.Unit())
	j.m.Metadata().CopyTo(m.Metadata())
	put(m, false)
}

// reset readies p for a request.
func (p *metricPark) reset(sc *metricScratch) {
	*p = metricPark{journal: &sc.journal, self: sc, starts: p.starts[:0]}
}

// parking says whether the request parked points while judged.
func (sc *metricScratch) parking() bool { return len(sc.park.starts) > 0 }

// judgeAgain marks the request as parked points judged again: they were
// counted when they arrived.
func (sc *metricScratch) judgeAgain() { sc.again = true }

// parkedCopies hands over the points parked while judging and the flights
// they wait for, and clears them from sc.
func (sc *metricScratch) parkedCopies() (pmetric.Metrics, []uint64) {
	md, starts := sc.park.wait, append([]uint64(nil), sc.park.starts...)
	sc.park.reset(sc)
	return md, starts
}

// storeSettled stores the snapshot kept back if it is settled now, and
// takes a new one: stored at once when nothing is in flight, kept back
// otherwise. Checkpoints run one at a time.
func (u *metricUnit) storeSettled(ctx context.Context, client storage.Client) error {
	p := &u.copies.pending
	u.mu.Lock()
	settled := p.ok && u.copies.refusals == p.refusals && !slices.ContainsFunc(u.copies.inflight, func(sc *metricScratch) bool {
		return slices.Contains(p.flights, sc.mflight.flight.start)
	})
	snap := u.tracker.AppendSnapshot(p.spare[:0])
	p.flights = p.flights[:0]
	for _, sc := range u.copies.inflight {
		p.flights = append(p.flights, sc.mflight.flight.start)
	}
	p.refusals = u.copies.refusals
	u.mu.Unlock()
	var store []byte
	if len(p.flights) == 0 {
		// Nothing in flight: this one is settled already.
		store, p.spare, p.ok = snap, snap, false
	} else {
		if settled {
			store = p.buf
		}
		p.buf, p.spare, p.ok = snap, p.buf, true
	}
	if store == nil {
		return nil
	}
	if err := client.Set(ctx, metricsSnapshotKey, store); err != nil {
		return fmt.Errorf("storing the metric streams: %w", err)
	}
	return nil
}
