package analyze

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/doubletake/doubletake/internal/nested"
)

// DefaultExportInterval is the default of Options.ExportInterval: the
// scheduled delay of the OpenTelemetry SDKs' batch span and log processors.
const DefaultExportInterval = 5 * time.Second

// DefaultMaxExamples is the default of Options.MaxExamples.
const DefaultMaxExamples = 5

// Options tune the analysis. The zero value uses the defaults.
type Options struct {
	// ExportInterval is the longest delay between two identical copies that
	// is attributed to two exporters in one process; identical copies further
	// apart are attributed to a re-send. Default DefaultExportInterval.
	ExportInterval time.Duration
	// MaxExamples bounds the duplicated ids and bodies listed per group.
	// Default DefaultMaxExamples.
	MaxExamples int
	// MaxStreams bounds the metric streams tracked; points of further
	// streams are counted as unjudged. Default DefaultMaxStreams.
	MaxStreams int
	// NoArrival says the source records no arrival times and no
	// connections (files, a trace backend): identical copies are then told
	// apart by how they were batched (a request repeated item for item, or
	// not), never by delays, and reports cite requests and lines.
	NoArrival bool
	// Nested tunes the nested-duplicate (double instrumentation) detector:
	// its timing rule and the spans it holds (MaxSpans, default
	// nested.DefaultMaxSpans); zero fields take nested's defaults.
	Nested nested.Options
}

func (o Options) withDefaults() Options {
	if o.ExportInterval <= 0 {
		o.ExportInterval = DefaultExportInterval
	}
	if o.MaxExamples <= 0 {
		o.MaxExamples = DefaultMaxExamples
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	return o
}

// Arrival is what is known about how one export request arrived.
type Arrival struct {
	Seq      uint64    // arrival order among all requests, from 1
	Received time.Time // when it was received
	Peer     string    // the connection it came on (remote address); "" if unknown
	Protocol string    // grpc, http/protobuf, http/json; informational
	File     string    // the file it was read from; "" if none
	Line     int       // its line (or frame) in File, from 1
}

// request is the analysis's record of one export request.
type request struct {
	seq      uint64
	received int64 // unix nanoseconds
	peer     uint32
	signal   Signal
	items    int
	digest   uint64 // over the content hashes of its items, in order
	repeatOf int32  // index of an earlier request with the same digest, or -1
	file     uint16 // index in Analyzer.files + 1; 0: no file
	line     uint32
}

// Signal names a kind of telemetry.
type Signal string

// The signals.
const (
	SignalSpans   Signal = "spans"
	SignalMetrics Signal = "metrics"
	SignalLogs    Signal = "logs"
)

// Analyzer accumulates export requests and reports duplicates and overlaps.
// Add requests in arrival order; an Analyzer is not safe for concurrent use.
// It keeps a compact index of what it saw, never the pdata itself.
type Analyzer struct {
	opts Options

	reqs      []request
	peers     map[string]uint32
	peerNames []string
	digests   map[digestKey]int32
	protocols map[string]int
	files     []string

	spans   spanIndex
	logs    logIndex
	metrics metricIndex
	nested  *nested.Detector // bounded: at most Options.Nested.MaxSpans spans held

	e   enc    // scratch encoder for content hashes
	seq []byte // scratch: item hashes of the current request
}

type digestKey struct {
	signal Signal
	items  int
	digest uint64
}

// New returns an empty Analyzer.
func New(opts Options) *Analyzer {
	a := &Analyzer{
		opts:      opts.withDefaults(),
		peers:     map[string]uint32{},
		digests:   map[digestKey]int32{},
		protocols: map[string]int{},
	}
	a.nested = nested.NewDetector(a.opts.Nested)
	a.spans.init()
	a.logs.init()
	a.metrics.init(a.opts.MaxStreams)
	return a
}

// beginRequest records a request and returns its index.
func (a *Analyzer) beginRequest(at Arrival, sig Signal) uint32 {
	p, ok := a.peers[at.Peer]
	if !ok {
		p = uint32(len(a.peerNames))
		a.peers[at.Peer] = p
		a.peerNames = append(a.peerNames, at.Peer)
	}
	if at.Protocol != "" {
		a.protocols[at.Protocol]++
	}
	seq := at.Seq
	if seq == 0 {
		seq = uint64(len(a.reqs) + 1)
	}
	var recv int64
	if !at.Received.IsZero() {
		recv = at.Received.UnixNano()
	}
	var file uint16
	if at.File != "" {
		i := slices.Index(a.files, at.File)
		if i < 0 && len(a.files) < math.MaxUint16-1 {
			i = len(a.files)
			a.files = append(a.files, at.File)
		}
		file = uint16(i + 1)
	}
	a.reqs = append(a.reqs, request{seq: seq, received: recv, peer: p, signal: sig, repeatOf: -1, file: file, line: uint32(min(max(at.Line, 0), math.MaxUint32))})
	a.seq = a.seq[:0]
	return uint32(len(a.reqs) - 1)
}

// item adds one item's content hash to the current request's digest.
func (a *Analyzer) item(h uint64) {
	a.seq = append(a.seq, byte(h), byte(h>>8), byte(h>>16), byte(h>>24), byte(h>>32), byte(h>>40), byte(h>>48), byte(h>>56))
}

// endRequest finishes the digest of request ri and links it to an earlier
// request with the same items, if there is one.
func (a *Analyzer) endRequest(ri uint32, items int) {
	r := &a.reqs[ri]
	r.items = items
	if items == 0 {
		return
	}
	a.e.Reset()
	a.e.Bytes(a.seq)
	r.digest = a.e.sum()
	k := digestKey{signal: r.signal, items: items, digest: r.digest}
	if first, ok := a.digests[k]; ok {
		r.repeatOf = first
		return
	}
	a.digests[k] = int32(ri)
}

// wholeRepeat reports whether request b repeats request a item for item.
func (a *Analyzer) wholeRepeat(first, later uint32) bool {
	return first != later && a.reqs[later].repeatOf == int32(first)
}

// where cites request i: "traces.jsonl line 31", or "request 31" (its
// arrival order) when it came from no file.
func (a *Analyzer) where(i uint32) string {
	r := &a.reqs[i]
	if r.file == 0 {
		return fmt.Sprintf("request %d", r.seq)
	}
	return fmt.Sprintf("%s line %d", a.files[r.file-1], r.line)
}

// delay is how long after request first request later arrived.
func (a *Analyzer) delay(first, later uint32) time.Duration {
	return time.Duration(a.reqs[later].received - a.reqs[first].received)
}

// classify diagnoses one identical extra copy: the item first arrived in
// request first and again in request later. Copies within the export
// interval come from two exporters (two processors flush the same items
// within one scheduled delay); later copies were re-sent (a retry comes
// after a timeout and a backoff, a replay later still).
//
// Without arrival times (Options.NoArrival) the batching tells: copies in
// a request that repeats an earlier one item for item were re-sent (or
// exported twice by exporters that batched alike: see the finding's
// line), copies batched differently come from two exporters.
func (a *Analyzer) classify(first, later uint32) Diagnosis {
	if a.opts.NoArrival {
		if a.wholeRepeat(first, later) {
			return DiagResentBatch
		}
		return DiagTwoExporters
	}
	if a.delay(first, later) <= a.opts.ExportInterval {
		return DiagTwoExporters
	}
	return DiagResentBatch
}

// Report summarises everything added so far. It may be called more than
// once; the Analyzer keeps accumulating.
func (a *Analyzer) Report() *Report {
	r := &Report{Findings: []Finding{}, ArrivalTimes: !a.opts.NoArrival}
	for _, q := range a.reqs {
		switch q.signal {
		case SignalSpans:
			r.Requests.Traces++
		case SignalMetrics:
			r.Requests.Metrics++
		case SignalLogs:
			r.Requests.Logs++
		}
		if q.repeatOf >= 0 {
			r.Requests.WholeRepeats++
		}
	}
	if !a.opts.NoArrival {
		r.Requests.Connections = len(a.peerNames)
	}
	if len(a.protocols) > 0 {
		r.Requests.Protocols = map[string]int{}
		for p, n := range a.protocols {
			r.Requests.Protocols[p] = n
		}
	}
	a.spanReport(r)
	a.nestedReport(r)
	a.metricReport(r)
	a.logReport(r)
	sortFindings(r.Findings)
	return r
}
