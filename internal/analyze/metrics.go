package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/streams"
)

// DefaultMaxStreams is the default of Options.MaxStreams.
const DefaultMaxStreams = 1_000_000

// maxWritersKept bounds the writers remembered per stream; further writers
// are counted, not described.
const maxWritersKept = 16

// MetricReport is the metric part of a Report. Streams, their identity and
// their writers are those of internal/streams, the implementation the
// gateway's processor uses.
type MetricReport struct {
	Points  int `json:"points"`
	Streams int `json:"streams"`
	// ExtraPoints counts the points the gateway would drop: duplicates,
	// points of writers that are not the stream's elected one (copies, and
	// writers not yet told a copy or a peer), points out of order and
	// decreases within one writer.
	ExtraPoints int `json:"extra_points"`
	// PeerPoints counts the points of writers judged peers (another
	// process with the same identity), which the gateway keeps as their
	// own series: not duplicates, but the identity needs fixing.
	PeerPoints int `json:"peer_points"`
	// Dropped breaks ExtraPoints down by reason (duplicate, overlap,
	// out_of_order, decrease).
	Dropped map[string]int `json:"dropped,omitempty"`
	// MultiWriter counts streams with more than one writer (start time),
	// whether or not their writers overlapped.
	MultiWriter int `json:"multi_writer"`
	// Overlapping counts streams whose writers' points interleaved.
	Overlapping int `json:"overlapping"`
	// Classes counts the second writers of overlapping streams by the
	// classifier's judgement (internal/streams, the gateway's
	// overlap: auto): copy, peer, undecided.
	Classes map[string]int `json:"writer_classes,omitempty"`
	// Resets is the sum of the resets Prometheus would count on the
	// cumulative monotonic series.
	Resets int `json:"resets"`
	// Unjudged counts points of streams beyond Options.MaxStreams.
	Unjudged int `json:"unjudged,omitempty"`
	// Unsupported counts points of metrics with no type or an unspecified
	// temporality.
	Unsupported int `json:"unsupported,omitempty"`
	// List has the streams with more than one writer, dropped points or
	// resets: overlapping ones first.
	List []MetricStream `json:"streams_list"`
}

// MetricStream describes one stream.
type MetricStream struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"` // streams.Shape: sum/cumulative/monotonic, ...
	Unit       string `json:"unit,omitempty"`
	Service    string `json:"service"`
	Scope      string `json:"scope,omitempty"`
	Attributes string `json:"attributes,omitempty"` // point attributes, k=v sorted
	// InstanceID is the resource's service.instance.id, "" when absent.
	InstanceID string         `json:"service_instance_id,omitempty"`
	Points     int            `json:"points"`
	Writers    []MetricWriter `json:"writers"`
	// MoreWriters counts writers beyond the ones listed.
	MoreWriters int            `json:"more_writers,omitempty"`
	Overlap     bool           `json:"overlap"` // some writer's points interleaved with the elected one's
	Dropped     map[string]int `json:"dropped,omitempty"`
	// PeerPoints counts the points of writers judged peers, which the
	// gateway keeps as their own series.
	PeerPoints int `json:"peer_points,omitempty"`
	// Prometheus is what Prometheus would store and compute for the series
	// (cumulative monotonic streams): samples in arrival order, those it
	// would refuse (timestamps not after the previous one), resets().
	Prometheus *PromSeries `json:"prometheus,omitempty"`
	Diagnosis  Diagnosis   `json:"diagnosis,omitempty"`
}

// MetricWriter is one writer of a stream: the points sharing a start time
// (delta streams: an unbroken run).
type MetricWriter struct {
	Start      uint64 `json:"start_time_unix_nano"`
	StartTime  string `json:"start_time"`
	Points     int    `json:"points"`
	FirstTime  string `json:"first_time"`
	LastTime   string `json:"last_time"`
	FirstValue Number `json:"first_value"`
	LastValue  Number `json:"last_value"`
	Elected    bool   `json:"elected"` // the stream's elected writer at the end
	// Class and Evidence are the classifier's judgement of a writer
	// that was not elected: copy, peer or undecided, and why.
	Class    string `json:"class,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

// Number is a point value; NaN and the infinities, which JSON has no
// numbers for, marshal as the strings "NaN", "+Inf" and "-Inf".
type Number float64

// MarshalJSON renders n as a JSON number, or a string when it is not finite.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// PromSeries is Prometheus's view of a cumulative series: samples stored in
// arrival order, a sample refused when its millisecond timestamp is not
// after the stored one (out of order or duplicate), resets() over what was
// stored.
type PromSeries struct {
	Samples  int `json:"samples"`
	Rejected int `json:"rejected"`
	Resets   int `json:"resets"`
}

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
		s.promAdd(p)
		if v.NewScope {
			x.tracker.NewScope()
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

func fmtTime(ns uint64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}

// streamClass is the classifier's judgement of a stream whose writers
// overlapped, folded from its second writers' evidence (streams.Fold): a
// peer if any of them is one, a copy if every one is, undecided otherwise;
// and the evidence line of the writer that decided it.
func (a *Analyzer) streamClass(s *metricStreamAcc) (streams.Class, string) {
	f := a.metrics.tracker.StreamClass(s.id)
	return f.Class(), f.Evidence()
}

// classDiagnosis is the diagnosis of a class: a copy is a second reader
// in one process, a peer another process with the same identity.
func classDiagnosis(c streams.Class) Diagnosis {
	switch c {
	case streams.ClassCopy:
		return DiagTwoExporters
	case streams.ClassPeer:
		return DiagIdentityCollision
	}
	return DiagSecondWriter
}

// writerSpread is how far apart the start times of a stream's writers lie.
func writerSpread(s *metricStreamAcc) time.Duration {
	lo, hi := s.writers[0].start, s.writers[0].start
	for _, w := range s.writers[1:] {
		lo, hi = min(lo, w.start), max(hi, w.start)
	}
	return time.Duration(hi - lo)
}

// metricFindingKey groups the metric findings: one per diagnosis and
// service.
type metricFindingKey struct {
	diag    Diagnosis
	service string
}

// metricFindingAcc accumulates one metric finding.
type metricFindingAcc struct {
	streams   []string
	items     int
	kept      int // items kept as a peer's own series
	spread    time.Duration
	resets    int
	delays    []time.Duration
	reasons   map[streams.Reason]int
	byWriters bool
	// evidence is the classifier's line for one of the finding's
	// streams (the first listed).
	evidence string
	// sameCause: the service's spans were doubled by two exporters in
	// this run, and its streams' second writers are copies or not
	// decided yet: one process, one cause.
	sameCause bool
	// An example of a repeated or out-of-order point: the requests
	// of the later point and of its writer's previous one.
	exFirst, exLater uint32
	hasEx            bool
}

type metricFindings map[metricFindingKey]*metricFindingAcc

func (fs metricFindings) get(k metricFindingKey) *metricFindingAcc {
	f := fs[k]
	if f == nil {
		f = &metricFindingAcc{reasons: map[streams.Reason]int{}}
		fs[k] = f
	}
	return f
}

func (a *Analyzer) metricReport(r *Report) {
	x := &a.metrics
	mr := &r.Metrics
	mr.Points = x.points
	mr.Streams = len(x.streams)
	mr.Unjudged = x.unjudged
	mr.Unsupported = x.unsupported

	diags, evidence, sameCause := a.overlapDiagnoses(r.Findings)
	fs := a.droppedPointFindings(diags, evidence, sameCause)
	a.listStreams(mr, diags, fs)
	for k, f := range fs {
		slices.Sort(f.streams)
		subject := subjectOf(k.service)
		r.Findings = append(r.Findings, Finding{Signal: SignalMetrics, Diagnosis: k.diag, Subject: subject, Items: f.items, Line: a.metricFindingLine(k, f)})
	}
}

// overlapDiagnoses diagnoses each stream whose writers overlap, from the
// classifier's judgement of its second writers. A service whose spans two
// exporters in one process doubled (the span findings are made first) has
// that cause for its streams whose second writers are copies or not
// decided yet: sameCause.
func (a *Analyzer) overlapDiagnoses(findings []Finding) (diags []Diagnosis, evidence []string, sameCause []bool) {
	x := &a.metrics
	doubled := map[string]bool{}
	for _, f := range findings {
		if f.Signal == SignalSpans && f.Diagnosis == DiagTwoExporters {
			doubled[f.Subject] = true
		}
	}
	diags = make([]Diagnosis, len(x.streams))
	evidence = make([]string, len(x.streams))
	sameCause = make([]bool, len(x.streams))
	for i, s := range x.streams {
		if s.overlap {
			var cls streams.Class
			cls, evidence[i] = a.streamClass(s)
			diags[i] = classDiagnosis(cls)
			if cls != streams.ClassPeer && doubled[subjectOf(s.res.service)] {
				// A copy or an undecided writer of a service whose
				// spans arrive twice from one process: the second
				// exporter there (an SDK set up twice) explains both.
				diags[i], sameCause[i] = DiagTwoExporters, true
			}
		}
	}
	return diags, evidence, sameCause
}

// droppedPointFindings groups the dropped points by diagnosis and
// service: overlaps take their stream's diagnosis, the others are
// diagnosed one by one.
func (a *Analyzer) droppedPointFindings(diags []Diagnosis, evidence []string, sameCause []bool) metricFindings {
	x := &a.metrics
	fs := metricFindings{}
	for _, ev := range x.events {
		s := x.streams[ev.stream]
		var d Diagnosis
		switch ev.reason {
		case streams.ReasonOverlap:
			d = diags[ev.stream]
		case streams.ReasonDecrease:
			d = DiagIdentityCollision
		default: // duplicate, out of order
			d = a.classify(ev.first, ev.later)
			if a.opts.NoArrival {
				// Without arrival times: the point's request repeats an
				// earlier one whole (whichever), or not.
				d = DiagTwoExporters
				if a.reqs[ev.later].repeatOf >= 0 {
					d = DiagResentBatch
				}
			}
		}
		f := fs.get(metricFindingKey{d, s.res.service})
		f.items++
		if ev.kept {
			f.kept++
		}
		f.reasons[ev.reason]++
		if ev.reason != streams.ReasonOverlap && !a.opts.NoArrival {
			f.delays = append(f.delays, a.delay(ev.first, ev.later))
		}
		if ev.reason != streams.ReasonOverlap && !f.hasEx {
			f.exFirst, f.exLater, f.hasEx = ev.first, ev.later, true
			if r := a.reqs[ev.later].repeatOf; r >= 0 {
				f.exFirst = uint32(r) // the request it repeats whole
			}
		}
		if len(f.streams) == 0 || f.streams[len(f.streams)-1] != s.name {
			if !slices.Contains(f.streams, s.name) {
				f.streams = append(f.streams, s.name)
			}
		}
		if ev.reason == streams.ReasonOverlap {
			f.byWriters = true
			f.sameCause = f.sameCause || sameCause[ev.stream]
			if f.evidence == "" {
				f.evidence = evidence[ev.stream]
			}
		}
	}
	return fs
}

// listStreams totals the streams into mr, lists those with more than one
// writer, dropped points or resets, and adds each overlapping stream's
// resets and writer spread to its finding.
func (a *Analyzer) listStreams(mr *MetricReport, diags []Diagnosis, fs metricFindings) {
	for i, s := range a.metrics.streams {
		extra := 0
		for _, n := range s.dropped {
			extra += n
		}
		mr.ExtraPoints += extra
		mr.PeerPoints += s.peerPoints
		for reason, n := range s.dropped {
			if n > 0 {
				if mr.Dropped == nil {
					mr.Dropped = map[string]int{}
				}
				mr.Dropped[streams.Reason(reason).String()] += n
			}
		}
		resets := s.prom.resets.Resets()
		mr.Resets += resets
		nw := len(s.writers) + s.more
		if nw > 1 {
			mr.MultiWriter++
		}
		if s.overlap {
			mr.Overlapping++
			for _, j := range a.metrics.tracker.Judgements(s.id, nil) {
				if mr.Classes == nil {
					mr.Classes = map[string]int{}
				}
				mr.Classes[j.Class.String()]++
			}
			f := fs.get(metricFindingKey{diags[i], s.res.service})
			f.resets += resets
			f.spread = max(f.spread, writerSpread(s))
		}
		if nw <= 1 && extra == 0 && resets == 0 {
			continue
		}
		mr.List = append(mr.List, streamEntry(s, diags[i], resets, a.metrics.tracker))
	}
	slices.SortFunc(mr.List, func(a, b MetricStream) int {
		return cmp.Or(
			-cmpBool(a.Overlap, b.Overlap),
			cmp.Compare(b.Points-pointsOfElected(b), a.Points-pointsOfElected(a)),
			strings.Compare(a.Service, b.Service),
			strings.Compare(a.Name, b.Name),
			strings.Compare(a.Attributes, b.Attributes),
		)
	})
}

// streamEntry is a stream's line in the report's list.
func streamEntry(s *metricStreamAcc, diag Diagnosis, resets int, tr *streams.Tracker) MetricStream {
	ms := MetricStream{
		ID: s.id.String(), Name: s.name, Type: s.shape.String(), Unit: s.unit,
		Service: s.res.service, Scope: strings.TrimSpace(s.scope + " " + s.scopeVersion), Attributes: s.attrs, InstanceID: s.res.instance,
		Points: s.points, MoreWriters: s.more, Overlap: s.overlap, Diagnosis: diag, PeerPoints: s.peerPoints,
	}
	for _, w := range s.writers {
		mw := MetricWriter{
			Start: w.start, StartTime: fmtTime(w.start), Points: w.points,
			FirstTime: fmtTime(w.firstT), LastTime: fmtTime(w.lastT),
			FirstValue: Number(w.firstV), LastValue: Number(w.lastV), Elected: w.start == s.elected,
		}
		if j, ok := tr.Judgement(s.id, w.start); ok && !mw.Elected {
			mw.Class, mw.Evidence = j.Class.String(), j.String()
		}
		ms.Writers = append(ms.Writers, mw)
	}
	for reason, n := range s.dropped {
		if n > 0 {
			if ms.Dropped == nil {
				ms.Dropped = map[string]int{}
			}
			ms.Dropped[streams.Reason(reason).String()] = n
		}
	}
	if s.prom.samples > 0 {
		ms.Prometheus = &PromSeries{Samples: s.prom.samples, Rejected: s.prom.rejected, Resets: resets}
	}
	return ms
}

// metricFindingLine says what the finding k saw and what causes it.
func (a *Analyzer) metricFindingLine(k metricFindingKey, f *metricFindingAcc) string {
	subject := subjectOf(k.service)
	names := listNames(f.streams, 4)
	if f.byWriters && (f.sameCause || k.diag == DiagTwoExporters || k.diag == DiagIdentityCollision || k.diag == DiagSecondWriter) {
		return overlapLine(k, f, subject, names)
	}
	if k.diag == DiagIdentityCollision {
		return fmt.Sprintf("metrics of %s: %s (%s) decreased within one writer's start time: an identity collision (writers that share a start time diverge)",
			subject, plural(f.items, "point", "points"), names)
	}
	slices.Sort(f.delays)
	rng := ""
	if len(f.delays) > 0 {
		rng = fmtDur(f.delays[0])
		if f.delays[len(f.delays)-1] != f.delays[0] {
			rng += "–" + fmtDur(f.delays[len(f.delays)-1])
		}
	}
	what := fmt.Sprintf("%s of %s repeated or arrived out of order (%d exact repeats, %d out of order), %s after their writer's previous point",
		plural(f.items, "point", "points"), names, f.reasons[streams.ReasonDuplicate], f.reasons[streams.ReasonOutOfOrder], rng)
	switch {
	case a.opts.NoArrival && k.diag == DiagTwoExporters:
		return fmt.Sprintf("metrics of %s: %s of %s repeated or out of order (%d exact repeats, %d out of order) in requests that repeat no earlier request whole (e.g. %s, after %s): two exporters in one process (the same points batched twice, differently; the source records no arrival times)",
			subject, plural(f.items, "point", "points"), names, f.reasons[streams.ReasonDuplicate], f.reasons[streams.ReasonOutOfOrder], a.where(f.exLater), a.where(f.exFirst))
	case a.opts.NoArrival:
		return fmt.Sprintf("metrics of %s: %s of %s repeated or out of order (%d exact repeats, %d out of order) in requests that repeat an earlier request item for item (e.g. %s repeats %s item for item): a re-sent batch, or two exporters that batched alike (the source records no arrival times to tell them apart)",
			subject, plural(f.items, "point", "points"), names, f.reasons[streams.ReasonDuplicate], f.reasons[streams.ReasonOutOfOrder], a.where(f.exLater), a.where(f.exFirst))
	case k.diag == DiagTwoExporters:
		return fmt.Sprintf("metrics of %s: %s: two exporters in one process (identical copies within the %s export interval)", subject, what, fmtDur(a.opts.ExportInterval))
	default:
		return fmt.Sprintf("metrics of %s: %s: a re-sent batch (later than the %s export interval)", subject, what, fmtDur(a.opts.ExportInterval))
	}
}

// overlapLine is the line of a finding about streams with interleaving
// writers: what was seen, and the cause the classifier's evidence names.
func overlapLine(k metricFindingKey, f *metricFindingAcc, subject, names string) string {
	nstreams, resets := plural(len(f.streams), "stream", "streams"), plural(f.resets, "reset", "resets")
	points := plural(f.items-f.kept, "point", "points") + " the gateway drops"
	if f.kept > 0 {
		points += ", " + plural(f.kept, "point", "points") + " it keeps as a peer's own series"
	}
	seen := fmt.Sprintf("%s (%s) have writers whose start times are %s apart and whose points interleave (%s; %s Prometheus would count without dedup)",
		nstreams, names, fmtDur(f.spread), points, resets)
	switch {
	case f.sameCause:
		return fmt.Sprintf("metrics of %s: the same cause as its doubled spans, two exporters in one process (a second exporter or metric reader, e.g. the SDK set up twice; remove it): %s; judged from the values, %s",
			subject, seen, f.evidence)
	case k.diag == DiagTwoExporters:
		return fmt.Sprintf("metrics of %s: %s: %s (a metric reader or exporter added to the same instruments, e.g. a framework attaching its own; remove it) (%s)",
			subject, seen, streams.ClassCopy.Cause(), f.evidence)
	case k.diag == DiagIdentityCollision:
		return fmt.Sprintf("metrics of %s: %s: %s (%s)",
			subject, seen, streams.ClassPeer.Cause(), f.evidence)
	default: // DiagSecondWriter
		return fmt.Sprintf("metrics of %s: %s: %s: a second metric reader in one process, or processes that share one identity (%s)",
			subject, seen, streams.ClassUndecided.Cause(), f.evidence)
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

func pointsOfElected(s MetricStream) int {
	for _, w := range s.Writers {
		if w.Elected {
			return w.Points
		}
	}
	return 0
}
