package analyze

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/streams"
)

type writerAcc struct {
	start         uint64
	points        int
	firstT, lastT uint64
	firstV, lastV float64
	accepted      uint32 // request of the writer's newest in-order point
}

type promAcc struct {
	started  bool
	lastMs   int64
	samples  int
	rejected int
	resets   streams.ResetCounter
}

type metricStreamAcc struct {
	id           streams.ID
	shape        streams.Shape
	overlap      bool
	name         string
	unit         string
	res          *resourceInfo // shared by the streams of one resource
	scope        string
	scopeVersion string
	attrs        string
	points       int
	writers      []writerAcc
	more         int
	elected      uint64
	dropped      [streams.NumReasons]int
	peerPoints   int
	prom         promAcc
}

// metricEvent is a point the Tracker dropped, for the diagnosis.
type metricEvent struct {
	stream uint32
	reason streams.Reason
	first  uint32 // request of the writer's newest point before this one
	later  uint32 // request of this point
	kept   bool   // a peer's point, kept as its own series
}

type metricIndex struct {
	hasher      *streams.Hasher
	tracker     *streams.Tracker
	index       map[streams.ID]uint32
	streams     []*metricStreamAcc
	resources   map[uint64]*resourceInfo
	lastRes     pcommon.Resource // the resource resInfo describes
	resInfo     *resourceInfo
	events      []metricEvent
	points      int
	unjudged    int
	unsupported int
}

func (x *metricIndex) init(maxStreams int) {
	x.hasher = streams.NewHasher(0)
	p := streams.DefaultPolicy()
	p.MaxStreams = min(maxStreams, streams.MaxStreamsLimit)
	p.MaxStale = 100 * 365 * 24 * time.Hour // verify never forgets a stream
	// The gateway's default, overlap: auto: every second writer is judged
	// a copy or a peer from its values, and the reports name that cause.
	p.Auto = true
	p.MaxJudged = p.MaxStreams
	t, err := streams.NewTracker(p)
	if err != nil {
		panic(fmt.Sprintf("analyze: tracker policy: %v", err)) // the policy is ours and valid
	}
	x.tracker = t
	x.index = map[streams.ID]uint32{}
	x.resources = map[uint64]*resourceInfo{}
}

// resource describes r, once per ResourceMetrics and once per distinct
// resource in memory.
func (x *metricIndex) resource(r pcommon.Resource, e *enc) *resourceInfo {
	if x.resInfo != nil && x.lastRes == r {
		return x.resInfo
	}
	ri := describeResource(r, e)
	p, ok := x.resources[ri.hash]
	if !ok {
		p = &ri
		x.resources[ri.hash] = p
	}
	x.lastRes, x.resInfo = r, p
	return p
}

// AddMetrics adds one export request of metric points.
func (a *Analyzer) AddMetrics(at Arrival, md pmetric.Metrics) {
	x := &a.metrics
	ri := a.beginRequest(at, SignalMetrics)
	now := a.reqs[ri].received
	n := 0
	total := md.DataPointCount()
	streams.Walk(md, x.hasher, func(v *streams.Visit) {
		n++
		x.points++
		a.metricItem(v)
		si, ok := x.index[v.ID]
		if !ok {
			si = uint32(len(x.streams))
			x.index[v.ID] = si
			x.streams = append(x.streams, newStreamAcc(v, x.resource(v.Resource, &a.e)))
		}
		s := x.streams[si]
		s.points++
		p := v.Point
		if at.Peer != "" {
			p.Conn = uint64(a.reqs[ri].peer) + 1 // writers sharing a start: their connections (streams.Point.Conn)
		}
		s.promAdd(p)
		if v.NewScope {
			x.tracker.NewScope(v.Identity)
		}
		d := x.tracker.ObserveFrom(v.ID, v.Origin, v.Shape, p, now)
		if d.Reason == streams.ReasonUnjudged {
			x.unjudged++
		}
		w := s.writer(d.Writer, v.Shape, p, ri)
		prevReq := ri
		if w != nil {
			prevReq = w.accepted
			// A writer's own sequence goes on with every point except
			// repeats, points out of its order and decreases.
			inOrder := d.Reason != streams.ReasonDuplicate && d.Reason != streams.ReasonOutOfOrder && d.Reason != streams.ReasonDecrease
			w.add(p, ri, inOrder)
		}
		if d.Election != streams.ElectionNone || d.Verdict == streams.Pass {
			if d.Election != streams.ElectionNone || d.Writer == d.Elected {
				s.elected = d.Writer
			}
		}
		switch d.Verdict {
		case streams.Drop:
			s.dropped[d.Reason]++
			if d.Reason == streams.ReasonOverlap {
				s.overlap = true
			}
			x.events = append(x.events, metricEvent{stream: si, reason: d.Reason, first: prevReq, later: ri})
		case streams.Label: // a peer's point: its own series
			s.peerPoints++
			s.overlap = true
			x.events = append(x.events, metricEvent{stream: si, reason: d.Reason, first: prevReq, later: ri, kept: true})
		}
	})
	x.unsupported += total - n
	// Forget the request's resource: keep none of its pdata.
	x.lastRes, x.resInfo = pcommon.Resource{}, nil
	a.endRequest(ri, n)
}

// metricItem adds a point to the request digest: its stream, times and
// value.
func (a *Analyzer) metricItem(v *streams.Visit) {
	e := &a.e
	e.Reset()
	e.B = append(e.B, v.ID[:]...)
	e.U64(v.Point.Start)
	e.U64(v.Point.Time)
	e.U64(v.Point.Fingerprint)
	a.item(e.sum())
}

func newStreamAcc(v *streams.Visit, res *resourceInfo) *metricStreamAcc {
	return &metricStreamAcc{
		id:           v.ID,
		shape:        v.Shape,
		name:         v.Metric.Name(),
		unit:         v.Metric.Unit(),
		res:          res,
		scope:        v.Scope.Name(),
		scopeVersion: v.Scope.Version(),
		attrs:        renderAttrs(v.Attrs),
	}
}

// renderAttrs renders point attributes as k=v pairs sorted by key.
func renderAttrs(m pcommon.Map) string {
	if m.Len() == 0 {
		return ""
	}
	parts := make([]string, 0, m.Len())
	for k, v := range m.All() {
		parts = append(parts, k+"="+v.AsString())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// promAdd feeds a point to the simulated Prometheus series: cumulative
// monotonic streams only (counters, and the _count of histograms and
// summaries), in arrival order, at millisecond precision.
func (s *metricStreamAcc) promAdd(p streams.Point) {
	if !s.shape.Cumulative() || !s.shape.Monotonic() || p.Time == 0 {
		return
	}
	ms := int64(p.Time / 1e6)
	pr := &s.prom
	if pr.started && ms <= pr.lastMs {
		pr.rejected++
		return
	}
	pr.started, pr.lastMs = true, ms
	pr.samples++
	v := p.Value
	if p.NoValue {
		v = math.NaN() // a staleness marker
	}
	pr.resets.Add(v)
}

// writer returns the accumulator of the writer with start, adding it; nil
// for gauges (which have no writer identity) and beyond maxWritersKept.
func (s *metricStreamAcc) writer(start uint64, shape streams.Shape, p streams.Point, req uint32) *writerAcc {
	if shape.Kind() == streams.KindGauge {
		return nil
	}
	for i := range s.writers {
		if s.writers[i].start == start {
			return &s.writers[i]
		}
	}
	if len(s.writers) >= maxWritersKept {
		s.more++
		return nil
	}
	s.writers = append(s.writers, writerAcc{start: start, firstT: p.Time, firstV: p.Value, accepted: req})
	return &s.writers[len(s.writers)-1]
}

func (w *writerAcc) add(p streams.Point, req uint32, inOrder bool) {
	w.points++
	if inOrder {
		w.lastT, w.lastV, w.accepted = p.Time, p.Value, req
	}
}
