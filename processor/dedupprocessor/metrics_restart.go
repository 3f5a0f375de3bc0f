package dedupprocessor

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/streams"
)

// Held restarts (internal/streams/restart.go): a point that looks like a
// restart of its stream's elected writer while that writer is not yet
// overdue is dropped and held twice: labelled, as any undecided second
// writer's (hold), and unlabelled here, every point in order, to be sent
// as the stream's own once its writer is elected. Those points go out at
// the front of the request that elects it (they are older than its
// points), or, when the elected writer stayed quiet and the held writer
// sent nothing more, with the first request after its failover time, or
// at shutdown (metricsProcessor.Shutdown, processors.go).

// holdRestart keeps an unlabelled copy of the point just dropped, when
// the tracker said Decision.Restart.
func (j *judging) holdRestart(put func(m pmetric.Metric, reuse bool) (pcommon.Map, bool)) {
	md, m := j.envelope()
	put(m, false)
	j.tracker.HoldRestart(j.id, j.d.Writer, md, j.sizer.MetricsSize(md))
}

// envelope is a request of the point's resource, scope and metric, without
// points: where a held point is put.
func (j *judging) envelope() (pmetric.Metrics, pmetric.Metric) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	j.rm.Resource().CopyTo(rm.Resource())
	rm.SetSchemaUrl(j.rm.SchemaUrl())
	sm := rm.ScopeMetrics().AppendEmpty()
	j.sm.Scope().CopyTo(sm.Scope())
	sm.SetSchemaUrl(j.sm.SchemaUrl())
	m := sm.Metrics().AppendEmpty()
	m.SetName(j.m.Name())
	m.SetDescription(j.m.Description())
	m.SetUnit(j.m.Unit())
	j.m.Metadata().CopyTo(m.Metadata())
	return md, m
}

// takeRestarts puts the held restart points due now at the front of rms
// (a copy of each kept in sc, to hold again if the request fails
// downstream). mu held.
func (u *metricUnit) takeRestarts(rms pmetric.ResourceMetricsSlice, sc *metricScratch, now int64) {
	var front pmetric.ResourceMetricsSlice
	u.tracker.TakeRestarts(now, false, func(h pmetric.Metrics, size int, elected bool) {
		if front == (pmetric.ResourceMetricsSlice{}) {
			front = pmetric.NewResourceMetricsSlice()
		}
		if elected { // elected now, its elected writer having stayed quiet
			sc.counts = append(sc.counts, metricCounts{svc: u.svcs.get(h.ResourceMetrics().At(0).Resource())})
			sc.counts[len(sc.counts)-1].elections[streams.ElectionRestart]++
		}
		c := pmetric.NewMetrics()
		h.CopyTo(c)
		sc.restarted = append(sc.restarted, releasedPoint{md: c, size: size})
		h.ResourceMetrics().MoveAndAppendTo(front)
	})
	if front == (pmetric.ResourceMetricsSlice{}) {
		return
	}
	rms.MoveAndAppendTo(front)
	front.MoveAndAppendTo(rms)
}
