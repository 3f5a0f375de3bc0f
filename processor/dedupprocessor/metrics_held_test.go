package dedupprocessor

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestOverwriteHeldPoint: a held point overwritten with a newer point of
// its stream is that point, with the held point's (labelled) attributes,
// for every point type; the size is reported unchanged only when the
// lists it holds are as long as before.
func TestOverwriteHeldPoint(t *testing.T) {
	attrs := func(m pcommon.Map) {
		m.PutStr("route", "/a")
		m.PutStr("service.instance.id", "writer")
	}
	want := func(t *testing.T, got, newer pmetric.Metrics) {
		t.Helper()
		// The newer point with the held one's attributes.
		var a, b []byte
		var err error
		m := &pmetric.JSONMarshaler{}
		if a, err = m.MarshalMetrics(newer); err != nil {
			t.Fatal(err)
		}
		if b, err = m.MarshalMetrics(got); err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("overwritten\n got %s\nwant %s", b, a)
		}
	}
	newMetric := func() (pmetric.Metrics, pmetric.Metric) {
		md := pmetric.NewMetrics()
		return md, md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	}
	t.Run("number", func(t *testing.T) {
		held, hm := newMetric()
		c := hm.SetEmptySum().DataPoints().AppendEmpty()
		attrs(c.Attributes())
		c.SetIntValue(3)
		c.SetTimestamp(10)
		newer, nm := newMetric()
		dp := nm.SetEmptySum().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetIntValue(7)
		dp.SetStartTimestamp(1)
		dp.SetTimestamp(20)
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
		src := pmetric.NewNumberDataPoint()
		dp.CopyTo(src)
		src.Attributes().Clear()
		src.Attributes().PutStr("route", "/a") // unlabelled, as received
		if !overwriteNumber(c, src) {
			t.Error("same lists, reported a different size")
		}
		want(t, held, newer)
		src.Exemplars().AppendEmpty().SetIntValue(1)
		if overwriteNumber(c, src) {
			t.Error("an exemplar more, reported the same size")
		}
	})
	t.Run("histogram", func(t *testing.T) {
		held, hm := newMetric()
		c := hm.SetEmptyHistogram().DataPoints().AppendEmpty()
		attrs(c.Attributes())
		c.SetCount(2)
		c.SetSum(3)
		c.SetMin(1)
		c.BucketCounts().FromRaw([]uint64{1, 1})
		c.ExplicitBounds().FromRaw([]float64{5})
		newer, nm := newMetric()
		dp := nm.SetEmptyHistogram().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetCount(5)
		dp.SetMax(9)
		dp.SetTimestamp(30)
		dp.BucketCounts().FromRaw([]uint64{2, 3})
		dp.ExplicitBounds().FromRaw([]float64{5})
		src := pmetric.NewHistogramDataPoint()
		dp.CopyTo(src)
		if overwriteHistogram(c, src) {
			t.Error("sum and min gone, max set: reported the same size")
		}
		want(t, held, newer)
		if !overwriteHistogram(c, src) {
			t.Error("the same point again, reported a different size")
		}
	})
	t.Run("exponential", func(t *testing.T) {
		held, hm := newMetric()
		c := hm.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		attrs(c.Attributes())
		c.SetCount(1)
		newer, nm := newMetric()
		dp := nm.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetCount(4)
		dp.SetScale(3)
		dp.Positive().SetOffset(2)
		dp.Positive().BucketCounts().FromRaw([]uint64{1, 3})
		src := pmetric.NewExponentialHistogramDataPoint()
		dp.CopyTo(src)
		src.Attributes().Remove("service.instance.id")
		overwriteExponential(c, src)
		want(t, held, newer)
	})
	t.Run("summary", func(t *testing.T) {
		held, hm := newMetric()
		c := hm.SetEmptySummary().DataPoints().AppendEmpty()
		attrs(c.Attributes())
		c.SetCount(1)
		newer, nm := newMetric()
		dp := nm.SetEmptySummary().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetCount(4)
		dp.SetSum(8)
		q := dp.QuantileValues().AppendEmpty()
		q.SetQuantile(0.5)
		q.SetValue(2)
		src := pmetric.NewSummaryDataPoint()
		dp.CopyTo(src)
		if overwriteSummary(c, src) {
			t.Error("a quantile more, reported the same size")
		}
		want(t, held, newer)
	})
}

// TestQuietPeerDelivered: a writer that ends undecided while the elected
// writer goes on (a short-lived process sharing the identity) is decided a
// peer by the quiet rule, and its held point, its whole count, is sent as
// its own series with the elected writer's next request.
func TestQuietPeerDelivered(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	s := uint64(time.Second)
	send := func(md pmetric.Metrics) {
		t.Helper()
		if err := p.ConsumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	send(sumPoint(100*s, 110*s, 10))
	for k := range uint64(3) { // B = A's less 4 to 14: undecided
		send(sumPoint(103*s, (111+10*k)*s, int64(6+10*k)))
		send(sumPoint(100*s, (120+10*k)*s, int64(20+10*k)))
	}
	before := sink.DataPointCount()
	if before != 4 {
		t.Fatalf("%d points delivered, want A's 4 (B's held)", before)
	}
	send(sumPoint(100*s, 150*s, 50))
	send(sumPoint(100*s, 160*s, 60)) // 29 s after B's newest, 3 of its intervals less a second
	if n := sink.DataPointCount(); n != 6 {
		t.Fatalf("%d points delivered, want A's 6: B not quiet yet", n)
	}
	send(sumPoint(100*s, 170*s, 70))
	all := sink.AllMetrics()
	var got []string
	for _, md := range all[len(all)-1:] {
		got = append(got, strings.TrimSpace(printMetricsText(md)))
	}
	text := strings.Join(got, "\n")
	if sink.DataPointCount() != 8 || !strings.Contains(text, "i=26 | service.instance.id=") {
		t.Fatalf("%d points, the last request's:\n%s\nwant A's point and B's held 26, labelled", sink.DataPointCount(), text)
	}
}

// TestUndecidedHeldAtShutdown: a writer still undecided when the gateway
// stops (its process ended with the elected one's, so the quiet rule does
// not decide it) has its held point dropped at shutdown: said in a
// warning with the count, never in silence.
func TestUndecidedHeldAtShutdown(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(Type)
	set.Logger = zap.New(core)
	sink := new(consumertest.MetricsSink)
	p, err := NewFactory().CreateMetrics(context.Background(), set, createDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	s := uint64(time.Second)
	send(t, p.ConsumeMetrics, sumPoint(100*s, 110*s, 10))
	for k := range uint64(3) { // B = A's less 4 to 14: undecided
		send(t, p.ConsumeMetrics, sumPoint(103*s, (111+10*k)*s, int64(6+10*k)))
		send(t, p.ConsumeMetrics, sumPoint(100*s, (120+10*k)*s, int64(20+10*k)))
	}
	if n := sink.DataPointCount(); n != 4 {
		t.Fatalf("%d points delivered, want A's 4 (B's held)", n)
	}
	if len(logs.FilterMessage("second writers of metric streams undecided at shutdown").All()) != 0 {
		t.Fatal("warned before shutdown")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	warns := logs.FilterMessage("second writers of metric streams undecided at shutdown").All()
	if len(warns) != 1 || warns[0].ContextMap()["held_points_dropped"] != int64(1) {
		t.Fatalf("warnings %v, want one naming 1 held point dropped", warns)
	}
	if n := sink.DataPointCount(); n != 4 {
		t.Fatalf("%d points delivered at shutdown, want A's 4 still: an undecided writer is not sent", n)
	}
}

// send consumes md or fails the test.
func send(t *testing.T, consume func(context.Context, pmetric.Metrics) error, md pmetric.Metrics) {
	t.Helper()
	if err := consume(context.Background(), md); err != nil {
		t.Fatal(err)
	}
}

// TestMergeHeldDeltas: a held delta point adds up the intervals held:
// values, counts, sums, buckets, the least min and greatest max, from the
// first start to the newest time; histograms with other bounds are not
// merged.
func TestMergeHeldDeltas(t *testing.T) {
	c, dp := pmetric.NewNumberDataPoint(), pmetric.NewNumberDataPoint()
	c.SetStartTimestamp(1)
	c.SetTimestamp(2)
	c.SetIntValue(3)
	dp.SetStartTimestamp(2)
	dp.SetTimestamp(3)
	dp.SetIntValue(4)
	if !mergeNumber(c, dp) || c.IntValue() != 7 || c.StartTimestamp() != 1 || c.Timestamp() != 3 {
		t.Errorf("int merge: %d (%d, %d]", c.IntValue(), c.StartTimestamp(), c.Timestamp())
	}
	dp.SetDoubleValue(0.5)
	if mergeNumber(c, dp) || c.DoubleValue() != 7.5 {
		t.Errorf("int and double: %v, want 7.5 and a size change", c.DoubleValue())
	}
	h, hp := pmetric.NewHistogramDataPoint(), pmetric.NewHistogramDataPoint()
	for _, p := range []pmetric.HistogramDataPoint{h, hp} {
		p.ExplicitBounds().FromRaw([]float64{1, 2})
	}
	h.SetStartTimestamp(1)
	h.SetTimestamp(2)
	h.SetCount(2)
	h.SetSum(3)
	h.SetMin(0.5)
	h.SetMax(2.5)
	h.BucketCounts().FromRaw([]uint64{1, 0, 1})
	hp.SetStartTimestamp(2)
	hp.SetTimestamp(3)
	hp.SetCount(3)
	hp.SetSum(4)
	hp.SetMin(0.2)
	hp.SetMax(1.5)
	hp.BucketCounts().FromRaw([]uint64{1, 2, 0})
	if !mergeHistogram(h, hp) || h.Count() != 5 || h.Sum() != 7 || h.Min() != 0.2 || h.Max() != 2.5 ||
		h.StartTimestamp() != 1 || h.Timestamp() != 3 || h.BucketCounts().At(0) != 2 || h.BucketCounts().At(1) != 2 || h.BucketCounts().At(2) != 1 {
		t.Errorf("histogram merge: count %d sum %g min %g max %g buckets %v", h.Count(), h.Sum(), h.Min(), h.Max(), h.BucketCounts().AsRaw())
	}
	hp.ExplicitBounds().FromRaw([]float64{1, 3})
	if mergeHistogram(h, hp) {
		t.Error("merged a histogram with other bounds")
	}
}
