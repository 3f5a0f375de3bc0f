package analyze

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

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

func fmtTime(ns uint64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
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
