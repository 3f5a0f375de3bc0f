package analyze

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/doubletake/doubletake/internal/streams"
)

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

// String is the report's one line on the writers the delta and
// same-start rules decided ("" when none): the counts the status page's
// writer_rules gives, and the delta chains by class.
func (w *WriterRules) String() string {
	if w == nil {
		return ""
	}
	var parts []string
	if w.DeltaCopies+w.DeltaPeers+w.DeltaUndecided > 0 {
		parts = append(parts, fmt.Sprintf("delta chains: %s dropped, %s kept as their own series, %d undecided (held)",
			plural(w.DeltaCopies, "copy", "copies"), plural(w.DeltaPeers, "peer", "peers"), w.DeltaUndecided))
	}
	if w.SharedSplit+w.SharedNotSplit > 0 || w.SharedUnsplit > 0 {
		parts = append(parts, fmt.Sprintf("writers sharing one start: %s split by connection or export phase (%d writers), %d not split, %s not placed",
			plural(w.SharedSplit, "stream", "streams"), w.SharedWriters, w.SharedNotSplit, plural(int(w.SharedUnsplit), "point", "points")))
	}
	if w.QuietPeers > 0 {
		parts = append(parts, plural(int(w.QuietPeers), "quiet peer", "quiet peers")+" (sent nothing while the elected writer went on)")
	}
	if w.DeltaContinued > 0 {
		parts = append(parts, plural(int(w.DeltaContinued), "delta point", "delta points")+" continued their writer's chain (an interval overtaken, or filling a gap)")
	}
	if w.DeltaAcrossGap > 0 {
		parts = append(parts, fmt.Sprintf("%s went on across intervals their writer sent nothing for, %d of them across intervals known empty",
			plural(int(w.DeltaAcrossGap), "delta point", "delta points"), w.DeltaEmpty))
	}
	if len(parts) == 0 {
		return ""
	}
	return "writer rules: " + strings.Join(parts, "; ")
}
