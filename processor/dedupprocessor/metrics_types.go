package dedupprocessor

import (
	"hash/maphash"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/scan"
	"github.com/doubletake/doubletake/internal/streams"
)

// The metric signal's types, which name one another: the unit lists the
// requests in flight (metricFlights), each request's scratch names its
// unit, and the judging and parking of a request's points name its
// scratch's parts. Their methods are in the files of their concern:
// metrics.go (the unit), metrics_judge.go (judging), copies_metrics.go
// (the requests in flight and the points parked), metrics_restart.go.

// metricUnit is the metric signal: one writer election per stream, its
// services, and the streams with more than one writer; with storage, its
// elections are checkpointed whole.
type metricUnit struct {
	signalWindow
	tracker *streams.Tracker // guarded by mu
	hasher  *streams.Hasher  // guarded by mu
	svcs    *services        // signal "metrics": serviceStats.metrics is set
	rec     metricRecorder   // enters requests in svcs' ledgers and the stream book (metrics_telemetry.go)
	auto    bool             // metrics.overlap auto
	copies  metricFlights    // the requests in flight, that copies wait for (copies_metrics.go)
	// connSeed keys the names of the connections requests come on (connOf).
	connSeed maphash.Seed

	scratch sync.Pool // *metricScratch
	bufs    sync.Pool // *[]byte, snapshots

	// store is the storage from restore to close; the checkpoint loop
	// runs in between.
	store storage.Client

	// The exports the tracker's record forgot (metrics.max_export_times)
	// counted into telemetry so far; guarded by mu.
	exportsReported uint64
}

// metricScratch is one request's working memory, pooled so that the steady
// state allocates nothing, and its pending change of the unit.
type metricScratch struct {
	u         *metricUnit
	journal   streams.Journal // what the request changed, to take back on failure
	counts    []metricCounts  // per resource
	released  []releasedPoint // held points the request carries, to hold again on failure
	restarted []releasedPoint // held restarts' points it carries (metrics_restart.go)
	j         judging
	mflight   metricFlight // while in the next consumer (copies_metrics.go)
	park      metricPark   // the points parked while judging
	again     bool         // judging parked points again: counted when they arrived
	forgotten int64        // exports the record forgot while judging it, to count
}

// releasedPoint is a held point sent with a request (a copy of it).
type releasedPoint struct {
	id     streams.ID
	writer uint64
	md     pmetric.Metrics
	size   int
}

// judging carries one request's context into the per-point closures.
type judging struct {
	tracker *streams.Tracker
	hasher  *streams.Hasher
	c       *metricCounts
	shape   streams.Shape
	metric  string
	now     int64
	mutate  bool // mode drop: remove and label points
	auto    bool // metrics.overlap auto: name the class in events
	// releases names a copy's known release by the scopes of its resource
	// (releases.go: copyRelease); nil names none.
	releases  *scan.ScopeMatcher
	origin    uint64
	splitAttr string
	named     uint64 // the writer whose WriterName is name
	sharer    uint8  // and its chain of a shared start (streams.SharerName)
	name      string
	shift     streams.Shift // the last judged point's rewrite, if shifted
	shifted   bool
	// The point being judged: its stream, decision and place, so that a
	// dropped point of an undecided writer can be held (Decision.Hold).
	id    streams.ID
	d     streams.Decision
	rm    pmetric.ResourceMetrics
	sm    pmetric.ScopeMetrics
	m     pmetric.Metric
	sizer pmetric.ProtoMarshaler
	// park and copies: a repeat of a point whose request is still in the
	// next consumer is parked (copies_metrics.go).
	park   *metricPark
	copies *metricFlights
	// conn names the connection the request came on (connOf; 0: not known).
	conn uint64
}

// metricFlights is the metric unit's requests in flight with changes.
type metricFlights struct {
	flights  flights
	waitOpts waitOpts
	next     uint64           // the next flight's number; guarded by the unit's mu
	inflight []*metricScratch // guarded by the unit's mu
	refusals uint64           // requests in flight refused so far; guarded by the unit's mu
	pending  pendingSnapshot  // the checkpoints' (one at a time)
}

// metricFlight is one request's part in metricFlights, in its scratch.
type metricFlight struct {
	flight flight
	slots  []uint32 // its journal's stream slots, sorted; made by the first look
	sorted bool
}

// metricPark is one request's parked points while it is judged: the
// points themselves, in their resources, scopes and metrics, and the
// flights they wait for.
type metricPark struct {
	journal *streams.Journal // the judged request's
	self    *metricScratch
	this    bool // the point just judged is parked
	wait    pmetric.Metrics
	starts  []uint64
	// The resource and scope of the last point parked, and where it went.
	srcRM pmetric.ResourceMetrics
	srcSM pmetric.ScopeMetrics
	rm    pmetric.ResourceMetrics
	sm    pmetric.ScopeMetrics
}

// A snapshot of the streams holds the changes of the requests in flight
// when it is taken. Stored at once, a kill -9 before one of them is
// delivered would restore its points as delivered, and its sender's retry
// (never acknowledged) would be dropped as a repeat and answered success.
// So a snapshot taken while requests are in flight is kept back, and
// stored by the next checkpoint if all of them were accepted by then;
// dropped if one was refused (its changes taken back) or is still in
// flight. A stored snapshot is then a checkpoint older at most: after a
// restart a few more repeats may pass (copies, never losses).
type pendingSnapshot struct {
	buf, spare []byte
	flights    []uint64 // the requests in flight when buf was taken
	refusals   uint64   // metricFlights.refusals then
	ok         bool     // buf holds a snapshot kept back
}

// metricsSnapshotKey holds the metric streams' elections, rewritten every
// checkpoint_interval and at shutdown.
const metricsSnapshotKey = "metrics/snapshot"
