package dedupprocessor

import (
	"context"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/window"
)

// sweepBase is how many stream slots every request looks at for quiet
// streams, on top of one per point it carries: a full pass over
// metrics.max_streams slots takes at most max_streams points of traffic.
const sweepBase = 64

// metricUnit is the metric signal: one writer election per stream, its
// services, and the streams with more than one writer; with storage, its
// elections are checkpointed whole.
type metricUnit struct {
	signalWindow
	tracker *streams.Tracker // guarded by mu
	hasher  *streams.Hasher  // guarded by mu
	svcs    *services        // signal "metrics": serviceStats.metrics is set
	rec     metricRecorder   // enters requests in svcs' ledgers and the stream book (metrics_telemetry.go)
	auto    bool             // metrics.overlap auto
	copies  metricFlights    // the requests in flight, that copies wait for (copies_metrics.go)

	scratch sync.Pool // *metricScratch
	bufs    sync.Pool // *[]byte, snapshots

	// store is the storage from restore to close; the checkpoint loop
	// runs in between.
	store storage.Client
}

func newMetricUnit(cfg *Config, seed window.Seed, svcs *services) (*metricUnit, error) {
	tr, err := streams.NewTracker(cfg.Metrics.policy())
	if err != nil {
		return nil, err
	}
	u := &metricUnit{
		signalWindow: *newSignalWindow("metrics", trackerSet{tr}, cfg.Metrics.MaxStale),
		tracker:      tr,
		// Keyed per process like the other windows: no client can aim a
		// collision of stream IDs.
		hasher: streams.NewHasher(metricSeed(seed)),
		svcs:   svcs,
		rec:    metricRecorder{svcs: svcs, maxStreams: cfg.Metrics.MaxStreams},
		auto:   cfg.Metrics.Overlap == OverlapAuto,
		copies: metricFlights{flights: flights{maxWaiters: cfg.Copies.MaxWaitersPerOriginal}, waitOpts: newWaitOpts("metrics")},
	}
	u.scratch.New = func() any { return &metricScratch{u: u} }
	u.bufs.New = newSegmentBuf
	return u, nil
}

// metricScratch is one request's working memory, pooled so that the steady
// state allocates nothing, and its pending change of the unit.
type metricScratch struct {
	u        *metricUnit
	journal  streams.Journal // what the request changed, to take back on failure
	counts   []metricCounts  // per resource
	released []releasedPoint // held points the request carries, to hold again on failure
	j        judging
	mflight  metricFlight // while in the next consumer (copies_metrics.go)
	park     metricPark   // the points parked while judging
	again    bool         // judging parked points again: counted when they arrived
}

// releasedPoint is a held point sent with a request (a copy of it).
type releasedPoint struct {
	id     streams.ID
	writer uint64
	md     pmetric.Metrics
	size   int
}

// judging carries one request's context into the per-point closures.
type judging struct {
	tracker   *streams.Tracker
	hasher    *streams.Hasher
	c         *metricCounts
	shape     streams.Shape
	metric    string
	now       int64
	mutate    bool // mode drop: remove and label points
	auto      bool // metrics.overlap auto: name the class in events
	origin    uint64
	splitAttr string
	named     uint64 // the writer whose WriterName is name
	sharer    uint8  // and its chain of a shared start (streams.SharerName)
	name      string
	shift     streams.Shift // the last judged point's rewrite, if shifted
	shifted   bool
	// The point being judged: its stream, decision and place, so that a
	// dropped point of an undecided writer can be held (Decision.Hold).
	id    streams.ID
	d     streams.Decision
	rm    pmetric.ResourceMetrics
	sm    pmetric.ScopeMetrics
	m     pmetric.Metric
	sizer pmetric.ProtoMarshaler
	// park and copies: a repeat of a point whose request is still in the
	// next consumer is parked (copies_metrics.go).
	park   *metricPark
	copies *metricFlights
}

// shift rewrites a Sum point of a writer elected at an interpolated
// change-over: it starts where the previous writer ended, and counts from
// there. An integer point loses the offset rounded to the nearest integer,
// the same for every point of the writer, so that its increments are kept
// exactly; no value goes below zero.
func shift(dp pmetric.NumberDataPoint, sh streams.Shift) {
	dp.SetStartTimestamp(pcommon.Timestamp(sh.Start))
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		off := math.Round(sh.Offset)
		if off >= math.MaxInt64 { // only from a value at the int64 limit
			dp.SetIntValue(0)
			return
		}
		dp.SetIntValue(max(dp.IntValue()-int64(off), 0))
	case pmetric.NumberDataPointValueTypeDouble:
		dp.SetDoubleValue(max(dp.DoubleValue()-sh.Offset, 0))
	}
}

// remove judges one point and says whether to remove it. With overlap:
// split it labels the point of a writer that was not elected.
func (j *judging) remove(attrs pcommon.Map, pt streams.Point) bool {
	id := j.hasher.Point(attrs)
	n := j.park.journal.Len()
	d := j.tracker.ObserveFrom(id, j.origin, j.shape, pt, j.now)
	j.id, j.d = id, d
	j.shift, j.shifted = d.Shift, d.Shifted
	j.c.received++
	if d.Reason != streams.ReasonNone || d.Election != streams.ElectionNone {
		set := j.c.event.set
		j.c.note(d, j.metric, attrs, j.mutate)
		if j.auto && !set && j.c.event.set {
			classify(&j.c.event, j.tracker, j.shape, id, d) // metrics_class.go
		}
	}
	switch d.Verdict {
	case streams.Drop:
		if j.mutate && d.Reason == streams.ReasonDuplicate {
			j.park.check(j.copies, j.tracker, n)
		}
		return j.mutate
	case streams.Label:
		if j.mutate {
			j.labelSharer(attrs, d.Writer, d.Sharer)
		}
	}
	return false
}

// label adds the split attribute that names writer.
func (j *judging) label(attrs pcommon.Map, writer uint64) { j.labelSharer(attrs, writer, 0) }

// labelSharer adds the split attribute that names writer, or its chain
// sharer of a shared start (metrics_class.go).
func (j *judging) labelSharer(attrs pcommon.Map, writer uint64, sharer uint8) {
	if writer != j.named || sharer != j.sharer || j.name == "" {
		j.named, j.sharer = writer, sharer // one string per run of a writer's points
		if sharer == 0 {
			j.name = streams.WriterName(writer)
		} else {
			j.name = streams.SharerName(writer, sharer)
		}
	}
	attrs.PutStr(j.splitAttr, j.name)
}

// hold keeps a copy of the point just dropped, when the tracker asked for
// it (Decision.Hold): the metric being judged with the one point that
// put copies into it, in its resource and scope, labelled as its writer's
// own series, to be sent if the writer is found a peer (streams/held.go).
// A point held for the pair already is overwritten in place: its
// resource, scope and metric are the stream's; it is sized again only
// when put says the point's lists differ in length from the one before.
func (j *judging) hold(put func(m pmetric.Metric, reuse bool) (pcommon.Map, bool)) {
	if j.park.this {
		j.park.add(j, put)
		return
	}
	if !j.d.Hold || !j.mutate {
		return
	}
	if md, size, ok := j.tracker.Held(j.id, j.d.Writer); ok {
		// The attributes are the stream's, labelled already.
		_, same := put(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0), true)
		if !same {
			size = j.sizer.MetricsSize(md)
		}
		j.tracker.Hold(j.id, j.d.Writer, md, size)
		return
	}
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
	attrs, _ := put(m, false)
	j.label(attrs, j.d.Writer)
	j.tracker.Hold(j.id, j.d.Writer, md, j.sizer.MetricsSize(md))
}

// The overwrite functions copy a newer point of a held point's stream into
// it, all but the attributes (the stream's, and labelled), and say whether
// its encoded size is the same (the lists it holds are as long).

func overwriteNumber(c, dp pmetric.NumberDataPoint) bool {
	same := c.Exemplars().Len() == dp.Exemplars().Len() && c.ValueType() == dp.ValueType() && dp.Exemplars().Len() == 0
	c.SetStartTimestamp(dp.StartTimestamp())
	c.SetTimestamp(dp.Timestamp())
	c.SetFlags(dp.Flags())
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		c.SetIntValue(dp.IntValue())
	case pmetric.NumberDataPointValueTypeDouble:
		c.SetDoubleValue(dp.DoubleValue())
	}
	dp.Exemplars().CopyTo(c.Exemplars())
	return same
}

// The merge functions add a newer delta point of a held point's chain to
// it: a delta writer's held point is every interval it was held for, from
// the first one's start to the newest one's time (a chain's intervals are
// contiguous), so a peer found later loses none of its counts.

// mergeNumber adds dp to the held delta point c. An integer held point
// that meets a double one becomes a double. It says whether the encoded
// size is the same.
func mergeNumber(c, dp pmetric.NumberDataPoint) bool {
	same := c.ValueType() == dp.ValueType() && c.Exemplars().Len() == 0
	c.SetTimestamp(dp.Timestamp())
	c.Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
	switch {
	case c.ValueType() == pmetric.NumberDataPointValueTypeInt && dp.ValueType() == pmetric.NumberDataPointValueTypeInt:
		c.SetIntValue(c.IntValue() + dp.IntValue())
	default:
		c.SetDoubleValue(numberOf(c) + numberOf(dp))
	}
	return same
}

func numberOf(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// mergeHistogram adds dp to the held delta point c when their buckets'
// bounds are the same, and says whether it did (not: the caller
// overwrites the held point, and the counts held before are lost).
func mergeHistogram(c, dp pmetric.HistogramDataPoint) bool {
	if !c.ExplicitBounds().Equal(dp.ExplicitBounds()) || c.BucketCounts().Len() != dp.BucketCounts().Len() || c.HasSum() != dp.HasSum() {
		return false
	}
	c.SetTimestamp(dp.Timestamp())
	c.Exemplars().RemoveIf(func(pmetric.Exemplar) bool { return true })
	if dp.Count() > 0 {
		if dp.HasMin() && (!c.HasMin() || c.Count() == 0 || dp.Min() < c.Min()) {
			c.SetMin(dp.Min())
		}
		if dp.HasMax() && (!c.HasMax() || c.Count() == 0 || dp.Max() > c.Max()) {
			c.SetMax(dp.Max())
		}
	}
	c.SetCount(c.Count() + dp.Count())
	if dp.HasSum() {
		c.SetSum(c.Sum() + dp.Sum())
	}
	for i := range dp.BucketCounts().Len() {
		c.BucketCounts().SetAt(i, c.BucketCounts().At(i)+dp.BucketCounts().At(i))
	}
	return true
}

func overwriteHistogram(c, dp pmetric.HistogramDataPoint) bool {
	same := c.BucketCounts().Len() == dp.BucketCounts().Len() && c.ExplicitBounds().Len() == dp.ExplicitBounds().Len() &&
		c.HasSum() == dp.HasSum() && c.HasMin() == dp.HasMin() && c.HasMax() == dp.HasMax() &&
		c.Exemplars().Len() == 0 && dp.Exemplars().Len() == 0
	c.SetStartTimestamp(dp.StartTimestamp())
	c.SetTimestamp(dp.Timestamp())
	c.SetFlags(dp.Flags())
	c.SetCount(dp.Count())
	c.RemoveSum()
	if dp.HasSum() {
		c.SetSum(dp.Sum())
	}
	c.RemoveMin()
	if dp.HasMin() {
		c.SetMin(dp.Min())
	}
	c.RemoveMax()
	if dp.HasMax() {
		c.SetMax(dp.Max())
	}
	dp.BucketCounts().CopyTo(c.BucketCounts())
	dp.ExplicitBounds().CopyTo(c.ExplicitBounds())
	dp.Exemplars().CopyTo(c.Exemplars())
	return same
}

func overwriteExponential(c, dp pmetric.ExponentialHistogramDataPoint) {
	attrs := pcommon.NewMap()
	c.Attributes().MoveTo(attrs)
	dp.CopyTo(c)
	attrs.MoveTo(c.Attributes())
}

func overwriteSummary(c, dp pmetric.SummaryDataPoint) bool {
	same := c.QuantileValues().Len() == dp.QuantileValues().Len()
	c.SetStartTimestamp(dp.StartTimestamp())
	c.SetTimestamp(dp.Timestamp())
	c.SetFlags(dp.Flags())
	c.SetCount(dp.Count())
	c.SetSum(dp.Sum())
	dp.QuantileValues().CopyTo(c.QuantileValues())
	return same
}

// pointSlice is a metric's points of one type; dataPoint is one of them.
type pointSlice[P dataPoint] interface {
	Len() int
	At(i int) P
	RemoveIf(f func(P) bool)
}

type dataPoint interface {
	Attributes() pcommon.Map
}

// pointKind is what judging needs of one point type: the point as the
// tracker reads it, how a dropped one is held (the put of judging.hold),
// and what is done to one kept (nil: nothing).
type pointKind[P dataPoint] struct {
	point func(P) streams.Point
	put   func(j *judging, dp P, m pmetric.Metric, reuse bool) (pcommon.Map, bool)
	kept  func(j *judging, dp P)
}

var (
	numberPoints      = pointKind[pmetric.NumberDataPoint]{point: streams.NumberPoint, put: putNumber, kept: shiftKept}
	histogramPoints   = pointKind[pmetric.HistogramDataPoint]{point: streams.HistogramPoint, put: putHistogram}
	exponentialPoints = pointKind[pmetric.ExponentialHistogramDataPoint]{point: streams.ExponentialHistogramPoint, put: putExponential}
	summaryPoints     = pointKind[pmetric.SummaryDataPoint]{point: streams.SummaryPoint, put: putSummary}
)

// judgePoints judges a metric's points dps of kind k and says whether any
// are left; with mutate it removes (and holds) those to be dropped.
func judgePoints[S pointSlice[P], P dataPoint](j *judging, dps S, k *pointKind[P]) bool {
	if j.mutate {
		dps.RemoveIf(func(dp P) bool {
			if !j.remove(dp.Attributes(), k.point(dp)) {
				if k.kept != nil {
					k.kept(j, dp)
				}
				return false
			}
			j.hold(func(m pmetric.Metric, reuse bool) (pcommon.Map, bool) { return k.put(j, dp, m, reuse) })
			return true
		})
		return dps.Len() > 0
	}
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		j.remove(dp.Attributes(), k.point(dp))
	}
	return true
}

// shiftKept rewrites a kept Sum point of a writer elected at an
// interpolated change-over.
func shiftKept(j *judging, dp pmetric.NumberDataPoint) {
	if j.shifted {
		shift(dp, j.shift)
	}
}

// The put functions hold a dropped point dp (judging.hold): into the held
// metric m, merged or overwritten when reuse, else as m's first point of
// its type, returning its attributes to label.

func putNumber(j *judging, dp pmetric.NumberDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse && !j.shape.Cumulative() {
		return pcommon.Map{}, mergeNumber(m.Sum().DataPoints().At(0), dp)
	}
	if reuse {
		return pcommon.Map{}, overwriteNumber(m.Sum().DataPoints().At(0), dp)
	}
	if j.m.Type() == pmetric.MetricTypeGauge { // a parked gauge point
		c := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.CopyTo(c)
		return c.Attributes(), false
	}
	sum := m.SetEmptySum()
	sum.SetAggregationTemporality(j.m.Sum().AggregationTemporality())
	sum.SetIsMonotonic(j.m.Sum().IsMonotonic())
	c := sum.DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

func putHistogram(j *judging, dp pmetric.HistogramDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse && !j.shape.Cumulative() && mergeHistogram(m.Histogram().DataPoints().At(0), dp) {
		return pcommon.Map{}, true
	}
	if reuse {
		return pcommon.Map{}, overwriteHistogram(m.Histogram().DataPoints().At(0), dp)
	}
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(j.m.Histogram().AggregationTemporality())
	c := h.DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

func putExponential(j *judging, dp pmetric.ExponentialHistogramDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse {
		overwriteExponential(m.ExponentialHistogram().DataPoints().At(0), dp)
		return pcommon.Map{}, false // its buckets vary: sized again
	}
	h := m.SetEmptyExponentialHistogram()
	h.SetAggregationTemporality(j.m.ExponentialHistogram().AggregationTemporality())
	c := h.DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

func putSummary(_ *judging, dp pmetric.SummaryDataPoint, m pmetric.Metric, reuse bool) (pcommon.Map, bool) {
	if reuse {
		return pcommon.Map{}, overwriteSummary(m.Summary().DataPoints().At(0), dp)
	}
	c := m.SetEmptySummary().DataPoints().AppendEmpty()
	dp.CopyTo(c)
	return c.Attributes(), false
}

// keepMetric judges a metric's points and says whether any are left.
// Metrics the tracker cannot judge (no data, unspecified temporality) pass
// untouched.
func (j *judging) keepMetric(m pmetric.Metric) bool {
	shape, ok := j.hasher.Metric(m)
	if !ok {
		return true
	}
	j.shape, j.metric, j.m = shape, m.Name(), m
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return judgePoints(j, m.Gauge().DataPoints(), &numberPoints)
	case pmetric.MetricTypeSum:
		return judgePoints(j, m.Sum().DataPoints(), &numberPoints)
	case pmetric.MetricTypeHistogram:
		return judgePoints(j, m.Histogram().DataPoints(), &histogramPoints)
	case pmetric.MetricTypeExponentialHistogram:
		return judgePoints(j, m.ExponentialHistogram().DataPoints(), &exponentialPoints)
	case pmetric.MetricTypeSummary:
		return judgePoints(j, m.Summary().DataPoints(), &summaryPoints)
	}
	return true
}

// begin takes a request's scratch; end gives it back.
func (u *metricUnit) begin() *metricScratch {
	sc := u.scratch.Get().(*metricScratch)
	sc.counts = sc.counts[:0]
	sc.released = sc.released[:0]
	sc.journal.Reset()
	sc.park.reset(sc)
	sc.again = false
	return sc
}

func (u *metricUnit) end(sc *metricScratch) { u.scratch.Put(sc) }

// judge judges every point of md under one lock, recording what it
// changes in sc.journal, and, with drop, removes what is to be dropped
// (and the metrics, scopes and resources left empty). It says whether
// anything is left to forward.
func (u *metricUnit) judge(md pmetric.Metrics, sc *metricScratch, drop bool, splitAttr string) bool {
	j := &sc.j
	*j = judging{tracker: u.tracker, now: u.now(), mutate: drop, splitAttr: splitAttr, auto: u.auto, park: &sc.park, copies: &u.copies}
	points := md.DataPointCount()
	rms := md.ResourceMetrics()
	u.mu.Lock()
	j.hasher = u.hasher // reseed replaces it under mu
	u.tracker.Sweep(j.now, sweepBase+points)
	u.tracker.Record(&sc.journal)
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		sc.counts = append(sc.counts, metricCounts{svc: u.svcs.get(rm.Resource())})
		j.c = &sc.counts[len(sc.counts)-1]
		j.hasher.Resource(rm.Resource())
		j.rm = rm
		if drop {
			rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
				j.sm = sm
				u.tracker.NewScope()
				j.hasher.Scope(sm.Scope())
				j.origin = j.hasher.Origin()
				sm.Metrics().RemoveIf(func(m pmetric.Metric) bool { return !j.keepMetric(m) })
				return sm.Metrics().Len() == 0
			})
			continue
		}
		sms := rm.ScopeMetrics()
		for k := 0; k < sms.Len(); k++ {
			sm := sms.At(k)
			j.sm = sm
			u.tracker.NewScope()
			j.hasher.Scope(sm.Scope())
			j.origin = j.hasher.Origin()
			ms := sm.Metrics()
			for n := 0; n < ms.Len(); n++ {
				j.keepMetric(ms.At(n))
			}
		}
	}
	if drop {
		rms.RemoveIf(func(rm pmetric.ResourceMetrics) bool { return rm.ScopeMetrics().Len() == 0 })
		// The held points of writers this request decided peers: sent with
		// it (a copy kept to hold again if it fails downstream).
		u.tracker.TakeReleased(func(id streams.ID, writer uint64, h pmetric.Metrics, size int) {
			c := pmetric.NewMetrics()
			h.CopyTo(c)
			sc.released = append(sc.released, releasedPoint{id: id, writer: writer, md: c, size: size})
			h.ResourceMetrics().MoveAndAppendTo(rms)
		})
	}
	u.tracker.Record(nil)
	expired := u.tracker.HeldExpired()
	if drop && rms.Len() > 0 && sc.journal.Len() > 0 {
		u.copies.register(sc)
	}
	u.mu.Unlock()
	*j = judging{}

	if sc.again {
		sc.counts = sc.counts[:0]
	}
	u.rec.record(sc.counts, expired)
	// Nothing left: every point was a repeat or another writer's.
	return !drop || rms.Len() > 0
}

// commit keeps the judgements: the streams are checkpointed whole, every
// checkpoint_interval, not per request.
func (sc *metricScratch) commit(context.Context) {
	if !sc.mflight.flight.on {
		return
	}
	u := sc.u
	u.mu.Lock()
	u.copies.unlist(sc)
	u.mu.Unlock()
	u.copies.flights.settle(&sc.mflight.flight)
}

// rollback takes the judgements back, so that the sender's retry is judged
// afresh instead of as an exact repeat, and an election the backend never
// saw is not kept.
func (sc *metricScratch) rollback(ctx context.Context, tel *telemetry) {
	if sc.journal.Len() == 0 && len(sc.released) == 0 && !sc.mflight.flight.on {
		return
	}
	u := sc.u
	u.mu.Lock()
	if sc.mflight.flight.on {
		u.copies.refusals++
	}
	u.copies.unlist(sc)
	n := u.tracker.Undo(&sc.journal)
	for _, r := range sc.released {
		u.tracker.Rehold(r.id, r.writer, r.md, r.size)
	}
	u.mu.Unlock()
	// The copies that waited for it are judged again after the undo.
	u.copies.flights.settle(&sc.mflight.flight)
	if n > 0 {
		tel.rolledBack.Add(ctx, int64(n), u.signalOpt)
	}
}

// judgeStats is the classifier's count of writers, for observeWriters.
func (u *metricUnit) judgeStats() streams.JudgeStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tracker.JudgeStats()
}

// metricsSnapshotKey holds the metric streams' elections, rewritten every
// checkpoint_interval and at shutdown.
const metricsSnapshotKey = "metrics/snapshot"

// reseed keys the stream ids with the stored seed, so that this run's ids
// match the snapshot's.
func (u *metricUnit) reseed(seed window.Seed) {
	u.mu.Lock()
	u.hasher = streams.NewHasher(metricSeed(seed))
	u.mu.Unlock()
}

// restore reads the streams' snapshot into the tracker. A stale or foreign
// snapshot is ignored: elections start afresh.
func (u *metricUnit) restore(ctx context.Context, client storage.Client, logger *zap.Logger) ([]zap.Field, error) {
	snap, err := client.Get(ctx, metricsSnapshotKey)
	if err != nil {
		return nil, fmt.Errorf("storage: reading the metric streams: %w", err)
	}
	restored := 0
	if snap != nil {
		u.mu.Lock()
		restored, err = u.tracker.Restore(snap)
		u.mu.Unlock()
		if err != nil {
			logger.Warn("ignoring the stored metric streams", zap.Error(err))
		}
	}
	u.store = client
	return []zap.Field{zap.Int("metric_streams", restored)}, nil
}

// checkpoint stores the streams' state, once the requests in flight when
// it was taken are settled (copies_metrics.go).
func (u *metricUnit) checkpoint(ctx context.Context, _ int64, logger *zap.Logger) {
	if err := u.storeSettled(ctx, u.store); err != nil {
		logger.Warn("checkpointing the metric streams", zap.Error(err))
	}
}

func (u *metricUnit) close(ctx context.Context, logger *zap.Logger) []zap.Field {
	if err := u.storeSnapshot(ctx, u.store); err != nil { // the pipeline has stopped: nothing in flight
		logger.Warn("checkpointing the metric streams", zap.Error(err))
	}
	u.store = nil
	return nil
}

func (u *metricUnit) storeSnapshot(ctx context.Context, client storage.Client) error {
	bp := u.bufs.Get().(*[]byte)
	defer u.bufs.Put(bp)
	u.mu.Lock()
	*bp = u.tracker.AppendSnapshot((*bp)[:0])
	u.mu.Unlock()
	if err := client.Set(ctx, metricsSnapshotKey, *bp); err != nil {
		return fmt.Errorf("storing the metric streams: %w", err)
	}
	return nil
}
