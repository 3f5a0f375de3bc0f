package analyze

import (
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

// streamEntry is a stream's line in the report's list.
func streamEntry(s *metricStreamAcc, diag Diagnosis, resets int, tr *streams.Tracker) MetricStream {
	ms := MetricStream{
		ID: s.id.String(), Name: s.name, Type: s.shape.String(), Unit: s.unit,
		Service: s.res.service, Scope: strings.TrimSpace(s.scope + " " + s.scopeVersion), Attributes: s.attrs, InstanceID: s.res.instance,
		Points: s.points, MoreWriters: s.more, Overlap: s.overlap, Diagnosis: diag, PeerPoints: s.peerPoints,
	}
	if e, ok := tr.Shared(s.id); ok {
		ms.Shared = e.String()
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
