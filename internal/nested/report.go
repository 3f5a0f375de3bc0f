package nested

import (
	"cmp"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Key identifies a finding: one pattern of nesting in one service.
type Key struct {
	Service    string `json:"service"`
	Kind       string `json:"kind"` // the outer span's kind: SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL
	Name       string `json:"name"` // the outer span's name
	OuterScope Scope  `json:"outer_scope"`
	InnerScope Scope  `json:"inner_scope"`
}

// compare orders keys by service, name, kind, then outer and inner scope.
func (k Key) compare(o Key) int {
	return cmp.Or(
		cmp.Compare(k.Service, o.Service),
		cmp.Compare(k.Name, o.Name),
		cmp.Compare(k.Kind, o.Kind),
		cmp.Compare(k.OuterScope.Name, o.OuterScope.Name),
		cmp.Compare(k.OuterScope.Version, o.OuterScope.Version),
		cmp.Compare(k.InnerScope.Name, o.InnerScope.Name),
		cmp.Compare(k.InnerScope.Version, o.InnerScope.Version),
	)
}

// Pair is one nested duplicate: Inner records Outer's operation a second
// time, as its child or as a SERVER sibling whose time Outer contains.
type Pair struct {
	Key
	InnerName string // the inner span's name
	MatchedBy string // ByName, ByRoute, ByMethod or ByPath
	// Sibling: both spans are SERVER children of one parent (each
	// instrumentation extracted the incoming context), Outer the one
	// whose time contains the other's; otherwise Outer is Inner's parent.
	Sibling bool
	TraceID pcommon.TraceID
	Outer   pcommon.SpanID
	Inner   pcommon.SpanID
}

// Example names one occurrence by its ids, in hex.
type Example struct {
	TraceID     string `json:"trace_id"`
	OuterSpanID string `json:"outer_span_id"`
	InnerSpanID string `json:"inner_span_id"`
}

// Finding aggregates the pairs of one Key.
type Finding struct {
	Key
	InnerName   string `json:"inner_name,omitempty"` // the inner spans' name, when it differs from Name
	MatchedBy   string `json:"matched_by"`           // how the first pair matched: name, route, method or path
	Traces      int    `json:"traces"`               // distinct traces with at least one pair
	Occurrences int    `json:"occurrences"`          // pairs
	Siblings    int    `json:"siblings"`             // pairs of SERVER siblings under one parent, rather than parent and child
	// AffectedSpans counts the spans of Kind on either side of a pair,
	// each once; KindSpans all spans of Kind in Service (distinct ids).
	// For SERVER findings Share is the share of the service's server
	// spans that are part of a doubled request.
	AffectedSpans int       `json:"affected_spans"`
	KindSpans     int       `json:"kind_spans"`
	Share         float64   `json:"share"`
	Diagnosis     string    `json:"diagnosis"`
	Examples      []Example `json:"examples"`
}

// Stats says what a Detector saw and what it had to forget.
type Stats struct {
	Spans      int `json:"spans"`       // spans added
	Duplicates int `json:"duplicates"`  // spans whose ids were already held: ignored
	InvalidIDs int `json:"invalid_ids"` // spans with an all-zero trace or span id: counted in KindSpans, never paired
	Pairs      int `json:"pairs"`       // nested duplicates found
	Held       int `json:"held"`        // spans held now
	MaxSpans   int `json:"max_spans"`
	// Evicted spans were forgotten to stay within MaxSpans: a parent or
	// child of theirs arriving later is not compared with them.
	// EvictedWaiting of them had not seen their parent yet.
	Evicted        int `json:"evicted"`
	EvictedWaiting int `json:"evicted_waiting"`
	// Bytes is what the held spans take (SpanOverhead each plus their
	// clipped strings); EvictedBytes spans were forgotten, before
	// MaxSpans was reached, to stay within MaxBytes.
	Bytes        int `json:"bytes"`
	MaxBytes     int `json:"max_bytes"`
	EvictedBytes int `json:"evicted_bytes"`
	// TraceMarksEvicted: (finding, trace) marks forgotten (as many are
	// held as MaxSpans); a trace seen again after that counts twice in
	// Finding.Traces.
	TraceMarksEvicted int `json:"trace_marks_evicted"`
	// SiblingOverflow: SERVER spans not compared with their siblings
	// because their parent already had MaxSiblings SERVER children held.
	SiblingOverflow int `json:"sibling_overflow"`
	// UnlistedPairs: pairs of a key first seen when MaxFindings were
	// already listed. UncountedKinds: spans of a (service, kind) first
	// seen when MaxServiceKinds were already counted.
	UnlistedPairs  int `json:"unlisted_pairs,omitempty"`
	UncountedKinds int `json:"uncounted_kinds,omitempty"`
}

// MaxFindings bounds the findings a Detector lists: the pairs of further
// keys are still returned by Add, and counted in Stats.UnlistedPairs.
// MaxServiceKinds bounds the (service, kind) span counts behind
// Finding.KindSpans: spans of further ones are counted in
// Stats.UncountedKinds only. With MaxStringBytes, they keep a Detector's
// memory beyond MaxBytes (and its ring of MaxSpans records with their index) under about 5 MB whatever it is sent.
const (
	MaxFindings     = 1024
	MaxServiceKinds = 4096
)

// MaxSiblings bounds the SERVER children of one parent that are compared
// with each other (one request has one or two; more is fan-in, not
// double instrumentation).
const MaxSiblings = 16

// Report is a Detector's findings and stats.
type Report struct {
	Findings []Finding `json:"findings"`
	Stats    Stats     `json:"stats"`
}
