package analyze

import (
	"math"
	"strconv"
)

// DefaultMaxStreams is the default of Options.MaxStreams.
const DefaultMaxStreams = 1_000_000

// maxWritersKept bounds the writers remembered per stream; further writers
// are counted, not described.
const maxWritersKept = 16

// MetricReport is the metric part of a Report. Streams, their identity and
// their writers are those of internal/streams, the implementation the
// gateway's processor uses.
type MetricReport struct {
	Points  int `json:"points"`
	Streams int `json:"streams"`
	// ExtraPoints counts the points the gateway would drop: duplicates,
	// points of writers that are not the stream's elected one (copies, and
	// writers not yet told a copy or a peer), points out of order and
	// decreases within one writer.
	ExtraPoints int `json:"extra_points"`
	// PeerPoints counts the points of writers judged peers (another
	// process with the same identity), which the gateway keeps as their
	// own series: not duplicates, but the identity needs fixing.
	PeerPoints int `json:"peer_points"`
	// Dropped breaks ExtraPoints down by reason (duplicate, overlap,
	// out_of_order, decrease).
	Dropped map[string]int `json:"dropped,omitempty"`
	// MultiWriter counts streams with more than one writer (start time),
	// whether or not their writers overlapped.
	MultiWriter int `json:"multi_writer"`
	// Overlapping counts streams whose writers' points interleaved.
	Overlapping int `json:"overlapping"`
	// Classes counts the second writers of overlapping streams by the
	// classifier's judgement (internal/streams, the gateway's
	// overlap: auto): copy, peer, undecided.
	Classes map[string]int `json:"writer_classes,omitempty"`
	// WriterRules names the writers decided by the delta and same-start
	// rules of overlap: auto, with the counts and evidence lines the
	// gateway's status page gives (its writer_rules); nil when no stream
	// met them.
	WriterRules *WriterRules `json:"writer_rules,omitempty"`
	// Resets is the sum of the resets Prometheus would count on the
	// cumulative monotonic series.
	Resets int `json:"resets"`
	// Unjudged counts points of streams beyond Options.MaxStreams.
	Unjudged int `json:"unjudged,omitempty"`
	// Unsupported counts points of metrics with no type or an unspecified
	// temporality.
	Unsupported int `json:"unsupported,omitempty"`
	// List has the streams with more than one writer, dropped points or
	// resets: overlapping ones first.
	List []MetricStream `json:"streams_list"`
}

// WriterRules counts the delta chains judged against a stream's first
// chain, by class (docs/metrics.md, "Delta writers"), and the streams whose
// writers share one start (docs/metrics.md, "Writers that share a
// start"): split into their own series by export phase, or not; the delta
// chains, the quiet peers and the shared-start counts are the classifier's
// own (streams.JudgeStats), as on the status page.
type WriterRules struct {
	// DeltaCopies, DeltaPeers and DeltaUndecided count the later chains
	// of overlapping delta streams: copies dropped, peers kept as their
	// own series, and chains not decided (their points held, dropped).
	DeltaCopies    int `json:"delta_copies"`
	DeltaPeers     int `json:"delta_peers"`
	DeltaUndecided int `json:"delta_undecided"`
	// QuietPeers counts writers decided peers because they went quiet
	// while the elected writer went on.
	QuietPeers uint64 `json:"quiet_peers"`
	// SharedSplit counts streams whose writers share one start split by
	// export phase, SharedWriters the writers told apart in them;
	// SharedNotSplit the streams whose shared start could not be split;
	// SharedUnsplit the points of a shared start not given to a writer.
	SharedSplit    int    `json:"shared_start_split"`
	SharedWriters  int    `json:"shared_start_writers"`
	SharedNotSplit int    `json:"shared_start_not_split"`
	SharedUnsplit  uint64 `json:"shared_start_unsplit"`
	// DeltaContinued counts delta points that continued their writer's
	// chain (its next interval overtaking its previous one, or a late
	// interval filling the gap a point went on across), DeltaAcrossGap the
	// points that went on from their chain across intervals their writer
	// sent nothing for, DeltaEmpty those of them across intervals known
	// empty (their exports seen).
	DeltaContinued uint64 `json:"delta_continued"`
	DeltaAcrossGap uint64 `json:"delta_across_gap"`
	DeltaEmpty     uint64 `json:"delta_empty_intervals"`
}

// MetricStream describes one stream.
type MetricStream struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"` // streams.Shape: sum/cumulative/monotonic, ...
	Unit       string `json:"unit,omitempty"`
	Service    string `json:"service"`
	Scope      string `json:"scope,omitempty"`
	Attributes string `json:"attributes,omitempty"` // point attributes, k=v sorted
	// InstanceID is the resource's service.instance.id, "" when absent.
	InstanceID string         `json:"service_instance_id,omitempty"`
	Points     int            `json:"points"`
	Writers    []MetricWriter `json:"writers"`
	// MoreWriters counts writers beyond the ones listed.
	MoreWriters int            `json:"more_writers,omitempty"`
	Overlap     bool           `json:"overlap"` // some writer's points interleaved with the elected one's
	Dropped     map[string]int `json:"dropped,omitempty"`
	// PeerPoints counts the points of writers judged peers, which the
	// gateway keeps as their own series.
	PeerPoints int `json:"peer_points,omitempty"`
	// Shared is the evidence line of a start shared by several writers
	// (streams.SharedEvidence), as the status page gives it.
	Shared string `json:"shared_start,omitempty"`
	// Prometheus is what Prometheus would store and compute for the series
	// (cumulative monotonic streams): samples in arrival order, those it
	// would refuse (timestamps not after the previous one), resets().
	Prometheus *PromSeries `json:"prometheus,omitempty"`
	Diagnosis  Diagnosis   `json:"diagnosis,omitempty"`
}

// MetricWriter is one writer of a stream: the points sharing a start time
// (delta streams: an unbroken run).
type MetricWriter struct {
	Start      uint64 `json:"start_time_unix_nano"`
	StartTime  string `json:"start_time"`
	Points     int    `json:"points"`
	FirstTime  string `json:"first_time"`
	LastTime   string `json:"last_time"`
	FirstValue Number `json:"first_value"`
	LastValue  Number `json:"last_value"`
	Elected    bool   `json:"elected"` // the stream's elected writer at the end
	// Class and Evidence are the classifier's judgement of a writer
	// that was not elected: copy, peer or undecided, and why.
	Class    string `json:"class,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

// Number is a point value; NaN and the infinities, which JSON has no
// numbers for, marshal as the strings "NaN", "+Inf" and "-Inf".
type Number float64

// MarshalJSON renders n as a JSON number, or a string when it is not finite.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// PromSeries is Prometheus's view of a cumulative series: samples stored in
// arrival order, a sample refused when its millisecond timestamp is not
// after the stored one (out of order or duplicate), resets() over what was
// stored.
type PromSeries struct {
	Samples  int `json:"samples"`
	Rejected int `json:"rejected"`
	Resets   int `json:"resets"`
}
