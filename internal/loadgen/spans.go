package loadgen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// spanTemplate is an encoded OTLP ExportTraceServiceRequest of batch spans
// with the offsets of every span's ids, so that a request is built by
// copying the template and writing 24 bytes per span: no encoding while the
// load runs. Every span has the same content (name, kind, times, status,
// attributes), so a span sent twice is an exact duplicate wherever it sits in
// a request, never a conflict.
type spanTemplate struct {
	buf    []byte
	tidOff []int // offset of span i's 16-byte trace_id
	sidOff []int // offset of span i's 8-byte span_id
}

// templateResources is how many resources (services) a request spreads its
// spans over, like a gateway's input from several services.
const templateResources = 10

func newSpanTemplate(batch int) (*spanTemplate, error) {
	if batch < 1 {
		return nil, fmt.Errorf("batch must be at least 1, got %d", batch)
	}
	td := ptrace.NewTraces()
	res := min(templateResources, batch)
	i := 0
	for r := range res {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("load-svc-%02d", r))
		rs.Resource().Attributes().PutStr("host.name", "load-host-1")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("doubletake-load")
		n := batch / res
		if r < batch%res {
			n++
		}
		for range n {
			s := ss.Spans().AppendEmpty()
			tid, sid := marker(i)
			s.SetTraceID(pcommon.TraceID(tid))
			s.SetSpanID(pcommon.SpanID(sid))
			s.SetName("GET /api/v1/rollouts/{id}")
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(1_700_000_000_000_000_000)
			s.SetEndTimestamp(1_700_000_000_250_000_000)
			s.Status().SetCode(ptrace.StatusCodeOk)
			s.Attributes().PutStr("http.route", "/api/v1/rollouts/{id}")
			s.Attributes().PutInt("http.response.status_code", 200)
			s.Attributes().PutStr("url.scheme", "https")
			i++
		}
	}
	buf, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		return nil, err
	}
	t := &spanTemplate{buf: buf, tidOff: make([]int, batch), sidOff: make([]int, batch)}
	// The encoder need not write fields in field order: find every marker
	// by its tag and prefix in one pass, read the span index it carries and
	// check the rest of it. trace_id is field 1 of Span (tag 0x0a, length
	// 16), span_id field 2 (tag 0x12, length 8).
	found := 0
	for _, f := range []struct {
		prefix string
		size   int
		offs   []int
	}{{"\x0a\x10" + tidPrefix, 16, t.tidOff}, {"\x12\x08" + sidPrefix, 8, t.sidOff}} {
		for i := range f.offs {
			f.offs[i] = -1
		}
		for from := 0; ; {
			at := bytes.Index(buf[from:], []byte(f.prefix))
			if at < 0 {
				break
			}
			off := from + at + 2
			from = off + f.size
			if from > len(buf) {
				break
			}
			i := int(binary.BigEndian.Uint32(buf[off+len(f.prefix)-2:]))
			tid, sid := marker(i)
			want := tid[:]
			if f.size == 8 {
				want = sid[:]
			}
			if i >= batch || f.offs[i] >= 0 || !bytes.Equal(buf[off:off+f.size], want) {
				return nil, fmt.Errorf("unexpected id marker at offset %d of the encoded template", off)
			}
			f.offs[i] = off
			found++
		}
	}
	if found != 2*batch {
		return nil, fmt.Errorf("found %d of the %d id markers in the encoded template", found, 2*batch)
	}
	return t, nil
}

// marker is the placeholder ids of template span i: patterns no other field
// of the template contains.
func marker(i int) (tid [16]byte, sid [8]byte) {
	copy(tid[:], tidPrefix)
	binary.BigEndian.PutUint32(tid[4:], uint32(i))
	copy(tid[8:], "\x3c\xc3\x5a\xa5\x96\x69\x0f\xf0")
	copy(sid[:], sidPrefix)
	binary.BigEndian.PutUint32(sid[2:], uint32(i))
	copy(sid[6:], "\x1e\xe1")
	return tid, sid
}

const (
	tidPrefix = "\xa5\x5a\xc3\x3c"
	sidPrefix = "\xe1\x1e"
)

// Batch returns how many spans a request carries.
func (t *spanTemplate) Batch() int { return len(t.tidOff) }

// seqRange is n consecutive sequence numbers from first.
type seqRange struct {
	first uint64
	n     int
}

// plan says which sequence numbers a request carries, position by
// position: the ranges in order, copies (spans already sent) first, then
// fresh ones. A plan is valid until its planner's next call.
type plan struct {
	ranges []seqRange
	copies int // spans that repeat spans sent before
}

// build writes the request of plan p into dst (reused) and returns it.
func (t *spanTemplate) build(dst []byte, p plan, nonce uint64) []byte {
	dst = append(dst[:0], t.buf...)
	j := 0
	for _, r := range p.ranges {
		for i := range r.n {
			putIDs((*[16]byte)(dst[t.tidOff[j]:]), (*[8]byte)(dst[t.sidOff[j]:]), nonce, r.first+uint64(i))
			j++
		}
	}
	if j != len(t.tidOff) {
		panic(fmt.Sprintf("plan covers %d spans of a %d-span request", j, len(t.tidOff)))
	}
	return dst
}

// DupMode is how duplicates are shaped.
type DupMode string

const (
	// DupBatch re-sends whole requests already sent (an exporter retrying a
	// batch that had arrived, or a second identical pipeline).
	DupBatch DupMode = "batch"
	// DupMixed puts copies of the previous request's spans into requests
	// of new spans (a second span processor batching on its own schedule).
	DupMixed DupMode = "mixed"
)

// planner decides what each request of one sender carries, so that a share
// dup of all spans sent are copies of spans sent before.
//
// Batch mode: after each new request, dup/(1-dup) copies of it are owed; a
// copy is the last new request again, byte for byte. Mixed mode: every
// request after the first carries k = dup·batch copies and batch-k new
// spans; the copies are the new spans of the previous requests, newest
// first, so that no request carries a span twice and, above dup 0.5, each
// span is repeated in several later requests.
type planner struct {
	batch int
	dup   float64
	mode  DupMode
	alloc func(n int) uint64 // reserves n fresh sequence numbers, returns the first

	credit  float64    // batch mode: copies owed, in requests
	history []seqRange // fresh ranges of the last requests, oldest first
	ranges  []seqRange // the current plan's
}

func (p *planner) next() plan {
	p.ranges = p.ranges[:0]
	if p.dup <= 0 || len(p.history) == 0 {
		return p.fresh(0)
	}
	if p.mode == DupMixed {
		k := int(math.Round(p.dup * float64(p.batch)))
		k = min(max(k, 0), p.batch-1)
		left := k
		for i := len(p.history) - 1; i >= 0 && left > 0; i-- {
			r := p.history[i]
			r.n = min(r.n, left)
			p.ranges = append(p.ranges, r)
			left -= r.n
		}
		return p.fresh(k - left)
	}
	if p.credit >= 1-1e-9 {
		p.credit--
		last := p.history[len(p.history)-1]
		p.ranges = append(p.ranges, last)
		return plan{ranges: p.ranges, copies: last.n}
	}
	return p.fresh(0)
}

// fresh completes the plan with new spans after the copies p.ranges holds
// already; if the history came up short of the copies asked, the rest is new
// too.
func (p *planner) fresh(copies int) plan {
	n := p.batch - copies
	r := seqRange{first: p.alloc(n), n: n}
	p.ranges = append(p.ranges, r)
	// Keep as many past requests as the copies of one request can reach.
	keep := 1
	if p.mode == DupMixed && n > 0 {
		keep = p.batch/n + 1
	}
	p.history = append(p.history, r)
	if len(p.history) > keep {
		p.history = append(p.history[:0], p.history[len(p.history)-keep:]...)
	}
	if p.mode != DupMixed && p.dup > 0 {
		p.credit += p.dup / (1 - p.dup)
	}
	return plan{ranges: p.ranges, copies: copies}
}
