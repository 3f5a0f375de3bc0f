package analyze

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// SpanReport is the span part of a Report.
type SpanReport struct {
	Received    int `json:"received"`
	Unique      int `json:"unique"`       // distinct (trace_id, span_id), plus spans with invalid ids
	Duplicated  int `json:"duplicated"`   // ids that arrived more than once
	ExtraCopies int `json:"extra_copies"` // copies after the first
	Conflicting int `json:"conflicting"`  // duplicated ids whose copies differ
	InvalidIDs  int `json:"invalid_ids"`  // spans with an all-zero trace or span id: counted, never compared
	// Groups has one entry per service and span name, those with
	// duplicates first.
	Groups []SpanGroup `json:"groups"`
}

// SpanGroup counts the spans of one service and span name.
type SpanGroup struct {
	Service     string `json:"service"`
	Name        string `json:"name"`
	Received    int    `json:"received"`
	Unique      int    `json:"unique"`
	Duplicated  int    `json:"duplicated"`
	ExtraCopies int    `json:"extra_copies"`
	Conflicting int    `json:"conflicting"`
	// Copies tells how many ids arrived how many times (2 or more).
	Copies []CopyCount `json:"copies"`
	// Delays between the first copy of an id and each later copy.
	Delays   *Delays       `json:"delays,omitempty"`
	Examples []SpanExample `json:"examples"`
}

// CopyCount says that IDs items arrived Copies times each.
type CopyCount struct {
	Copies int `json:"copies"`
	IDs    int `json:"ids"`
}

// SpanExample is one duplicated span id.
type SpanExample struct {
	TraceID string   `json:"trace_id"`
	SpanID  string   `json:"span_id"`
	Copies  int      `json:"copies"`
	Delays  []Millis `json:"delays_ms"` // after the first copy, one per later copy
	Differ  bool     `json:"differ"`    // some copy differs from the first
}

type spanKey [24]byte

type spanGroupAcc struct {
	service, name string
	groupCounts
	invalid int
}

// spanIndex counts spans by their ids, with the content hash of each
// copy (copies.go).
type spanIndex struct {
	copyIndex[spanKey, uint64]
	groups   []spanGroupAcc
	groupIdx map[string]map[string]uint32
	received int
	invalid  int
}

func (x *spanIndex) init() {
	x.copyIndex.init()
	x.groupIdx = map[string]map[string]uint32{}
}

// names returns the group index of service's span names.
func (x *spanIndex) names(service string) map[string]uint32 {
	byName, ok := x.groupIdx[service]
	if !ok {
		byName = map[string]uint32{}
		x.groupIdx[service] = byName
	}
	return byName
}

func (x *spanIndex) group(service string, byName map[string]uint32, name string) uint32 {
	g, ok := byName[name]
	if !ok {
		g = uint32(len(x.groups))
		byName[name] = g
		x.groups = append(x.groups, spanGroupAcc{service: service, name: name})
	}
	return g
}

// AddTraces adds one export request of spans.
func (a *Analyzer) AddTraces(at Arrival, td ptrace.Traces) {
	x := &a.spans
	ri := a.beginRequest(at, SignalSpans)
	n := 0
	e := &a.e
	for _, rs := range td.ResourceSpans().All() {
		res := describeResource(rs.Resource(), e)
		byName := x.names(res.service)
		for _, ss := range rs.ScopeSpans().All() {
			sh := scopeHash(ss.Scope(), e)
			for _, sp := range ss.Spans().All() {
				n++
				x.received++
				h := spanHash(e, res.hash, sh, sp)
				tid, sid := sp.TraceID(), sp.SpanID()
				// The request's digest covers the ids too: two requests
				// of different spans with the same content are no repeat.
				a.item(h)
				a.seq = append(a.seq, tid[:]...)
				a.seq = append(a.seq, sid[:]...)
				gi := x.group(res.service, byName, sp.Name())
				g := &x.groups[gi]
				g.received++
				if tid.IsEmpty() || sid.IsEmpty() {
					x.invalid++
					g.invalid++
					g.unique++
					continue
				}
				var k spanKey
				copy(k[:16], tid[:])
				copy(k[16:], sid[:])
				ent, seen := x.add(k, h, gi, ri)
				if !seen {
					g.unique++
					continue
				}
				// The id is counted in the group of its first copy.
				x.groups[ent.group].repeated(ent.copies)
			}
		}
	}
	a.endRequest(ri, n)
	// Double instrumentation: the detector holds what it needs (bounded),
	// ignores repeated ids, and pairs spans across requests.
	a.nested.Add(td)
}

func spanHash(e *enc, res, scope uint64, sp ptrace.Span) uint64 {
	e.Reset()
	e.U64(res)
	e.U64(scope)
	e.Str(sp.Name())
	e.U64(uint64(sp.Kind()))
	e.U64(uint64(sp.StartTimestamp()))
	e.U64(uint64(sp.EndTimestamp()))
	psid := sp.ParentSpanID()
	e.B = append(e.B, psid[:]...)
	e.Str(sp.TraceState().AsRaw())
	e.U64(uint64(sp.Flags()))
	e.U64(uint64(sp.Status().Code()))
	e.Str(sp.Status().Message())
	e.Attrs(sp.Attributes())
	e.U64(uint64(sp.DroppedAttributesCount()))
	ev := sp.Events()
	e.U64(uint64(ev.Len()))
	for _, x := range ev.All() {
		e.U64(uint64(x.Timestamp()))
		e.Str(x.Name())
		e.Attrs(x.Attributes())
	}
	e.U64(uint64(sp.DroppedEventsCount()))
	ls := sp.Links()
	e.U64(uint64(ls.Len()))
	for _, l := range ls.All() {
		t, s := l.TraceID(), l.SpanID()
		e.B = append(e.B, t[:]...)
		e.B = append(e.B, s[:]...)
		e.Str(l.TraceState().AsRaw())
		e.Attrs(l.Attributes())
	}
	e.U64(uint64(sp.DroppedLinksCount()))
	return e.sum()
}

// findingAcc gathers the extra copies that share a diagnosis and subject.
type findingAcc struct {
	subject string
	diag    Diagnosis
	items   int
	ids     map[string]struct{} // used for conflicting ids
	names   map[string]struct{}
	delays  []time.Duration
	repeats map[uint32]struct{} // later requests that repeat a whole earlier request
	peers   map[uint32]struct{}
	laters  map[uint32]struct{} // requests holding a later copy
	// An example: a later copy's request and its first copy's; with a
	// whole repeat, the first such pair.
	exFirst, exLater uint32
	exRepeat, hasEx  bool
}

func newFindingAcc(subject string, d Diagnosis) *findingAcc {
	return &findingAcc{
		subject: subject, diag: d,
		ids: map[string]struct{}{}, names: map[string]struct{}{},
		repeats: map[uint32]struct{}{},
		peers:   map[uint32]struct{}{},
		laters:  map[uint32]struct{}{},
	}
}

func (f *findingAcc) addCopy(a *Analyzer, first, later uint32, name string) {
	f.items++
	f.names[name] = struct{}{}
	if !a.opts.NoArrival {
		f.delays = append(f.delays, a.delay(first, later))
	}
	f.peers[a.reqs[first].peer] = struct{}{}
	f.peers[a.reqs[later].peer] = struct{}{}
	f.laters[later] = struct{}{}
	repeat := a.wholeRepeat(first, later)
	if repeat {
		f.repeats[later] = struct{}{}
	}
	if !f.hasEx || (repeat && !f.exRepeat) {
		f.exFirst, f.exLater, f.exRepeat, f.hasEx = first, later, repeat, true
	}
}

func (f *findingAcc) sortedNames() []string {
	ns := make([]string, 0, len(f.names))
	for n := range f.names {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func (f *findingAcc) delayRange() string {
	slices.Sort(f.delays)
	lo, hi := f.delays[0], f.delays[len(f.delays)-1]
	if lo == hi {
		return fmtDur(lo)
	}
	return fmtDur(lo) + "–" + fmtDur(hi)
}

// line renders the diagnosis of copies of spans or log records; what
// names the items ("spans", "records from scope").
func (f *findingAcc) line(a *Analyzer, sig Signal, what string) string {
	names := listNames(f.sortedNames(), 4)
	head := fmt.Sprintf("%s of %s: %s", sig, f.subject, plural(f.items, "extra copy", "extra copies"))
	if names != "" {
		head += " of " + what + " " + names
	}
	if a.opts.NoArrival {
		return f.lineUntimed(a, sig, head, names)
	}
	conns := plural(len(f.peers), "connection", "connections")
	switch f.diag {
	case DiagTwoExporters:
		return fmt.Sprintf("%s, identical, %s after the first, on %s: two exporters in one process (identical copies from one resource within the %s export interval)",
			head, f.delayRange(), conns, fmtDur(a.opts.ExportInterval))
	case DiagResentBatch:
		if len(f.repeats) > 0 {
			return fmt.Sprintf("%s, identical, %s after the first, later than the %s export interval; %s repeated an earlier request item for item: a re-sent batch (a whole request repeated)",
				head, f.delayRange(), fmtDur(a.opts.ExportInterval), plural(len(f.repeats), "request", "requests"))
		}
		return fmt.Sprintf("%s, identical, %s after the first, later than the %s export interval: a re-sent batch (a retry or replay)",
			head, f.delayRange(), fmtDur(a.opts.ExportInterval))
	default:
		return fmt.Sprintf("%s of %s: %s arrived again with different content (%s): an identity collision (independent writers share span ids)",
			sig, f.subject, plural(len(f.ids), "span id", "span ids"), names)
	}
}

// lineUntimed renders a finding of a source without arrival times or
// connections (files, trace backends): the facts are the requests that
// hold the copies and how they were batched.
func (f *findingAcc) lineUntimed(a *Analyzer, sig Signal, head, names string) string {
	in := plural(len(f.laters), "request", "requests")
	ex := fmt.Sprintf("e.g. %s repeats items of %s", a.where(f.exLater), a.where(f.exFirst))
	if f.exFirst == f.exLater {
		ex = fmt.Sprintf("e.g. %s holds one twice", a.where(f.exLater))
	}
	switch f.diag {
	case DiagTwoExporters:
		return fmt.Sprintf("%s, identical, in %s that %s no earlier request whole (%s): two exporters in one process (the same items batched twice, differently; the source records no arrival times)",
			head, in, pick(len(f.laters) == 1, "repeats", "repeat"), ex)
	case DiagResentBatch:
		ex = fmt.Sprintf("e.g. %s repeats %s item for item", a.where(f.exLater), a.where(f.exFirst))
		return fmt.Sprintf("%s, identical: %s repeated an earlier request item for item (%s): a re-sent batch, or two exporters that batched alike (the source records no arrival times to tell them apart)",
			head, plural(len(f.repeats), "request", "requests"), ex)
	default:
		return fmt.Sprintf("%s of %s: %s arrived again with different content (%s; %s): an identity collision (independent writers share span ids)",
			sig, f.subject, plural(len(f.ids), "span id", "span ids"), names, ex)
	}
}

func subjectOf(service string) string {
	if service == "" {
		return "a resource without service.name"
	}
	return fmt.Sprintf("service %q", service)
}

func (a *Analyzer) spanReport(r *Report) {
	x := &a.spans
	sr := &r.Spans
	sr.Received = x.received
	sr.InvalidIDs = x.invalid
	sr.Unique = len(x.entries) + x.invalid
	sr.ExtraCopies = len(x.dups)

	type gx struct {
		delays   []time.Duration
		examples map[spanKey]*SpanExample
		order    []spanKey
		conflict map[spanKey]struct{}
	}
	extra := make([]gx, len(x.groups))
	findings := findingSet{}
	conflicting := map[spanKey]struct{}{}
	for _, d := range x.dups {
		ent := x.entries[d.key]
		g := &extra[ent.group]
		acc := &x.groups[ent.group]
		dl := a.delay(ent.first, d.req)
		if !a.opts.NoArrival {
			g.delays = append(g.delays, dl)
		}
		differ := d.val != ent.val
		var diag Diagnosis
		if differ {
			diag = DiagIdentityCollision
			conflicting[d.key] = struct{}{}
			if g.conflict == nil {
				g.conflict = map[spanKey]struct{}{}
			}
			g.conflict[d.key] = struct{}{}
		} else {
			diag = a.classify(ent.first, d.req)
		}
		f := findings.get(diag, acc.service)
		f.addCopy(a, ent.first, d.req, acc.name)
		if differ {
			f.ids[string(d.key[:])] = struct{}{}
		}
		if g.examples == nil {
			g.examples = map[spanKey]*SpanExample{}
		}
		ex, ok := g.examples[d.key]
		if !ok && len(g.order) < a.opts.MaxExamples {
			ex = &SpanExample{TraceID: hex.EncodeToString(d.key[:16]), SpanID: hex.EncodeToString(d.key[16:]), Copies: int(ent.copies)}
			g.examples[d.key] = ex
			g.order = append(g.order, d.key)
		}
		if ex != nil && !a.opts.NoArrival {
			ex.Delays = append(ex.Delays, Millis(dl))
			ex.Differ = ex.Differ || differ
		}
	}
	sr.Conflicting = len(conflicting)
	for i, acc := range x.groups {
		sr.Duplicated += acc.duplicated
		sg := SpanGroup{
			Service: acc.service, Name: acc.name,
			Received: acc.received, Unique: acc.unique,
			Duplicated: acc.duplicated, ExtraCopies: acc.extra,
			Conflicting: len(extra[i].conflict),
		}
		sg.Copies, sg.Delays = copyCounts(acc.copies), delaysOrNil(extra[i].delays)
		for _, k := range extra[i].order {
			sg.Examples = append(sg.Examples, *extra[i].examples[k])
		}
		sr.Groups = append(sr.Groups, sg)
	}
	slices.SortFunc(sr.Groups, func(a, b SpanGroup) int {
		return cmp.Or(
			cmp.Compare(b.ExtraCopies, a.ExtraCopies),
			strings.Compare(a.Service, b.Service),
			strings.Compare(a.Name, b.Name),
		)
	})
	findings.report(a, r, SignalSpans, "spans")
}
