package recovered

// Journal is what a salvage found of the records the dedup processor
// keeps in its storage client: its span and log journals and the seed
// their log digests depend on.
type Journal struct {
	// SpanSegments and LogSegments were read whole; SpansLost and
	// LogsLost were not.
	SpanSegments, LogSegments int
	SpansLost, LogsLost       int
	// Entries the salvaged segments hold, spans and log records.
	Entries int
	// SeedLost says the stored seed was not found; SpansMetaLost and
	// LogsMetaLost that a journal's meta record was not (its range was
	// taken from the segments found).
	SeedLost, SpansMetaLost, LogsMetaLost bool
}

// JournalSalvager rebuilds the dedup processor's records from what a
// damaged storage file still holds: copies(key) returns every value found
// for key (the reachable one first), keys every key found. It returns the
// records to store. The processor provides it (dedupprocessor's
// SalvageJournal); internal/datadir, which salvages every storage file of
// the data dir, is given it rather than knowing the processor's insides.
type JournalSalvager func(copies func(key string) [][]byte, keys []string) (map[string][]byte, Journal)
