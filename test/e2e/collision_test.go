package e2e

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// sendCollision posts, over OTLP/HTTP JSON to addr, the points of two
// processes that share one identity (service name, no instance id): two
// writers of the cumulative counter metric, the one started later first. The
// earlier-started writer displaces it (an earlier_start election), and every
// later point of the other is an overlap.
func sendCollision(t *testing.T, addr, service, metric string) {
	t.Helper()
	sendCollisionAttrs(t, addr, service, metric, nil)
}

// sendCollisionAttrs is sendCollision with attrs on every point.
func sendCollisionAttrs(t *testing.T, addr, service, metric string, attrs map[string]string) {
	t.Helper()
	now := time.Now()
	early, late := now.Add(-time.Minute), now.Add(-time.Second)
	point := func(start, at time.Time, v int64) {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", service)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(metric)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetIntValue(v)
		for k, v := range attrs {
			dp.Attributes().PutStr(k, v)
		}
		b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := post(t, "http://"+addr+"/v1/metrics", "application/json", string(b)); code != 200 {
			t.Fatalf("posting %s: %d %s", metric, code, body)
		}
	}
	for i := range 5 {
		at := now.Add(time.Duration(i) * time.Second)
		point(late, at, int64(i+1))
		point(early, at.Add(10*time.Millisecond), int64(100+i))
	}
}

// sendRestart posts one writer's cumulative points to addr over HTTP
// (OTLP/JSON), then the same stream from a restarted writer: its start
// after the first one's newest point. The stream's writer is elected again
// (reason restart) whatever the overlap policy: a restart is no second
// writer.
func sendRestart(t *testing.T, addr, service, metric string) {
	t.Helper()
	now := time.Now()
	point := func(start, at time.Time, v int64) {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", service)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(metric)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetIntValue(v)
		b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := post(t, "http://"+addr+"/v1/metrics", "application/json", string(b)); code != 200 {
			t.Fatalf("posting %s: %d %s", metric, code, body)
		}
	}
	first := now.Add(-time.Minute)
	for i := range 3 {
		point(first, now.Add(time.Duration(i)*time.Second), int64(10*(i+1)))
	}
	restarted := now.Add(3 * time.Second)
	for i := range 3 {
		point(restarted, restarted.Add(time.Duration(i+1)*time.Second), int64(i+1))
	}
}
