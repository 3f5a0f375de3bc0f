package analyze

import (
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type span struct {
	trace, id byte
	name      string
	end       int64 // end timestamp offset, to make content differ
}

func traces(service string, spans ...span) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if service != "" {
		rs.Resource().Attributes().PutStr("service.name", service)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("test")
	for _, s := range spans {
		sp := ss.Spans().AppendEmpty()
		if s.trace != 0 {
			sp.SetTraceID(pcommon.TraceID{s.trace, 1})
		}
		if s.id != 0 {
			sp.SetSpanID(pcommon.SpanID{s.id, 2})
		}
		sp.SetName(s.name)
		sp.SetStartTimestamp(pcommon.Timestamp(t0.UnixNano()))
		sp.SetEndTimestamp(pcommon.Timestamp(t0.UnixNano() + 1000 + s.end))
		sp.Attributes().PutInt("n", int64(s.id))
	}
	return td
}

func at(seq uint64, after time.Duration, peer string) Arrival {
	return Arrival{Seq: seq, Received: t0.Add(after), Peer: peer, Protocol: "grpc"}
}

func TestSpansClean(t *testing.T) {
	a := New(Options{})
	a.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}, span{1, 2, "b", 0}))
	a.AddTraces(at(2, time.Second, "p1"), traces("svc", span{2, 1, "a", 0}))
	r := a.Report()
	if !r.Clean() || len(r.Findings) != 0 || r.DuplicateRatio() != 0 {
		t.Fatalf("clean input: Clean=%v findings=%v ratio=%v", r.Clean(), r.Findings, r.DuplicateRatio())
	}
	want := SpanReport{Received: 3, Unique: 3, Groups: []SpanGroup{
		{Service: "svc", Name: "a", Received: 2, Unique: 2},
		{Service: "svc", Name: "b", Received: 1, Unique: 1},
	}}
	if !reflect.DeepEqual(r.Spans, want) {
		t.Fatalf("spans:\n got %+v\nwant %+v", r.Spans, want)
	}
	if r.Requests.Traces != 2 || r.Requests.Connections != 1 || r.Requests.WholeRepeats != 0 {
		t.Errorf("requests = %+v", r.Requests)
	}
}

func TestSpansTwoExporters(t *testing.T) {
	a := New(Options{})
	batch := func() ptrace.Traces { return traces("svc", span{1, 1, "rollout", 0}, span{1, 2, "verify", 0}) }
	a.AddTraces(at(1, 0, "p1"), batch())
	a.AddTraces(at(2, 12*time.Millisecond, "p2"), batch())
	r := a.Report()
	if r.Clean() {
		t.Fatal("Clean() = true with every span twice")
	}
	if got := r.DuplicateRatio(); got != 0.5 {
		t.Errorf("DuplicateRatio = %v, want 0.5", got)
	}
	d := Delays{Min: Millis(12 * time.Millisecond), Median: Millis(12 * time.Millisecond), Max: Millis(12 * time.Millisecond)}
	want := SpanReport{Received: 4, Unique: 2, Duplicated: 2, ExtraCopies: 2, Groups: []SpanGroup{
		{Service: "svc", Name: "rollout", Received: 2, Unique: 1, Duplicated: 1, ExtraCopies: 1, Copies: []CopyCount{{2, 1}}, Delays: &d,
			Examples: []SpanExample{{TraceID: "01010000000000000000000000000000", SpanID: "0102000000000000", Copies: 2, Delays: []Millis{Millis(12 * time.Millisecond)}}}},
		{Service: "svc", Name: "verify", Received: 2, Unique: 1, Duplicated: 1, ExtraCopies: 1, Copies: []CopyCount{{2, 1}}, Delays: &d,
			Examples: []SpanExample{{TraceID: "01010000000000000000000000000000", SpanID: "0202000000000000", Copies: 2, Delays: []Millis{Millis(12 * time.Millisecond)}}}},
	}}
	if !reflect.DeepEqual(r.Spans, want) {
		t.Fatalf("spans:\n got %+v\nwant %+v", r.Spans, want)
	}
	wantF := []Finding{{
		Signal: SignalSpans, Diagnosis: DiagTwoExporters, Subject: `service "svc"`, Items: 2,
		Line: `spans of service "svc": 2 extra copies of spans rollout, verify, identical, 12ms after the first, on 2 connections: two exporters in one process (identical copies from one resource within the 5s export interval)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	if r.Requests.WholeRepeats != 1 {
		t.Errorf("WholeRepeats = %d, want 1", r.Requests.WholeRepeats)
	}
}

func TestSpansResentBatch(t *testing.T) {
	a := New(Options{})
	a.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}, span{1, 2, "a", 0}))
	// The same request again on the same connection, 15s later: a retry
	// after the client's timeout and backoff.
	a.AddTraces(at(2, 15*time.Second, "p1"), traces("svc", span{1, 1, "a", 0}, span{1, 2, "a", 0}))
	r := a.Report()
	wantF := []Finding{{
		Signal: SignalSpans, Diagnosis: DiagResentBatch, Subject: `service "svc"`, Items: 2,
		Line: `spans of service "svc": 2 extra copies of spans a, identical, 15s after the first, later than the 5s export interval; 1 request repeated an earlier request item for item: a re-sent batch (a whole request repeated)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
}

func TestSpansLateCopiesAreResent(t *testing.T) {
	a := New(Options{ExportInterval: time.Second})
	a.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}))
	// Not a whole repeat (a new span rides along), 3s later on another
	// connection: later than the export interval.
	a.AddTraces(at(2, 3*time.Second, "p2"), traces("svc", span{1, 1, "a", 0}, span{1, 3, "a", 0}))
	r := a.Report()
	wantF := []Finding{{
		Signal: SignalSpans, Diagnosis: DiagResentBatch, Subject: `service "svc"`, Items: 1,
		Line: `spans of service "svc": 1 extra copy of spans a, identical, 3s after the first, later than the 1s export interval: a re-sent batch (a retry or replay)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	// A whole request repeated within the interval, even on the same
	// connection, is two exporters (they may share a connection pool): a
	// retry comes only after a timeout and a backoff.
	b := New(Options{ExportInterval: time.Second})
	b.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}))
	b.AddTraces(at(2, 500*time.Millisecond, "p1"), traces("svc", span{1, 1, "a", 0}))
	if fs := b.Report().Findings; len(fs) != 1 || fs[0].Diagnosis != DiagTwoExporters {
		t.Fatalf("findings = %+v, want one two-exporters finding", fs)
	}
}

func TestSpansIdentityCollision(t *testing.T) {
	a := New(Options{})
	a.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}))
	a.AddTraces(at(2, time.Millisecond, "p2"), traces("svc", span{1, 1, "a", 500}))
	r := a.Report()
	if r.Spans.Conflicting != 1 || r.Spans.Groups[0].Conflicting != 1 || !r.Spans.Groups[0].Examples[0].Differ {
		t.Fatalf("conflicting not counted: %+v", r.Spans)
	}
	wantF := []Finding{{
		Signal: SignalSpans, Diagnosis: DiagIdentityCollision, Subject: `service "svc"`, Items: 1,
		Line: `spans of service "svc": 1 span id arrived again with different content (a): an identity collision (independent writers share span ids)`,
	}}
	if !reflect.DeepEqual(r.Findings, wantF) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, wantF)
	}
	// The same ids from another resource differ too.
	b := New(Options{})
	b.AddTraces(at(1, 0, "p1"), traces("svc", span{1, 1, "a", 0}))
	b.AddTraces(at(2, 0, "p1"), traces("other", span{1, 1, "a", 0}))
	if fs := b.Report().Findings; len(fs) != 1 || fs[0].Diagnosis != DiagIdentityCollision {
		t.Fatalf("findings = %+v, want one identity collision", fs)
	}
}

func TestSpansThreeCopiesInvalidIDsAndInRequestDuplicates(t *testing.T) {
	a := New(Options{})
	a.AddTraces(at(1, 0, "p1"), traces("", span{1, 1, "a", 0}, span{1, 1, "a", 0}, span{0, 5, "z", 0}, span{0, 5, "z", 0}))
	a.AddTraces(at(2, 2*time.Millisecond, "p2"), traces("", span{1, 1, "a", 0}, span{3, 0, "z", 0}))
	r := a.Report()
	if r.Spans.Received != 6 || r.Spans.Unique != 4 || r.Spans.InvalidIDs != 3 || r.Spans.Duplicated != 1 || r.Spans.ExtraCopies != 2 {
		t.Fatalf("spans = %+v", r.Spans)
	}
	g := r.Spans.Groups[0]
	if g.Name != "a" || !reflect.DeepEqual(g.Copies, []CopyCount{{3, 1}}) || g.Delays.Min != 0 || g.Delays.Max != Millis(2*time.Millisecond) {
		t.Fatalf("group a = %+v", g)
	}
	if len(r.Findings) != 1 || r.Findings[0].Diagnosis != DiagTwoExporters || r.Findings[0].Subject != "a resource without service.name" {
		t.Fatalf("findings = %+v", r.Findings)
	}
}

// TestSpansSameContentOtherIDsIsNoRepeat: a request of other spans (other
// ids) with the same content does not repeat an earlier one; the same
// spans again do. Files have only this to tell a re-send by.
func TestSpansSameContentOtherIDsIsNoRepeat(t *testing.T) {
	a := New(Options{NoArrival: true})
	a.AddTraces(Arrival{Seq: 1, File: "t.jsonl", Line: 1}, traces("svc", span{1, 1, "a", 0}))
	a.AddTraces(Arrival{Seq: 2, File: "t.jsonl", Line: 2}, traces("svc", span{2, 1, "a", 0}))
	if r := a.Report(); r.Requests.WholeRepeats != 0 || len(r.Findings) != 0 {
		t.Fatalf("whole repeats %d, findings %+v; want none", r.Requests.WholeRepeats, r.Findings)
	}
	a.AddTraces(Arrival{Seq: 3, File: "t.jsonl", Line: 3}, traces("svc", span{2, 1, "a", 0}))
	r := a.Report()
	want := `spans of service "svc": 1 extra copy of spans a, identical: 1 request repeated an earlier request item for item (e.g. t.jsonl line 3 repeats t.jsonl line 2 item for item): a re-sent batch, or two exporters that batched alike (the source records no arrival times to tell them apart)`
	if r.Requests.WholeRepeats != 1 || len(r.Findings) != 1 || r.Findings[0].Line != want || r.Findings[0].Diagnosis != DiagResentBatch {
		t.Fatalf("whole repeats %d, findings %+v\nwant line %s", r.Requests.WholeRepeats, r.Findings, want)
	}
}
