package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/capture"
)

func TestMixIsABijection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, x := range []uint64{0, 1, 2, 1 << 63, ^uint64(0)} {
		if got := unmix(mix(x)); got != x {
			t.Fatalf("unmix(mix(%d)) = %d", x, got)
		}
	}
	for range 10000 {
		x := r.Uint64()
		if got := unmix(mix(x)); got != x {
			t.Fatalf("unmix(mix(%d)) = %d", x, got)
		}
	}
}

// spanID is the 24 bytes the dedup processor keys a span on.
type spanID [24]byte

// decodeIDs decodes a built request and returns its spans' ids, checking
// that every span is otherwise identical to the template's first span.
func decodeIDs(t *testing.T, req []byte) []spanID {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(req)
	if err != nil {
		t.Fatalf("a built request does not decode: %v", err)
	}
	var ids []spanID
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			if s.Name() != "GET /api/v1/rollouts/{id}" || s.Attributes().Len() != 3 || s.EndTimestamp() == 0 {
				t.Fatalf("span %d/%d lost its content: %q", i, j, s.Name())
			}
			var id spanID
			tid, sid := s.TraceID(), s.SpanID()
			copy(id[:16], tid[:])
			copy(id[16:], sid[:])
			ids = append(ids, id)
		}
	}
	return ids
}

// sendPlans builds requests requests from one planner, as a sender would,
// and returns them.
func sendPlans(t *testing.T, batch int, dup float64, mode DupMode, requests int) (reqs [][]byte, copies int) {
	t.Helper()
	tmpl, err := newSpanTemplate(batch)
	if err != nil {
		t.Fatal(err)
	}
	g := &Generator{}
	pl := &planner{batch: batch, dup: dup, mode: mode, alloc: g.alloc}
	for range requests {
		p := pl.next()
		copies += p.copies
		reqs = append(reqs, tmpl.build(nil, p, 42))
	}
	return reqs, copies
}

func TestDuplicateShareIsWhatWasAsked(t *testing.T) {
	const batch, requests = 100, 200
	for _, tc := range []struct {
		dup  float64
		mode DupMode
	}{
		{0, DupBatch}, {0.5, DupBatch}, {0.25, DupBatch}, {0.1, DupBatch},
		{0.5, DupMixed}, {0.25, DupMixed}, {0.8, DupMixed},
	} {
		t.Run(fmt.Sprintf("%s/%v%%", tc.mode, tc.dup*100), func(t *testing.T) {
			reqs, planned := sendPlans(t, batch, tc.dup, tc.mode, requests)
			seen := map[spanID]bool{}
			total, copies := 0, 0
			var prev []byte
			for i, req := range reqs {
				ids := decodeIDs(t, req)
				if len(ids) != batch {
					t.Fatalf("request %d has %d spans, want %d", i, len(ids), batch)
				}
				inRequest := map[spanID]bool{}
				repeats := 0
				for _, id := range ids {
					if inRequest[id] {
						t.Fatalf("request %d carries a span twice", i)
					}
					inRequest[id] = true
					if seen[id] {
						repeats++
					}
					seen[id] = true
				}
				// A batch-mode copy is the previous request, byte for byte.
				if tc.mode == DupBatch && repeats > 0 && (repeats != batch || !bytes.Equal(req, prev)) {
					t.Fatalf("request %d repeats %d spans and is not a copy of the previous request", i, repeats)
				}
				total += len(ids)
				copies += repeats
				prev = req
			}
			if copies != planned {
				t.Errorf("%d spans were copies, the planner counted %d", copies, planned)
			}
			if len(seen) != total-copies {
				t.Errorf("%d distinct spans of %d with %d copies", len(seen), total, copies)
			}
			// The first request has nothing to copy: allow one request's worth.
			share := float64(copies) / float64(total)
			if d := share - tc.dup; d > 1e-9 || d < -1.0/requests-1e-9 {
				t.Errorf("copies are %.4f of spans sent, want %.4f", share, tc.dup)
			}
		})
	}
}

func TestSpanIDsAreValidAndComeBackToTheirSequence(t *testing.T) {
	tmpl, err := newSpanTemplate(1000)
	if err != nil {
		t.Fatal(err)
	}
	const nonce = 0x1234
	req := tmpl.build(nil, plan{ranges: []seqRange{{first: 1, n: 1000}}}, nonce)
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(req)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[uint64]bool{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < spans.Len(); j++ {
			s := spans.At(j)
			if s.TraceID().IsEmpty() || s.SpanID().IsEmpty() {
				t.Fatal("a zero id: the processor would pass the span unjudged")
			}
			seq, ok := seqOf(s.TraceID(), s.SpanID(), nonce)
			if !ok {
				t.Fatal("the nonce did not come back")
			}
			seqs[seq] = true
			if _, ok := seqOf(s.TraceID(), s.SpanID(), nonce+1); ok {
				t.Fatal("a span was taken for another run's")
			}
		}
	}
	for seq := uint64(1); seq <= 1000; seq++ {
		if !seqs[seq] {
			t.Fatalf("sequence number %d is missing", seq)
		}
	}
}

func TestMetricWritersShareStreamsAndDifferInStartTime(t *testing.T) {
	const streams, perReq = 25, 10
	starts := map[int64]bool{}
	for w := range 3 {
		ts, err := newMetricTemplates(w, streams, perReq)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 3 {
			t.Fatalf("%d requests for %d streams at %d per request, want 3", len(ts), streams, perReq)
		}
		seen := map[int64]bool{}
		for _, tmpl := range ts {
			md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(tmpl.build(nil, 1_800_000_000_000_000_000, 70))
			if err != nil {
				t.Fatal(err)
			}
			dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				dp := dps.At(i)
				if dp.Timestamp() != 1_800_000_000_000_000_000 || dp.IntValue() != 70 {
					t.Fatalf("point not patched: time %d value %d", dp.Timestamp(), dp.IntValue())
				}
				s, _ := dp.Attributes().Get("stream")
				seen[s.Int()] = true
				starts[int64(dp.StartTimestamp())] = true
			}
		}
		if len(seen) != streams {
			t.Fatalf("writer %d wrote %d streams, want %d", w, len(seen), streams)
		}
	}
	if len(starts) != 3 {
		t.Fatalf("%d distinct start times over 3 writers, want 3", len(starts))
	}
}

func TestSinkCountsDistinctSpans(t *testing.T) {
	const nonce = 77
	sk, err := StartSink("127.0.0.1:0", nonce)
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	reqs, copies := sendPlans(t, 50, 0.5, DupBatch, 6)
	for _, proto := range []string{"grpc", "http"} {
		s, err := newSender(proto, sk.Addr())
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range reqs {
			// The requests were built with nonce 42: rebuild with the sink's.
			if err := s.send(context.Background(), capture.Traces, bytes.Clone(req)); err != nil {
				t.Fatalf("%s: %v", proto, err)
			}
		}
		s.close()
	}
	k := sk.Counts()
	if k.Spans != 600 || k.Foreign != 600 {
		t.Fatalf("sink counted %+v, want 600 spans of another run", k)
	}
	tmpl, _ := newSpanTemplate(50)
	s, _ := newSender("grpc", sk.Addr())
	defer s.close()
	g := &Generator{}
	pl := &planner{batch: 50, dup: 0.5, mode: DupBatch, alloc: g.alloc}
	for range 6 {
		if err := s.send(context.Background(), capture.Traces, tmpl.build(nil, pl.next(), nonce)); err != nil {
			t.Fatal(err)
		}
	}
	k = sk.Counts()
	if k.Spans != 900 || k.Distinct != 150 || copies != 150 {
		t.Fatalf("sink counted %+v (copies planned %d), want 900 spans, 150 distinct of this run", k, copies)
	}
}

func TestOnlyLoopbackTargets(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:4317", "localhost:4318", "[::1]:4317"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:4317", "example.invalid:4317", "0.0.0.0:4317", "127.0.0.1"} {
		if CheckLoopback(bad) == nil {
			t.Errorf("%s allowed", bad)
		}
	}
}

// TestLatQuantiles: quantiles come from the requests counted between two
// snapshots, within one bucket (4%) above the true value.
func TestLatQuantiles(t *testing.T) {
	var h latHist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	a := h.snapshot()
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * 100 * time.Microsecond) // 0.1 ms .. 100 ms
	}
	q, n := LatQuantiles(a, h.snapshot(), 0.5, 0.99, 1)
	if n != 1000 {
		t.Fatalf("n = %d, want the 1000 added after the first snapshot", n)
	}
	for i, want := range []time.Duration{50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond} {
		if q[i] < want || float64(q[i]) > float64(want)*1.041 {
			t.Errorf("quantile %d = %v, want within 4%% above %v", i, q[i], want)
		}
	}
	if _, n := LatQuantiles(a, a); n != 0 {
		t.Fatalf("empty window counted %d", n)
	}
}

// TestWaitDrainOutwaitsARetry: spans that arrive after a pause longer than
// an exporter's first retries (a batch the sink refused once, sent again)
// are waited for; the wait ends as soon as every span wanted is in, and a
// sink that stays quiet for the whole quiet time ends it short.
func TestWaitDrainOutwaitsARetry(t *testing.T) {
	sk := &Sink{}
	sk.spans.Add(60)
	go func() {
		time.Sleep(2 * time.Second) // the retry's backoff: the pause under test
		sk.spans.Add(40)
	}()
	if k := WaitDrain(sk, 100, DrainQuiet, time.Minute); k.Spans != 100 {
		t.Fatalf("WaitDrain returned %d spans; want the 100 sent, the last 40 after a 2 s pause", k.Spans)
	}
	quiet := &Sink{}
	quiet.spans.Add(5)
	if k := WaitDrain(quiet, 10, 300*time.Millisecond, time.Minute); k.Spans != 5 {
		t.Fatalf("a quiet sink: %d spans; want the 5 it has", k.Spans)
	}
}
