package loadgen

import (
	"sync/atomic"

	// gzip, the collector OTLP exporters' default compression, as any
	// collector receiver takes it (-pair default runs them unchanged).
	_ "google.golang.org/grpc/encoding/gzip"

	"github.com/doubletake/doubletake/internal/capture"
)

// maxTrackedSeq bounds the sink's bitset (2^32 bits: 512 MiB at most; a
// run of 10 minutes at 1M spans/s needs 75 MiB). Spans beyond it are
// counted but not told apart.
const maxTrackedSeq = 1 << 32

// Sink is a counting OTLP receiver (the capture package, gRPC and HTTP on
// one port): spans received, distinct spans of this run (by sequence
// number, in a bitset), metric points, requests.
type Sink struct {
	srv   *capture.Server
	nonce uint64

	requests  atomic.Uint64
	spans     atomic.Uint64
	distinct  atomic.Uint64 // distinct spans of this run
	foreign   atomic.Uint64 // spans of other runs or beyond maxTrackedSeq
	points    atomic.Uint64
	logs      atomic.Uint64
	lastNanos atomic.Int64 // when the last request arrived

	seen []uint64 // bitset of sequence numbers; capture serialises handler calls
}

// StartSink listens on addr and counts the spans of run nonce.
func StartSink(addr string, nonce uint64) (*Sink, error) {
	s := &Sink{nonce: nonce}
	srv, err := capture.Listen(addr, s.handle)
	if err != nil {
		return nil, err
	}
	s.srv = srv
	return s, nil
}

func (s *Sink) handle(r *capture.Request) error {
	s.requests.Add(1)
	s.lastNanos.Store(r.Received.UnixNano())
	switch r.Signal {
	case capture.Traces:
		var n, fresh, foreign uint64
		rss := r.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					n++
					seq, ok := seqOf(sp.TraceID(), sp.SpanID(), s.nonce)
					if !ok || seq >= maxTrackedSeq {
						foreign++
						continue
					}
					if s.mark(seq) {
						fresh++
					}
				}
			}
		}
		s.spans.Add(n)
		s.distinct.Add(fresh)
		s.foreign.Add(foreign)
	case capture.Metrics:
		s.points.Add(uint64(r.Metrics.DataPointCount()))
	case capture.Logs:
		s.logs.Add(uint64(r.Logs.LogRecordCount()))
	}
	return nil
}

// mark sets seq's bit and reports whether it was clear.
func (s *Sink) mark(seq uint64) bool {
	w := seq / 64
	if w >= uint64(len(s.seen)) {
		n := max(2*len(s.seen), int(w)+1, 1<<14)
		grown := make([]uint64, n)
		copy(grown, s.seen)
		s.seen = grown
	}
	b := uint64(1) << (seq % 64)
	if s.seen[w]&b != 0 {
		return false
	}
	s.seen[w] |= b
	return true
}

// Counts is what a Sink has received.
type Counts struct {
	Requests, Spans, Distinct, Foreign, Points, Logs uint64
}

// Counts reads the counts now.
func (s *Sink) Counts() Counts {
	return Counts{
		Requests: s.requests.Load(), Spans: s.spans.Load(), Distinct: s.distinct.Load(),
		Foreign: s.foreign.Load(), Points: s.points.Load(), Logs: s.logs.Load(),
	}
}

// Close stops the sink.
func (s *Sink) Close() error { return s.srv.Close() }

// Addr is the address the sink listens on.
func (s *Sink) Addr() string { return s.srv.Addr() }
