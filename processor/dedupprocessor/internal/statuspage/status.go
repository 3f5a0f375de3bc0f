package statuspage

import (
	"sort"
	"strconv"
	"time"

	"github.com/doubletake/doubletake/internal/buildinfo"
	"github.com/doubletake/doubletake/internal/nested"
	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// Status is what the page and its JSON show. Names are cleaned: control
// characters escaped, at most NameBytes bytes.
type Status struct {
	Header    Header          `json:"header"`
	Generated time.Time       `json:"generated"`
	MaxRows   int             `json:"max_rows"`
	Services  []ServiceStatus `json:"services"`
	// ServicesNotShown counts services past max_rows.
	ServicesNotShown int            `json:"services_not_shown"`
	Streams          []StreamStatus `json:"streams"`
	StreamsNotShown  int            `json:"streams_not_shown"`
	// StreamsRefused counts events of streams past status.max_streams,
	// which are never shown.
	StreamsRefused int64 `json:"streams_refused"`
	// NestedDetect says whether traces.nested.detect is on; Nested are its
	// findings by service and scope pair, most spans first.
	NestedDetect   bool            `json:"nested_detect"`
	Nested         []NestedStatus  `json:"nested"`
	NestedNotShown int             `json:"nested_not_shown"`
	Windows        []WindowStatus  `json:"windows"`
	Memory         MemoryStatus    `json:"memory"`
	Journals       []JournalStatus `json:"journals,omitempty"`
	// Queues are the sending queues of the exporters after dedup that
	// report them (dedup_otlp_grpc, dedup_otlp_http).
	Queues []QueueStatus `json:"queues"`
	// Storage is what was found damaged under the data dir at start;
	// shown until the process exits.
	Storage []StorageStatus `json:"storage_recovered,omitempty"`
	// DataDirs are the storage extensions' data dirs that report their
	// room (log_storage): full while new data is refused.
	DataDirs []DataDirStatus `json:"data_dirs,omitempty"`
	// WriterRules are the metric writers decided by a rule rather than a
	// pair's bounds (metrics.overlap auto only).
	WriterRules *WriterRulesStatus `json:"writer_rules,omitempty"`
}

// WriterRulesStatus counts the later chains of delta streams judged now,
// by class (copies dropped, peers kept as their own series, undecided ones
// held: the counts verify and audit give), and, since start, the quiet
// peers (undecided writers that went quiet while the elected writer went
// on), the streams whose writers shared one start that were split into
// their own series, the points of a shared start that could not be split,
// the streams split now, and the delta points that continued their writer's
// chain (a next interval overtaking its previous one, or a late one filling
// a gap), that went on from their chain across intervals their writer sent
// nothing for, and of those the ones across intervals known empty.
type WriterRulesStatus struct {
	DeltaCopies    int    `json:"delta_copies"`
	DeltaPeers     int    `json:"delta_peers"`
	DeltaUndecided int    `json:"delta_undecided"`
	QuietPeers     uint64 `json:"quiet_peers"`
	SharedSplit    uint64 `json:"shared_start_split"`
	SharedUnsplit  uint64 `json:"shared_start_unsplit"`
	SharedNow      int    `json:"shared_start_streams"`
	DeltaContinued uint64 `json:"delta_continued"`
	DeltaAcrossGap uint64 `json:"delta_across_gap"`
	DeltaEmpty     uint64 `json:"delta_empty_intervals"`
}

// DataDirStatus is one storage extension's data dir.
type DataDirStatus struct {
	Directory string `json:"directory"`
	// Full: new data is refused (retryably) for lack of room; the
	// queues drain and what they took is kept.
	Full bool `json:"full"`
	// FreeBytes is the room on its filesystem, -1 when not known.
	FreeBytes     int64    `json:"free_bytes"`
	FullClients   []string `json:"full_clients,omitempty"`
	RefusedWrites int64    `json:"refused_writes"`
	Line          string   `json:"line,omitempty"`
}

// NestedStatus is one service's nested duplicates (double
// instrumentation) of one scope pair.
type NestedStatus struct {
	Service    string `json:"service"`
	OuterScope string `json:"outer_scope"`
	InnerScope string `json:"inner_scope"`
	// Spans counts nested duplicates found (action counted) or inner
	// spans removed (collapsed).
	Spans  int64  `json:"spans"`
	Action string `json:"action"`
	// Kind and Name are the latest outer span's.
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	LastSeen  time.Time `json:"last_seen"`
	Diagnosis string    `json:"diagnosis"`
}

// ServiceStatus is one service's spans or log records.
type ServiceStatus struct {
	Service   string    `json:"service"`
	Signal    string    `json:"signal"`
	Received  int64     `json:"received"`
	Copies    int64     `json:"copies"`
	Share     float64   `json:"duplicate_share"`
	Action    string    `json:"action"` // dropped or passed (detect mode)
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Diagnosis string    `json:"diagnosis,omitempty"`
	// Release is the release known to export twice that ReleaseCopies of
	// the copies named as their instrumentation scope ("fastapi
	// 0.142.4"), Fix the advice verify gives for it; Diagnosis then
	// names it with that advice.
	Release       string `json:"release,omitempty"`
	ReleaseCopies int64  `json:"release_copies,omitempty"`
	Fix           string `json:"fix,omitempty"`
}

// StreamStatus is one metric stream with more than one writer.
type StreamStatus struct {
	Service string `json:"service"`
	Metric  string `json:"metric"`
	// Attributes are the point attributes of the stream's first notable
	// point, sorted by key ("key=value, ..."), cut after 512 bytes.
	Attributes   string     `json:"attributes"`
	ElectedStart *time.Time `json:"elected_start,omitempty"`
	OtherStart   *time.Time `json:"other_start,omitempty"`
	Points       int64      `json:"points"`
	Elections    int64      `json:"elections"`
	Event        string     `json:"event"`
	Action       string     `json:"action"`
	FirstSeen    time.Time  `json:"first_seen"`
	LastSeen     time.Time  `json:"last_seen"`
	Diagnosis    string     `json:"diagnosis"`
	// Class and Evidence, with metrics.overlap auto: what the other writer
	// is (undecided, copy, peer) and why, judged from the values.
	Class    string `json:"class,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	// Release is the release known to export twice whose scope the copy's
	// requests carry (FastAPI 0.142.x's reader exports the app's meters
	// beside its own): Diagnosis then gives verify's advice for it.
	Release string `json:"release,omitempty"`
}

// Header is who serves the page: the build's version and commit, when the
// process started and how long ago, the page's endpoint and the upstreams
// the exporters after dedup send to.
type Header struct {
	Version string `json:"version"`
	// Commit is the revision the build was made from ("" when unknown);
	// Modified says it had uncommitted changes.
	Commit        string    `json:"commit,omitempty"`
	Modified      bool      `json:"modified,omitempty"`
	Started       time.Time `json:"started"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	Endpoint      string    `json:"status_endpoint"`
	Upstreams     []string  `json:"upstreams,omitempty"`
}

// Build is the version and commit as the page shows them: "v1.2.3 (commit
// 0123456789ab)", as internal/buildinfo writes them.
func (h Header) Build() string {
	return buildinfo.Info{Version: h.Version, Commit: h.Commit, Modified: h.Modified}.String()
}

// WindowStatus is one signal's state.
type WindowStatus struct {
	Signal  string  `json:"signal"`
	Entries int     `json:"entries"`
	Limit   int     `json:"limit"`
	Fill    float64 `json:"fill"`
	// Effective is how far back the window reaches: the configured window
	// unless capacity or memory evictions made it shorter (Short).
	Effective  float64 `json:"effective_window_seconds"`
	Configured float64 `json:"configured_window_seconds"` // metrics: max_stale
	Short      bool    `json:"shorter_than_configured"`
	// NotFull: the bound is not limiting: nothing evicted yet; for the
	// metric signal, fewer streams than metrics.max_streams (Limit).
	NotFull bool `json:"not_full"`
	// Streams: the metric signal, whose entries are streams. It keeps a
	// stream until the stream has been idle for metrics.max_stale
	// (Effective, Configured) and never evicts one: past max_streams new
	// streams pass unjudged.
	Streams bool `json:"entries_are_streams,omitempty"`
	// OldestAge is the age of the oldest entry held (0 when empty); absent
	// for the metric signal, which holds streams by when they were last
	// written to, not by arrival.
	OldestAge *float64 `json:"oldest_entry_age_seconds,omitempty"`
	Evicted   uint64   `json:"evicted_capacity"`
	Shrunk    uint64   `json:"evicted_shrink"`
	Expired   uint64   `json:"expired"`
}

// MemoryStatus is the process against memory_soft_limit_mib.
type MemoryStatus struct {
	ResidentMiB  uint64 `json:"resident_mib"`
	SoftLimitMiB int    `json:"soft_limit_mib"` // 0: off
	Pressure     bool   `json:"pressure"`
}

// JournalStatus is one stored window's journal.
type JournalStatus struct {
	Signal   string `json:"signal"`
	Segments int    `json:"segments"`
	Limit    int    `json:"limit"`
}

// QueueStatus is one sending queue after dedup, as its exporter reports it.
type QueueStatus struct {
	Exporter string  `json:"exporter"`
	Signal   string  `json:"signal"`
	Sizer    string  `json:"sizer"` // bytes, items or requests
	Size     int64   `json:"size"`
	Capacity int64   `json:"capacity"`
	Fill     float64 `json:"fill"`
	// Upstream is where the exporter sends, and whether it takes what it
	// is sent; nil for an exporter that says nothing of it.
	Upstream *upstreamhealth.Snapshot `json:"upstream,omitempty"`
}

// Snapshot is what the processor hands the page: every row it has, in
// any order, names as the data gave them. Each of the processor's parts
// copies its rows under its own lock.
type Snapshot func(now time.Time) Status

// bound makes a snapshot what the page shows: names cleaned, each table
// worst first and cut at maxRows, saying how many more there are.
func (s *Status) bound(maxRows int) {
	s.MaxRows = maxRows
	for i := range s.Services {
		s.Services[i].Service = CleanName(s.Services[i].Service)
		s.Services[i].Release = CleanName(s.Services[i].Release)
	}
	sort.SliceStable(s.Services, func(i, j int) bool {
		a, b := s.Services[i], s.Services[j]
		if a.Copies != b.Copies {
			return a.Copies > b.Copies
		}
		if a.Share != b.Share {
			return a.Share > b.Share
		}
		return a.Service < b.Service
	})
	s.Services, s.ServicesNotShown = cut(s.Services, maxRows)

	sort.Slice(s.Streams, func(i, j int) bool {
		a, b := s.Streams[i], s.Streams[j]
		if a.Points+a.Elections != b.Points+b.Elections {
			return a.Points+a.Elections > b.Points+b.Elections
		}
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.Metric != b.Metric {
			return a.Metric < b.Metric
		}
		return a.Attributes < b.Attributes
	})
	s.Streams, s.StreamsNotShown = cut(s.Streams, maxRows)
	for i := range s.Streams {
		e := &s.Streams[i]
		e.Service, e.Metric, e.Attributes = CleanName(e.Service), CleanName(e.Metric), CleanNameBytes(e.Attributes, AttrBytes)
		e.Evidence = CleanNameBytes(e.Evidence, AttrBytes)
		e.Release = CleanName(e.Release)
	}

	sort.Slice(s.Nested, func(i, j int) bool {
		a, b := s.Nested[i], s.Nested[j]
		if a.Spans != b.Spans {
			return a.Spans > b.Spans
		}
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.OuterScope != b.OuterScope {
			return a.OuterScope < b.OuterScope
		}
		if a.InnerScope != b.InnerScope {
			return a.InnerScope < b.InnerScope
		}
		return a.Action == "counted" && b.Action != "counted" // counted before collapsed
	})
	s.Nested, s.NestedNotShown = cut(s.Nested, maxRows)
	for i := range s.Nested {
		n := &s.Nested[i]
		n.Service, n.OuterScope, n.InnerScope = CleanName(n.Service), CleanName(n.OuterScope), CleanName(n.InnerScope)
		n.Kind, n.Name = CleanName(n.Kind), CleanName(n.Name)
		// What a nested duplicate means, in the nested detector's words,
		// without its shares, which the processor does not keep.
		n.Diagnosis = nested.Wording(n.OuterScope, n.InnerScope, n.Kind, strconv.Quote(n.Name))
	}
}

// cut keeps the first max rows and says how many it left out.
func cut[T any](rows []T, max int) ([]T, int) {
	if n := len(rows) - max; n > 0 {
		return rows[:max], n
	}
	return rows, 0
}

// StorageStatus is one storage file found damaged at start: kept aside,
// salvaged, and what was lost (Line, as logged).
type StorageStatus struct {
	File          string `json:"file"`
	KeptAs        string `json:"kept_as"`
	Store         string `json:"store"`
	Salvaged      int64  `json:"salvaged_items"`
	Lost          int64  `json:"lost_items"`
	LostUncounted bool   `json:"lost_uncounted"`
	LostEntries   int64  `json:"lost_entries"`
	Line          string `json:"line"`
}
