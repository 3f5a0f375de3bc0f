package loadgen

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// metricTemplate is one encoded OTLP ExportMetricsServiceRequest of a
// writer: cumulative monotonic sum points of consecutive streams, with the
// offsets of every point's time_unix_nano and as_int, which each export
// overwrites. Writers of one stream send the same resource, scope, metric
// and attributes (so they write the same stream, as workers sharing one
// resource identity do) and differ only in start time.
type metricTemplate struct {
	buf     []byte
	timeOff []int
	valOff  []int
}

// metricStartBase is the start time of writer 0; writer w starts w seconds
// later.
const metricStartBase = 1_700_000_000_000_000_000

// newMetricTemplates returns writer w's requests: streams points in
// requests of at most perRequest points.
func newMetricTemplates(w, streams, perRequest int) ([]*metricTemplate, error) {
	if streams < 1 || perRequest < 1 {
		return nil, fmt.Errorf("metric streams and points per request must be at least 1")
	}
	var out []*metricTemplate
	for first := 0; first < streams; first += perRequest {
		n := min(perRequest, streams-first)
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "load-metrics")
		rm.Resource().Attributes().PutStr("host.name", "load-host-1")
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("doubletake-load")
		m := sm.Metrics().AppendEmpty()
		m.SetName("load.requests")
		m.SetUnit("{request}")
		sum := m.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sum.SetIsMonotonic(true)
		for i := range n {
			dp := sum.DataPoints().AppendEmpty()
			dp.Attributes().PutInt("stream", int64(first+i))
			dp.Attributes().PutStr("http.route", "/api/v1/rollouts/{id}")
			dp.SetStartTimestamp(pcommon.Timestamp(metricStartBase + uint64(w)*1_000_000_000))
			dp.SetTimestamp(pcommon.Timestamp(timeMarker(i)))
			dp.SetIntValue(int64(valueMarker(i)))
		}
		buf, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		if err != nil {
			return nil, err
		}
		t := &metricTemplate{buf: buf}
		if t.timeOff, err = findFixed(buf, 0x19, timeHigh, n); err != nil {
			return nil, fmt.Errorf("time_unix_nano: %w", err)
		}
		if t.valOff, err = findFixed(buf, 0x31, valueHigh, n); err != nil {
			return nil, fmt.Errorf("as_int: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Markers: the high 32 bits say which field, the low 32 bits which point.
const (
	timeHigh  = 0x7a5a_c3c3
	valueHigh = 0x5ac3_3c7a
)

func timeMarker(i int) uint64  { return timeHigh<<32 | uint64(uint32(i)) }
func valueMarker(i int) uint64 { return valueHigh<<32 | uint64(uint32(i)) }

// findFixed finds, in one pass, the n fixed64 fields with tag whose values
// are the markers high<<32 | i, and returns the offsets of their 8 value
// bytes by i. The encoder need not write fields in field order.
func findFixed(buf []byte, tag byte, high uint32, n int) ([]int, error) {
	offs := make([]int, n)
	for i := range offs {
		offs[i] = -1
	}
	var hi [4]byte
	binary.LittleEndian.PutUint32(hi[:], high)
	found := 0
	for from := 0; ; {
		at := bytes.Index(buf[from:], hi[:])
		if at < 0 {
			break
		}
		end := from + at + 4 // just past the value
		from = end
		off := end - 8
		if off < 1 || buf[off-1] != tag {
			continue
		}
		i := int(binary.LittleEndian.Uint32(buf[off:]))
		if i >= n || offs[i] >= 0 {
			return nil, fmt.Errorf("unexpected marker at offset %d of the encoded template", off)
		}
		offs[i] = off
		found++
	}
	if found != n {
		return nil, fmt.Errorf("found %d of %d markers in the encoded template", found, n)
	}
	return offs, nil
}

// Points returns how many points the request carries.
func (t *metricTemplate) Points() int { return len(t.timeOff) }

// build writes the request with every point at time ts and value v.
func (t *metricTemplate) build(dst []byte, ts uint64, v int64) []byte {
	dst = append(dst[:0], t.buf...)
	for i := range t.timeOff {
		binary.LittleEndian.PutUint64(dst[t.timeOff[i]:], ts)
		binary.LittleEndian.PutUint64(dst[t.valOff[i]:], uint64(v))
	}
	return dst
}
