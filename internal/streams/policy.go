package streams

import (
	"errors"
	"fmt"
	"time"
)

// Policy bounds and tunes a Tracker.
type Policy struct {
	// MaxStreams is the most streams tracked; points of further streams
	// pass unjudged (ReasonUnjudged).
	MaxStreams int
	// MaxStale is how long a stream is kept after its newest point, in the
	// caller's clock (the now passed to Observe).
	MaxStale time.Duration
	// FailoverAfter, when positive, is how long in point time the elected
	// writer may send nothing before the next writer is elected. Zero
	// derives it per stream: FailoverIntervals times the elected writer's
	// observed interval, at least FailoverFloor.
	FailoverAfter time.Duration
	// FailoverFloor is the least derived failover time; zero means
	// DefaultFailoverFloor.
	FailoverFloor time.Duration
	// Split keeps every writer's points as its own series (Verdict Label)
	// instead of dropping the points of writers that were not elected.
	Split bool
	// Interpolate applies the data model's overlap interpolation to
	// monotonic cumulative Sums: when a failover elects a writer whose
	// start lies before the previous writer's newest point (one process
	// started just before the other stopped), that writer's points are
	// shifted (Decision.Shift) so that its series starts where the
	// previous one ended, with no overlap: the counts both made in the
	// overlap are not counted twice.
	Interpolate bool
	// Auto classifies every second writer of a cumulative stream from the
	// values (classify.go): a copy or an undecided writer is handled as
	// without Split, a peer's points are labelled (Verdict Label) as with
	// Split. Not with Split.
	Auto bool
	// MaxJudged bounds the classifier: the most (stream, second writer)
	// pairs, and the most writers, under judgement. Zero means
	// DefaultMaxJudged.
	MaxJudged int
	// MaxHeldBytes bounds the newest dropped points of undecided writers
	// held until they are decided (held.go), as the caller sizes them.
	// Zero holds none.
	MaxHeldBytes int
	// MaxExportTimes bounds the exports remembered (exports.go): the
	// newest (resource, time) pairs seen, by which an interval a delta
	// writer sent nothing for is known to have been empty. Zero remembers
	// none.
	MaxExportTimes int
}

// Defaults and limits.
const (
	DefaultMaxStreams    = 100_000
	DefaultMaxStale      = 5 * time.Minute
	DefaultFailoverFloor = time.Second
	// FailoverIntervals is how many observed intervals the elected writer
	// may miss before a derived failover.
	FailoverIntervals = 3
	// MaxStreamsLimit is the largest MaxStreams accepted.
	MaxStreamsLimit = 1 << 26
	// DefaultMaxJudged is the default MaxJudged.
	DefaultMaxJudged = 10_000
	// DefaultMaxExportTimes is the default MaxExportTimes: 2 to 3.3 MB
	// (64 to 100 bytes an export, with its reader's link).
	DefaultMaxExportTimes = 1 << 15
	// MaxHeldBytesLimit is the largest MaxHeldBytes accepted (1 TiB).
	MaxHeldBytesLimit = 1 << 40
)

// DefaultPolicy returns the defaults: keep one writer per stream, and
// interpolate change-overs.
func DefaultPolicy() Policy {
	return Policy{MaxStreams: DefaultMaxStreams, MaxStale: DefaultMaxStale, FailoverFloor: DefaultFailoverFloor, Interpolate: true, MaxExportTimes: DefaultMaxExportTimes}
}

var (
	errMaxStreams = fmt.Errorf("max_streams must be between 1 and %d", MaxStreamsLimit)
	errMaxStale   = errors.New("max_stale must be positive")
	errFailover   = errors.New("failover_after must not be negative")
	errFloor      = errors.New("failover floor must not be negative")
	errMaxJudged  = fmt.Errorf("max_judged_writers must be between 0 and %d", MaxStreamsLimit)
	errAutoSplit  = errors.New("auto and split exclude each other")
	errMaxHeld    = fmt.Errorf("max_held_bytes must be between 0 and %d", MaxHeldBytesLimit)
	errMaxExports = fmt.Errorf("max_export_times must be between 0 and %d", MaxStreamsLimit)
)

// Validate checks a Policy.
func (p Policy) Validate() error {
	var errs []error
	if p.MaxStreams < 1 || p.MaxStreams > MaxStreamsLimit {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxStreams, p.MaxStreams))
	}
	if p.MaxStale <= 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errMaxStale, p.MaxStale))
	}
	if p.FailoverAfter < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errFailover, p.FailoverAfter))
	}
	if p.FailoverFloor < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errFloor, p.FailoverFloor))
	}
	if p.MaxJudged < 0 || p.MaxJudged > MaxStreamsLimit {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxJudged, p.MaxJudged))
	}
	if p.MaxHeldBytes < 0 || p.MaxHeldBytes > MaxHeldBytesLimit {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxHeld, p.MaxHeldBytes))
	}
	if p.MaxExportTimes < 0 || p.MaxExportTimes > MaxStreamsLimit {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxExports, p.MaxExportTimes))
	}
	if p.Auto && p.Split {
		errs = append(errs, errAutoSplit)
	}
	return errors.Join(errs...)
}
