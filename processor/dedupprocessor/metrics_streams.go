package dedupprocessor

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/internal/scan"
	"github.com/doubletake/doubletake/internal/streams"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// streamAttrBytes bounds a metric stream's point attributes as the book
// keeps them ("key=value, ..."), streamAttrCount their number.
const (
	streamAttrBytes = statuspage.AttrBytes
	streamAttrCount = 32
)

// metricEvent is the first notable point of a request for one resource:
// what a warning names.
type metricEvent struct {
	set      bool
	metric   string
	attrs    string // the point's attributes, as the status page shows them (streamAttrs)
	reason   streams.Reason
	election streams.Election
	elected  uint64 // start time of the writer elected before the point
	writer   uint64 // start time of the point's writer
	action   int    // what happened to the point
	// With metrics.overlap auto, for a second writer's point: its class
	// and the evidence (metrics_class.go).
	class    streams.Class
	judged   bool
	evidence string
	// streamClass and streamEvidence are the stream's class over all its
	// later writers (streams.Fold), for the status page.
	streamClass    streams.Class
	streamEvidence string
	// release is the release known to export twice that a copy's request
	// carries a scope of (releases.go: copyRelease); nil when none.
	release *scan.Finding
}

// warnable says whether a point's decision belongs in a warning: a second
// writer (overlap, decrease, suspected gauge writer) or a change of writer
// other than a restart. Repeats and late points are counted only.
func warnable(d streams.Decision) bool {
	switch d.Reason {
	case streams.ReasonOverlap, streams.ReasonDecrease, streams.ReasonSuspect:
		return true
	}
	return d.Election == streams.ElectionEarlierStart || d.Election == streams.ElectionFailover
}

func eventName(e metricEvent) string {
	if e.election != streams.ElectionNone {
		return "election:" + e.election.String()
	}
	return e.reason.String()
}

// suggest names the likely cause from the kind of event.
func suggest(e metricEvent) string {
	if e.release != nil {
		return e.release.ScopeBrief() // a copy, and the release that made it
	}
	if e.judged && e.class != streams.ClassUndecided {
		return e.class.Cause() // metrics.overlap auto: from the values
	}
	switch {
	case e.reason == streams.ReasonDecrease:
		return "writers share a start time but report different values: two readers or exporters over one SDK aggregation, or processes that started together without a unique service.instance.id"
	case e.reason == streams.ReasonSuspect:
		return "a gauge reported more often than its interval: two processes or two metric readers writing one stream"
	case e.writer > e.elected:
		return "a second writer started later: a metric reader or exporter added after start (e.g. a framework attaching its own), or a second process without a unique service.instance.id"
	default:
		return "a writer with an earlier start: another process or pipeline writes the same stream; give each process a unique service.instance.id"
	}
}

// streamBook remembers the metric streams (service, metric) that had more
// than one writer, up to status.max_streams; the events of the ones past
// it are counted. The metric unit keeps it when the status page is on.
type streamBook struct {
	max     int
	refused metric.Int64Counter
	opt     metric.AddOption

	mu      sync.Mutex
	entries map[streamKey]*streamEntry
	dropped int64 // events of streams refused since start
}

// streamKey is a stream as the book tells it: its service, metric and
// point attributes (streamAttrs).
type streamKey struct{ service, metric, attrs string }

type streamEntry struct {
	service, metric string
	attrs           string
	elected, other  uint64 // writers' start times, Unix ns; 0 for gauges
	points          int64  // points that broke the single-writer rule
	elections       int64
	event           string // the latest: overlap, decrease, election:earlier_start...
	action          string
	diagnosis       string
	class, evidence string // metrics.overlap auto: the other writer's (metrics_class.go)
	release         string // a copy's known release (releases.go), with its advice in diagnosis
	first, last     time.Time
}

func newStreamBook(max int, refused metric.Int64Counter) *streamBook {
	return &streamBook{
		max: max, refused: refused, entries: make(map[streamKey]*streamEntry),
		opt: metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"))),
	}
}

// note records one request's notable event for one service's stream. A nil
// book (no status page) records nothing.
func (b *streamBook) note(service string, e metricEvent, points, elections int64, now time.Time) {
	if b == nil || !e.set {
		return
	}
	k := streamKey{service, e.metric, e.attrs}
	b.mu.Lock()
	en, ok := b.entries[k]
	if !ok {
		if len(b.entries) >= b.max {
			b.dropped++
			b.mu.Unlock()
			b.refused.Add(context.Background(), 1, b.opt)
			return
		}
		en = &streamEntry{service: service, metric: e.metric, attrs: e.attrs, first: now}
		b.entries[k] = en
	}
	en.elected, en.other = e.elected, e.writer
	en.points += points
	en.elections += elections
	en.event, en.action, en.diagnosis = eventName(e), actionNames[e.action], suggest(e)
	if e.judged {
		en.class, en.evidence = e.streamClass.String(), e.streamEvidence
		if e.streamClass != e.class && e.release == nil {
			en.diagnosis = e.streamClass.Cause() // the stream's, not the point's writer's
		}
	}
	if e.release != nil {
		en.release = e.release.Release()
	}
	en.last = now
	b.mu.Unlock()
}

// statusRows are the book's streams for the status page and the events
// it refused.
func (b *streamBook) statusRows() ([]statuspage.StreamStatus, int64) {
	if b == nil {
		return nil, 0
	}
	b.mu.Lock()
	entries := make([]streamEntry, 0, len(b.entries))
	for _, e := range b.entries {
		entries = append(entries, *e)
	}
	refused := b.dropped
	b.mu.Unlock()
	out := make([]statuspage.StreamStatus, 0, len(entries))
	for _, e := range entries {
		ss := statuspage.StreamStatus{
			Service: e.service, Metric: e.metric, Attributes: e.attrs,
			Points: e.points, Elections: e.elections,
			Event: e.event, Action: e.action, FirstSeen: e.first.UTC(), LastSeen: e.last.UTC(), Diagnosis: e.diagnosis,
			Class: e.class, Evidence: e.evidence, Release: e.release,
		}
		if e.elected != 0 || e.other != 0 {
			el, ot := time.Unix(0, int64(e.elected)).UTC(), time.Unix(0, int64(e.other)).UTC()
			ss.ElectedStart, ss.OtherStart = &el, &ot
		}
		out = append(out, ss)
	}
	return out, refused
}

// streamAttrs is how the book tells a stream's point attributes apart:
// "key=value" sorted by key, at most streamAttrCount of them and about
// streamAttrBytes bytes, copied (nothing of the request is kept). Maps,
// arrays and bytes show their size only.
func streamAttrs(m pcommon.Map) string {
	if m.Len() == 0 {
		return ""
	}
	type kv struct{ k, v string }
	clip := func(s string) string {
		if len(s) > streamAttrBytes {
			s = s[:streamAttrBytes]
		}
		return strings.Clone(s)
	}
	kvs := make([]kv, 0, min(m.Len(), streamAttrCount))
	for k, v := range m.All() {
		if len(kvs) == streamAttrCount {
			break
		}
		var val string
		switch v.Type() {
		case pcommon.ValueTypeStr:
			val = clip(v.Str())
		case pcommon.ValueTypeMap:
			val = "{" + strconv.Itoa(v.Map().Len()) + " keys}"
		case pcommon.ValueTypeSlice:
			val = "[" + strconv.Itoa(v.Slice().Len()) + " values]"
		case pcommon.ValueTypeBytes:
			val = "(" + strconv.Itoa(v.Bytes().Len()) + " bytes)"
		default:
			val = v.AsString()
		}
		kvs = append(kvs, kv{clip(k), val})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
	var b strings.Builder
	for i, e := range kvs {
		if b.Len() >= streamAttrBytes {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.k)
		b.WriteByte('=')
		b.WriteString(e.v)
	}
	if more := m.Len() - len(kvs); more > 0 {
		b.WriteString(", +" + strconv.Itoa(more) + " more")
	}
	return b.String()
}
