package dedupprocessor

import (
	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/journal"
)

// StorageSalvaged is what SalvageStorage found of the processor's
// storage: its span and log journals and the seed their log digests
// depend on.
type StorageSalvaged struct {
	Spans, Logs journal.Salvaged
	// SeedLost says the stored seed was not found: log digests of the
	// journal and the metric streams' ids cannot be compared with new
	// ones, so the log segments and the metrics snapshot are left out.
	SeedLost bool
}

// Lost says whether anything the processor stored was not salvaged.
func (s StorageSalvaged) Lost() bool {
	return s.SeedLost || s.Spans.Lost > 0 || s.Logs.Lost > 0 || s.Spans.MetaLost || s.Logs.MetaLost
}

// SalvageStorage rebuilds the records the processor keeps in its
// storage client from what a damaged file still holds: copies(key)
// returns every value found for key (the reachable one first), keys
// every key found. It returns the records to store.
func SalvageStorage(copies func(key string) [][]byte, keys []string) (map[string][]byte, StorageSalvaged) {
	var r StorageSalvaged
	out := map[string][]byte{}
	if vs := copies("seed"); len(vs) > 0 && len(vs[0]) == 32 {
		out["seed"] = vs[0] // written once
	} else {
		r.SeedLost = true
	}
	if vs := copies(metricsSnapshotKey); len(vs) > 0 && !r.SeedLost {
		out[metricsSnapshotKey] = vs[0] // the reachable one, or a stale one: an earlier election, re-run
	}
	spans, rs := journal.Salvage("traces/", spanRecord, copies, keys)
	r.Spans = rs
	for k, v := range spans {
		out[k] = v
	}
	if !r.SeedLost {
		logs, rl := journal.Salvage("logs/", logRecord, copies, keys)
		r.Logs = rl
		for k, v := range logs {
			out[k] = v
		}
	}
	return out, r
}

// SalvageJournal is SalvageStorage in the shared terms of
// internal/recovered, for the data dir's salvage (internal/datadir).
func SalvageJournal(copies func(key string) [][]byte, keys []string) (map[string][]byte, recovered.Journal) {
	out, r := SalvageStorage(copies, keys)
	return out, recovered.Journal{
		SpanSegments: r.Spans.Segments, LogSegments: r.Logs.Segments,
		SpansLost: r.Spans.Lost, LogsLost: r.Logs.Lost,
		Entries:  r.Spans.Entries + r.Logs.Entries,
		SeedLost: r.SeedLost, SpansMetaLost: r.Spans.MetaLost, LogsMetaLost: r.Logs.MetaLost,
	}
}
