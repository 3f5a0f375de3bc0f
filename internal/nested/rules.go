package nested

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// unlisted is rec.innerF of the inner span of a pair whose key was not
// listed (MaxFindings).
const unlisted = -2

type findingAcc struct {
	key         Key
	innerName   string
	by          string
	traces, occ int
	siblings    int
	affected    int
	examples    []Example
}

type traceMark struct {
	trace   pcommon.TraceID
	finding int32
}

func (d *Detector) eval(ps, cs int32, out []Pair) []Pair {
	p, c := &d.recs[ps], &d.recs[cs]
	if c.innerF != -1 {
		return out
	}
	pi, ci := p.info(), c.info()
	by, ok := d.o.match(&pi, &ci)
	if !ok {
		return out
	}
	return d.record(p, c, by, false, out)
}

// evalSibling compares a held SERVER span with a new sibling.
func (d *Detector) evalSibling(held, added int32, out []Pair) []Pair {
	a, b := &d.recs[held], &d.recs[added]
	ai, bi := a.info(), b.info()
	outerIsA, by, ok := d.o.matchSibling(&ai, &bi)
	if !ok {
		return out
	}
	if !outerIsA {
		a, b = b, a
	}
	if b.innerF != -1 {
		return out
	}
	return d.record(a, b, by, true, out)
}

func (d *Detector) record(p, c *rec, by string, sibling bool, out []Pair) []Pair {
	d.st.Pairs++
	key := Key{
		Service:    p.src.service,
		Kind:       kindName(p.kind),
		Name:       pairName(p.name, p.route, c.name, by), // pathname.go
		OuterScope: p.src.scope,
		InnerScope: c.src.scope,
	}
	tid := c.key.traceID()
	pair := Pair{Key: key, InnerName: c.name, MatchedBy: by, Sibling: sibling, TraceID: tid, Outer: p.key.spanID(), Inner: c.key.spanID()}
	fi, ok := d.findIdx[key]
	if !ok && len(d.finds) >= MaxFindings {
		d.st.UnlistedPairs++
		c.innerF = unlisted
		return append(out, pair)
	}
	if !ok {
		fi = int32(len(d.finds))
		d.findIdx[key] = fi
		f := &findingAcc{key: key, by: by}
		if c.name != p.name {
			f.innerName = c.name
		}
		d.finds = append(d.finds, f)
	}
	f := d.finds[fi]
	f.occ++
	if sibling {
		f.siblings++
	}
	if d.marks.put(traceMark{tid, fi}, struct{}{}) {
		f.traces++
	}
	if c.kind == p.kind {
		f.affected++
	}
	c.innerF = fi
	if p.innerF != fi && p.outerF != fi {
		f.affected++
	}
	p.outerF = fi
	if len(f.examples) < d.o.MaxExamples {
		f.examples = append(f.examples, Example{
			TraceID:     tid.String(),
			OuterSpanID: pair.Outer.String(),
			InnerSpanID: pair.Inner.String(),
		})
	}
	return append(out, pair)
}

// Findings are the aggregated findings so far, the most frequent first.
func (d *Detector) Findings() []Finding {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.findings()
}

// Stats are the counters so far.
func (d *Detector) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats()
}

// Report is Findings and Stats taken together.
func (d *Detector) Report() Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Report{Findings: d.findings(), Stats: d.stats()}
}

func (d *Detector) stats() Stats {
	s := d.st
	s.Held = int(d.n)
	s.Bytes = d.bytes
	s.TraceMarksEvicted = int(d.marks.evicted)
	return s
}

func (d *Detector) findings() []Finding {
	out := make([]Finding, 0, len(d.finds))
	for _, a := range d.finds {
		f := Finding{
			Key:           a.key,
			InnerName:     a.innerName,
			MatchedBy:     a.by,
			Traces:        a.traces,
			Occurrences:   a.occ,
			Siblings:      a.siblings,
			AffectedSpans: a.affected,
			Examples:      slices.Clone(a.examples),
		}
		for k, n := range d.kinds {
			if k.service == a.key.Service && kindName(k.kind) == a.key.Kind {
				f.KindSpans += *n
			}
		}
		if f.KindSpans > 0 {
			f.Share = float64(f.AffectedSpans) / float64(f.KindSpans)
		}
		f.Diagnosis = Diagnosis(f)
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(b.Occurrences, a.Occurrences), a.compare(b.Key))
	})
	return out
}
