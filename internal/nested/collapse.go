package nested

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attributes Collapse sets on an outer span.
const (
	// AttrCollapsedScopeName is the removed inner span's scope name;
	// when several were collapsed into one span (three instrumentations),
	// their names in order, separated by commas.
	AttrCollapsedScopeName = "doubletake.collapsed.scope.name"
	// AttrCollapsedScopeVersion is the removed spans' scope versions,
	// aligned with AttrCollapsedScopeName ("" where there was none).
	AttrCollapsedScopeVersion = "doubletake.collapsed.scope.version"
	// AttrCollapsedSpans is how many spans were collapsed into this one.
	AttrCollapsedSpans = "doubletake.collapsed.spans"
)

// Defaults for NewState.
const (
	DefaultMaxRemap      = 10_000
	DefaultMaxReferenced = 100_000
)

// State is what Collapse remembers between batches. It is safe for
// concurrent use; Collapse holds it for the whole batch.
type State struct {
	mu sync.Mutex
	// remap: (trace, removed inner span id) -> the outer span id that
	// replaced it, so that children arriving in later batches are
	// re-parented too.
	remap *fifo[spanKey, pcommon.SpanID]
	// referenced: (trace, parent span id) of every span already passed
	// on. An inner span found here has children downstream that name it:
	// removing it would orphan them, so it is kept.
	referenced *fifo[spanKey, struct{}]
}

// NewState returns a State holding at most maxRemap removed span ids and
// maxReferenced parent ids of passed spans (oldest first out, counted);
// values below 1 take DefaultMaxRemap and DefaultMaxReferenced.
// Memory: about 100 bytes an entry.
func NewState(maxRemap, maxReferenced int) *State {
	if maxRemap < 1 {
		maxRemap = DefaultMaxRemap
	}
	if maxReferenced < 1 {
		maxReferenced = DefaultMaxReferenced
	}
	return &State{
		remap:      newFIFO[spanKey, pcommon.SpanID](maxRemap),
		referenced: newFIFO[spanKey, struct{}](maxReferenced),
	}
}

// StateStats are a State's sizes and evictions.
type StateStats struct {
	Remap             int    `json:"remap"`
	RemapEvicted      uint64 `json:"remap_evicted"` // a child arriving after its entry went keeps the removed parent id
	Referenced        int    `json:"referenced"`
	ReferencedEvicted uint64 `json:"referenced_evicted"` // past this window, earlier children are no longer protected
}

// Stats reports the State's sizes and evictions.
func (s *State) Stats() StateStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return StateStats{
		Remap:             s.remap.len(),
		RemapEvicted:      s.remap.evicted,
		Referenced:        s.referenced.len(),
		ReferencedEvicted: s.referenced.evicted,
	}
}

// Resolve returns the outer span that replaced a removed span, for
// rewriting the span id of log records or exemplars.
func (s *State) Resolve(trace pcommon.TraceID, span pcommon.SpanID) (pcommon.SpanID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remap.get(keyOf(trace, span))
}

// protects reports (and marks) an inner span that spans already passed
// on name as their parent.
func (s *State) protects(e *batchSpan) bool {
	if s == nil {
		return false
	}
	if _, ok := s.referenced.get(e.key); ok {
		e.kept = true
		return true
	}
	return false
}

// CollapsedGroup counts the spans collapsed for one Key.
type CollapsedGroup struct {
	Key
	Spans int `json:"spans"`
}

// CollapseResult says what Collapse changed.
type CollapseResult struct {
	Collapsed  int `json:"collapsed"`  // inner spans removed
	Reparented int `json:"reparented"` // spans of this batch re-parented from a removed span of this batch
	Remapped   int `json:"remapped"`   // spans of this batch re-parented from a span removed in an earlier batch (State)
	// KeptEarlierChildren counts nested duplicates left in place because
	// a span passed on in an earlier batch names the inner span as its
	// parent (State).
	KeptEarlierChildren int              `json:"kept_earlier_children"`
	Groups              []CollapsedGroup `json:"groups,omitempty"` // by Key, the largest first
}

// batchSpan is one span of the batch Collapse works on.
type batchSpan struct {
	span          ptrace.Span
	info          spanInfo
	key           spanKey
	valid         bool   // trace and span id set, and unique in the batch
	parent        int32  // the parent's index if it is in the batch (and unique), else -1
	parentInBatch bool   // the parent id occurs in the batch (unique or not)
	outer         int32  // the direct outer span if this is a flagged inner span, else -1
	by            string // how the pair was matched (ByMethod …)
	root          int32  // the outermost span it merges into
	depth         int32  // how many inner spans lie between it and root, itself included
	cyclic        bool   // its chain of outer spans loops: left alone
	kept          bool   // flagged, but kept for children of an earlier batch
	visited       uint8  // resolveChains: unvisited, onPath or resolved
}

// batchSpan.visited states.
const (
	unvisited uint8 = iota
	onPath
	resolved
)

// collapse is one Collapse call's work: the batch's spans and what it found.
type collapse struct {
	o     Options
	st    *State // nil: no memory across batches
	spans []batchSpan
	idx   map[spanKey]int32 // span id → index in spans; -1 for an id that occurs twice
	res   CollapseResult
}

// Collapse removes, from td, the inner span of every nested duplicate
// whose two spans are both in td, and returns what it did. For each one:
//
//   - the outer span gains the inner span's attributes it lacks (it never
//     loses or changes one of its own), the inner span's events and links
//     it does not already have, the inner span's status if its own is
//     unset, and AttrCollapsedScopeName, AttrCollapsedScopeVersion and
//     AttrCollapsedSpans; a pair matched ByMethod (outer named only "GET")
//     gives the outer span the inner span's name, which carries the route;
//   - every span of td whose parent was the inner span gets the outer span
//     as its parent; chains (three instrumentations) collapse into the
//     outermost span;
//   - with st, the removed id is remembered so that spans of later batches
//     naming it as parent are re-parented to the outer span too, and an
//     inner span that spans of an earlier batch already name as parent is
//     kept (removing it would orphan them): KeptEarlierChildren.
//
// Only flagged inner spans are removed, so td's span count drops by
// exactly Collapsed. Spans with an all-zero id, and ids that occur more
// than once in td, are never removed and never serve as the outer span.
// ScopeSpans and ResourceSpans emptied by the removal are removed.
//
// When it is not safe (see docs/nested.md):
//   - without st, or past its window, children exported in an EARLIER
//     batch than their inner span keep pointing at the removed span and
//     show as orphans; log records and exemplars carrying the inner span
//     id dangle unless rewritten with State.Resolve;
//   - links from other spans to the inner span id dangle;
//   - spans sampled, aggregated or counted before Collapse (span-metrics,
//     service graphs, tail sampling placed earlier) still saw both spans,
//     and span-metrics placed after it lose the inner scope's series;
//   - State is per instance: across gateways it holds only when spans are
//     routed by trace id.
//
// td must be mutable.
func Collapse(td ptrace.Traces, opts Options, st *State) CollapseResult {
	c := &collapse{o: opts.withDefaults(), st: st}
	if st != nil {
		st.mu.Lock()
		defer st.mu.Unlock()
	}
	c.index(td)
	c.flagParents()
	c.flagSiblings()
	for i := range c.spans {
		if c.spans[i].kept {
			c.res.KeptEarlierChildren++
		}
	}
	inners := c.resolveChains()
	if len(inners) == 0 && st == nil {
		return c.res
	}
	groups := map[Key]int{}
	c.merge(inners, groups)
	c.reparent()
	if st != nil {
		c.remember(inners)
	}
	if len(inners) > 0 {
		c.remove(td)
	}
	for k, n := range groups {
		c.res.Groups = append(c.res.Groups, CollapsedGroup{Key: k, Spans: n})
	}
	slices.SortFunc(c.res.Groups, func(a, b CollapsedGroup) int {
		return cmp.Or(cmp.Compare(b.Spans, a.Spans), a.compare(b.Key))
	})
	return c.res
}

// index lists every span of td, in order, and indexes them by their ids.
// An id that occurs twice makes both spans invalid: they are left alone.
func (c *collapse) index(td ptrace.Traces) {
	nspans := td.SpanCount()
	c.spans = make([]batchSpan, 0, nspans)
	c.idx = make(map[spanKey]int32, nspans)
	in := interner{max: 256}
	for _, rs := range td.ResourceSpans().All() {
		svc := in.str(serviceName(rs.Resource()))
		for _, ss := range rs.ScopeSpans().All() {
			scope := Scope{Name: in.str(ss.Scope().Name()), Version: in.str(ss.Scope().Version())}
			for _, sp := range ss.Spans().All() {
				e := batchSpan{span: sp, parent: -1, outer: -1, root: -1}
				tid, sid := sp.TraceID(), sp.SpanID()
				if !tid.IsEmpty() && !sid.IsEmpty() {
					e.key = keyOf(tid, sid)
					e.valid = true
					e.info = readSpan(svc, scope, sp, &in)
					i := int32(len(c.spans))
					if _, dup := c.idx[e.key]; dup {
						c.idx[e.key] = -1
					} else {
						c.idx[e.key] = i
					}
				}
				c.spans = append(c.spans, e)
			}
		}
	}
	for i := range c.spans {
		e := &c.spans[i]
		if e.valid && c.idx[e.key] < 0 {
			e.valid = false // an id that occurs twice: leave both alone
		}
	}
}

// flagParents links every span to its parent in the batch and flags it as
// the inner span when it and its parent are a nested duplicate.
func (c *collapse) flagParents() {
	for i := range c.spans {
		e := &c.spans[i]
		tid, psid := e.span.TraceID(), e.span.ParentSpanID()
		if tid.IsEmpty() || psid.IsEmpty() || psid == e.span.SpanID() {
			continue
		}
		p, ok := c.idx[keyOf(tid, psid)]
		if !ok {
			continue
		}
		e.parentInBatch = true
		if p < 0 {
			continue
		}
		e.parent = p
		if !e.valid || !c.spans[p].valid {
			continue
		}
		by, ok := c.o.match(&c.spans[p].info, &e.info)
		if !ok {
			continue
		}
		if c.st.protects(e) {
			continue
		}
		e.outer, e.by = p, by
	}
}

// flagSiblings flags, among SERVER siblings under one parent (at most
// MaxSiblings of them), the contained one of a nested duplicate as the
// inner span.
func (c *collapse) flagSiblings() {
	sibs := make(map[spanKey][]int32)
	var sibOrder []spanKey
	for i := range c.spans {
		e := &c.spans[i]
		if !e.valid || e.info.kind != ptrace.SpanKindServer {
			continue
		}
		psid := e.span.ParentSpanID()
		if psid.IsEmpty() || psid == e.span.SpanID() {
			continue
		}
		pk := keyOf(e.span.TraceID(), psid)
		l, seen := sibs[pk]
		if !seen {
			sibOrder = append(sibOrder, pk)
		}
		if len(l) < MaxSiblings {
			sibs[pk] = append(l, int32(i))
		}
	}
	for _, pk := range sibOrder {
		l := sibs[pk]
		for j := 0; j < len(l); j++ {
			for k := j + 1; k < len(l); k++ {
				a, b := l[j], l[k]
				outerIsA, by, ok := c.o.matchSibling(&c.spans[a].info, &c.spans[b].info)
				if !ok {
					continue
				}
				if !outerIsA {
					a, b = b, a
				}
				e := &c.spans[b]
				if e.outer >= 0 || c.st.protects(e) {
					continue
				}
				e.outer, e.by = a, by
			}
		}
	}
}

// resolveChains gives every flagged inner span its outermost span (root)
// and depth below it, so that three instrumentations collapse into one
// span; a chain that loops is unflagged and left alone. It returns the
// inner spans to remove.
func (c *collapse) resolveChains() []int32 {
	ents := c.spans
	var path []int32
	for i := range ents {
		if ents[i].outer < 0 || ents[i].visited == resolved {
			continue
		}
		path = path[:0]
		cur := int32(i)
		for ents[cur].outer >= 0 && ents[cur].visited == unvisited {
			ents[cur].visited = onPath
			path = append(path, cur)
			cur = ents[cur].outer
		}
		var root, depth int32
		cyclic := false
		switch e := &ents[cur]; {
		case e.outer < 0:
			root = cur
		case e.visited == onPath || e.cyclic:
			cyclic = true
		default:
			root, depth = e.root, e.depth
		}
		for j := len(path) - 1; j >= 0; j-- {
			e := &ents[path[j]]
			e.visited = resolved
			if cyclic {
				e.cyclic = true
				continue
			}
			depth++
			e.root, e.depth = root, depth
		}
	}
	var inners []int32
	for i := range ents {
		if ents[i].outer < 0 {
			continue
		}
		if ents[i].cyclic {
			ents[i].outer = -1
			continue
		}
		inners = append(inners, int32(i))
	}
	return inners
}

// merge merges each inner span into its outermost span, outer ones first,
// and counts them by Key in groups.
func (c *collapse) merge(inners []int32, groups map[Key]int) {
	ents := c.spans
	slices.SortStableFunc(inners, func(a, b int32) int { return cmp.Compare(ents[a].depth, ents[b].depth) })
	for _, i := range inners {
		e := &ents[i]
		r := &ents[e.root]
		if (e.by == ByMethod && methodOnly(&r.info) && !methodOnly(&e.info) || renamedByPath(e.by, &r.info, &e.info)) && r.span.Name() == r.info.name {
			r.span.SetName(e.span.Name())
		}
		mergeInto(r.span, e.span, e.info.scope)
		d := &ents[e.outer]
		groups[Key{
			Service:    d.info.service,
			Kind:       kindName(d.info.kind),
			Name:       pairName(d.info.name, d.info.route, e.info.name, e.by),
			OuterScope: d.info.scope,
			InnerScope: e.info.scope,
		}]++
		c.res.Collapsed++
	}
}

// reparent gives the children of removed spans the outermost span as
// parent: from this batch directly, from earlier batches through State.
func (c *collapse) reparent() {
	ents := c.spans
	for i := range ents {
		e := &ents[i]
		if e.outer >= 0 {
			continue
		}
		tid, psid := e.span.TraceID(), e.span.ParentSpanID()
		if tid.IsEmpty() || psid.IsEmpty() {
			continue
		}
		switch {
		case e.parent >= 0 && ents[e.parent].outer >= 0:
			e.span.SetParentSpanID(ents[ents[e.parent].root].span.SpanID())
			c.res.Reparented++
		case !e.parentInBatch && c.st != nil:
			if to, ok := c.st.remap.get(keyOf(tid, psid)); ok {
				e.span.SetParentSpanID(to)
				c.res.Remapped++
			}
		}
	}
}

// remember records, for later batches, where each removed span went and
// which parent ids the spans passed on name.
func (c *collapse) remember(inners []int32) {
	ents := c.spans
	for _, i := range inners {
		e := &ents[i]
		c.st.remap.put(e.key, ents[e.root].span.SpanID())
	}
	for i := range ents {
		e := &ents[i]
		if e.outer >= 0 {
			continue
		}
		tid, psid := e.span.TraceID(), e.span.ParentSpanID()
		if !tid.IsEmpty() && !psid.IsEmpty() {
			c.st.referenced.put(keyOf(tid, psid), struct{}{})
		}
	}
}

// remove removes the inner spans from td, visiting spans in the order of
// index, and the ScopeSpans and ResourceSpans that leaves empty.
func (c *collapse) remove(td ptrace.Traces) {
	n := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		scopes := rs.ScopeSpans().Len()
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			before := ss.Spans().Len()
			ss.Spans().RemoveIf(func(ptrace.Span) bool {
				drop := c.spans[n].outer >= 0
				n++
				return drop
			})
			return before > 0 && ss.Spans().Len() == 0
		})
		return scopes > 0 && rs.ScopeSpans().Len() == 0
	})
}

// mergeInto gives outer what inner has and outer lacks; see Collapse.
func mergeInto(outer, inner ptrace.Span, scope Scope) {
	oa := outer.Attributes()
	for k, v := range inner.Attributes().All() {
		if _, ok := oa.Get(k); !ok {
			v.CopyTo(oa.PutEmpty(k))
		}
	}
	appendList(oa, AttrCollapsedScopeName, scope.Name)
	appendList(oa, AttrCollapsedScopeVersion, scope.Version)
	n := int64(1)
	if v, ok := oa.Get(AttrCollapsedSpans); ok && v.Type() == pcommon.ValueTypeInt && v.Int() > 0 && v.Int() < math.MaxInt64 {
		n += v.Int()
	}
	oa.PutInt(AttrCollapsedSpans, n)

	if outer.Status().Code() == ptrace.StatusCodeUnset && inner.Status().Code() != ptrace.StatusCodeUnset {
		inner.Status().CopyTo(outer.Status())
	}

	oe := outer.Events()
	type evKey struct {
		name string
		ts   pcommon.Timestamp
	}
	haveEv := make(map[evKey]bool, oe.Len())
	for _, ev := range oe.All() {
		haveEv[evKey{ev.Name(), ev.Timestamp()}] = true
	}
	for _, ev := range inner.Events().All() {
		if !haveEv[evKey{ev.Name(), ev.Timestamp()}] {
			ev.CopyTo(oe.AppendEmpty())
		}
	}
	ol := outer.Links()
	haveLink := make(map[spanKey]bool, ol.Len())
	for _, l := range ol.All() {
		haveLink[keyOf(l.TraceID(), l.SpanID())] = true
	}
	for _, l := range inner.Links().All() {
		if !haveLink[keyOf(l.TraceID(), l.SpanID())] {
			l.CopyTo(ol.AppendEmpty())
		}
	}
	outer.SetDroppedAttributesCount(addSat(outer.DroppedAttributesCount(), inner.DroppedAttributesCount()))
	outer.SetDroppedEventsCount(addSat(outer.DroppedEventsCount(), inner.DroppedEventsCount()))
	outer.SetDroppedLinksCount(addSat(outer.DroppedLinksCount(), inner.DroppedLinksCount()))
}

// appendList sets m[k] to v, or appends ","+v to the string already there.
func appendList(m pcommon.Map, k, v string) {
	if old, ok := m.Get(k); ok && old.Type() == pcommon.ValueTypeStr {
		m.PutStr(k, old.Str()+","+v)
		return
	}
	m.PutStr(k, v)
}

func addSat(a, b uint32) uint32 {
	if a > math.MaxUint32-b {
		return math.MaxUint32
	}
	return a + b
}
