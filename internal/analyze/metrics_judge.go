package analyze

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

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
	var rules WriterRules
	tr := a.metrics.tracker
	for i, s := range a.metrics.streams {
		if e, ok := tr.Shared(s.id); ok {
			rules.shared(e)
		}
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
		_, shared := tr.Shared(s.id)
		if nw <= 1 && extra == 0 && resets == 0 && !shared {
			continue
		}
		mr.List = append(mr.List, streamEntry(s, diags[i], resets, a.metrics.tracker))
	}
	js := tr.JudgeStats()
	rules.QuietPeers, rules.SharedSplit, rules.SharedUnsplit = js.Quiet, int(js.SharedSplit), js.SharedUnsplit
	rules.DeltaCopies, rules.DeltaPeers, rules.DeltaUndecided = js.Delta[streams.ClassCopy], js.Delta[streams.ClassPeer], js.Delta[streams.ClassUndecided]
	rules.DeltaContinued, rules.DeltaAcrossGap, rules.DeltaEmpty = js.Continued, js.AcrossGap, js.EmptyIntervals
	if rules != (WriterRules{}) {
		mr.WriterRules = &rules
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

// shared counts a stream's shared start: split into e.Writers, or not.
func (w *WriterRules) shared(e streams.SharedEvidence) {
	if e.Writers < 2 {
		w.SharedNotSplit++
		return
	}
	w.SharedWriters += e.Writers
}
