package analyze

// This file is what the span and log paths share: items counted by key (a
// span's ids, a log record's digest) with a value kept from the first copy
// (a span's content hash; nothing for a log record), the counts of a group
// of them, and the findings they make.

// copyEntry is the first copy of a key: its value, its group, the request
// it came in and how many copies came.
type copyEntry[V any] struct {
	val    V
	group  uint32
	first  uint32 // request index of the first copy
	copies uint32
}

// copyDup is a later copy of key: its value and the request it came in.
type copyDup[K comparable, V any] struct {
	key K
	val V
	req uint32
}

// copyIndex holds every key's first copy and every later copy, in arrival
// order.
type copyIndex[K comparable, V any] struct {
	entries map[K]copyEntry[V]
	dups    []copyDup[K, V]
}

func (x *copyIndex[K, V]) init() { x.entries = map[K]copyEntry[V]{} }

// add counts a copy of key k with value v, of group gi, in request ri. It
// returns k's entry and whether k came before (the entry then counts this
// copy, and the copy is among the dups).
func (x *copyIndex[K, V]) add(k K, v V, gi, ri uint32) (copyEntry[V], bool) {
	ent, seen := x.entries[k]
	if !seen {
		ent = copyEntry[V]{val: v, group: gi, first: ri, copies: 1}
		x.entries[k] = ent
		return ent, false
	}
	ent.copies++
	x.entries[k] = ent
	x.dups = append(x.dups, copyDup[K, V]{key: k, val: v, req: ri})
	return ent, true
}

// groupCounts are a group's items: received, unique, duplicated (keys that
// came more than once), the extra copies and how many keys came how many
// times (copies > 1).
type groupCounts struct {
	received   int
	unique     int
	duplicated int
	extra      int
	copies     map[uint32]int
}

// repeated counts a later copy of a key of the group, its copies-th.
func (g *groupCounts) repeated(copies uint32) {
	g.extra++
	if copies == 2 {
		g.duplicated++
	}
	if g.copies == nil {
		g.copies = map[uint32]int{}
	}
	if copies > 2 {
		g.copies[copies-1]--
	}
	g.copies[copies]++
}

// findingSet is a signal's findings, one per diagnosis and service.
type findingSet map[findingKey]*findingAcc

type findingKey struct {
	diag    Diagnosis
	service string
}

// get returns the finding of diag for service, made when new.
func (fs findingSet) get(diag Diagnosis, service string) *findingAcc {
	fk := findingKey{diag, service}
	f := fs[fk]
	if f == nil {
		f = newFindingAcc(subjectOf(service), diag)
		fs[fk] = f
	}
	return f
}

// report adds the findings to r, their lines naming the items what.
func (fs findingSet) report(a *Analyzer, r *Report, sig Signal, what string) {
	for _, f := range fs {
		r.Findings = append(r.Findings, Finding{
			Signal: sig, Diagnosis: f.diag, Subject: f.subject,
			Items: f.items, Line: f.line(a, sig, what),
		})
	}
}
