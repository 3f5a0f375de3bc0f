package analyze

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/plog"
)

// LogReport is the log part of a Report. Log records have no id: a
// duplicate is a record identical to an earlier one in everything (resource,
// scope, timestamps, severity, body, attributes, trace context).
type LogReport struct {
	Received    int `json:"received"`
	Unique      int `json:"unique"`
	Duplicated  int `json:"duplicated"`   // distinct records that arrived more than once
	ExtraCopies int `json:"extra_copies"` // copies after the first
	// Untimed counts records with neither a timestamp nor an observed
	// timestamp: identical ones may be legitimately repeated, so they are
	// counted as unique and never compared.
	Untimed int `json:"untimed"`
	// Groups has one entry per service and scope, those with duplicates first.
	Groups []LogGroup `json:"groups"`
}

// LogGroup counts the log records of one service and instrumentation scope.
type LogGroup struct {
	Service     string       `json:"service"`
	Scope       string       `json:"scope"`
	Received    int          `json:"received"`
	Unique      int          `json:"unique"`
	Duplicated  int          `json:"duplicated"`
	ExtraCopies int          `json:"extra_copies"`
	Copies      []CopyCount  `json:"copies"`
	Delays      *Delays      `json:"delays,omitempty"`
	Examples    []LogExample `json:"examples"`
}

// LogExample is one duplicated record.
type LogExample struct {
	Body   string   `json:"body"` // truncated
	Copies int      `json:"copies"`
	Delays []Millis `json:"delays_ms"`
}

type logGroupAcc struct {
	service, scope string
	groupCounts
	bodies map[xxh3.Uint128]string // examples, bounded by MaxExamples
}

// logIndex counts log records by their digest (copies.go).
type logIndex struct {
	copyIndex[xxh3.Uint128, struct{}]
	groups   []logGroupAcc
	groupIdx map[[2]string]uint32
	received int
	untimed  int
}

func (x *logIndex) init() {
	x.copyIndex.init()
	x.groupIdx = map[[2]string]uint32{}
}

func (x *logIndex) group(service, scope string) uint32 {
	k := [2]string{service, scope}
	g, ok := x.groupIdx[k]
	if !ok {
		g = uint32(len(x.groups))
		x.groupIdx[k] = g
		x.groups = append(x.groups, logGroupAcc{service: service, scope: scope})
	}
	return g
}

const maxBody = 120

func truncate(s string) string {
	if len(s) <= maxBody {
		return s
	}
	cut := maxBody
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// AddLogs adds one export request of log records.
func (a *Analyzer) AddLogs(at Arrival, ld plog.Logs) {
	x := &a.logs
	ri := a.beginRequest(at, SignalLogs)
	n := 0
	e := &a.e
	for _, rl := range ld.ResourceLogs().All() {
		res := describeResource(rl.Resource(), e)
		for _, sl := range rl.ScopeLogs().All() {
			sh := scopeHash(sl.Scope(), e)
			gi := x.group(res.service, sl.Scope().Name())
			for _, lr := range sl.LogRecords().All() {
				n++
				x.received++
				g := &x.groups[gi]
				g.received++
				k := logHash(e, res.hash, sh, lr)
				a.item(k.Lo)
				if lr.Timestamp() == 0 && lr.ObservedTimestamp() == 0 {
					x.untimed++
					g.unique++
					continue
				}
				ent, seen := x.add(k, struct{}{}, gi, ri)
				if !seen {
					g.unique++
					continue
				}
				fg := &x.groups[ent.group]
				fg.repeated(ent.copies)
				if ent.copies == 2 && len(fg.bodies) < a.opts.MaxExamples {
					if fg.bodies == nil {
						fg.bodies = map[xxh3.Uint128]string{}
					}
					fg.bodies[k] = strings.Clone(truncate(lr.Body().AsString()))
				}
			}
		}
	}
	a.endRequest(ri, n)
}

func logHash(e *enc, res, scope uint64, lr plog.LogRecord) xxh3.Uint128 {
	e.Reset()
	e.U64(res)
	e.U64(scope)
	e.U64(uint64(lr.Timestamp()))
	e.U64(uint64(lr.ObservedTimestamp()))
	e.U64(uint64(lr.SeverityNumber()))
	e.Str(lr.SeverityText())
	e.Value(lr.Body())
	e.Attrs(lr.Attributes())
	e.U64(uint64(lr.DroppedAttributesCount()))
	e.U64(uint64(lr.Flags()))
	t, s := lr.TraceID(), lr.SpanID()
	e.B = append(e.B, t[:]...)
	e.B = append(e.B, s[:]...)
	e.Str(lr.EventName())
	return e.sum128()
}

func (a *Analyzer) logReport(r *Report) {
	x := &a.logs
	lr := &r.Logs
	lr.Received = x.received
	lr.Untimed = x.untimed
	lr.Unique = len(x.entries) + x.untimed
	lr.ExtraCopies = len(x.dups)

	delays := make([][]time.Duration, len(x.groups))
	examples := make([]map[xxh3.Uint128]*LogExample, len(x.groups))
	order := make([][]xxh3.Uint128, len(x.groups))
	findings := findingSet{}
	for _, d := range x.dups {
		ent := x.entries[d.key]
		acc := &x.groups[ent.group]
		dl := a.delay(ent.first, d.req)
		if !a.opts.NoArrival {
			delays[ent.group] = append(delays[ent.group], dl)
		}
		diag := a.classify(ent.first, d.req)
		f := findings.get(diag, acc.service)
		scope := acc.scope
		if scope == "" {
			scope = "(no scope name)"
		}
		f.addCopy(a, ent.first, d.req, scope)
		if body, ok := acc.bodies[d.key]; ok {
			if examples[ent.group] == nil {
				examples[ent.group] = map[xxh3.Uint128]*LogExample{}
			}
			ex := examples[ent.group][d.key]
			if ex == nil {
				ex = &LogExample{Body: body, Copies: int(ent.copies)}
				examples[ent.group][d.key] = ex
				order[ent.group] = append(order[ent.group], d.key)
			}
			if !a.opts.NoArrival {
				ex.Delays = append(ex.Delays, Millis(dl))
			}
		}
	}
	for i, acc := range x.groups {
		lr.Duplicated += acc.duplicated
		lg := LogGroup{
			Service: acc.service, Scope: acc.scope,
			Received: acc.received, Unique: acc.unique,
			Duplicated: acc.duplicated, ExtraCopies: acc.extra,
		}
		lg.Copies, lg.Delays = copyCounts(acc.copies), delaysOrNil(delays[i])
		for _, k := range order[i] {
			lg.Examples = append(lg.Examples, *examples[i][k])
		}
		lr.Groups = append(lr.Groups, lg)
	}
	slices.SortFunc(lr.Groups, func(a, b LogGroup) int {
		return cmp.Or(
			cmp.Compare(b.ExtraCopies, a.ExtraCopies),
			strings.Compare(a.Service, b.Service),
			strings.Compare(a.Scope, b.Scope),
		)
	})
	findings.report(a, r, SignalLogs, "records from scope")
}
