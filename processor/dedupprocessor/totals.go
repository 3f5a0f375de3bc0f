package dedupprocessor

import "sync/atomic"

// atomicTotals are a signal's running totals, for the summary log.
type atomicTotals struct {
	received, duplicates, conflicts, invalid atomic.Int64
}

type totals struct {
	received, duplicates, conflicts, invalid int64
}

func (a *atomicTotals) add(c []counts) {
	var t totals
	for i := range c {
		t.received += c[i].received
		t.duplicates += c[i].duplicates
		t.conflicts += c[i].conflicts
		t.invalid += c[i].invalid
	}
	a.received.Add(t.received)
	a.duplicates.Add(t.duplicates)
	a.conflicts.Add(t.conflicts)
	a.invalid.Add(t.invalid)
}

func (a *atomicTotals) load() totals {
	return totals{a.received.Load(), a.duplicates.Load(), a.conflicts.Load(), a.invalid.Load()}
}

func (t totals) sub(o totals) totals {
	return totals{t.received - o.received, t.duplicates - o.duplicates, t.conflicts - o.conflicts, t.invalid - o.invalid}
}
