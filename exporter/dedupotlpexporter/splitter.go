package dedupotlpexporter

import (
	"context"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// splittable are the operations sendSplitting needs on one signal's data.
type splittable[T any] struct {
	count func(T) int
	// split moves about half of the items of src (count > 1) into a new T,
	// leaving the rest in src.
	split func(src T) T
	// moveTo appends all of src to dst.
	moveTo func(src, dst T)
	// empty makes an empty T.
	empty func() T
}

// requestIndependent are permanent refusals that say nothing about the
// data (credentials, a wrong path): splitting would only multiply them.
func requestIndependent(err error) bool {
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented, codes.NotFound:
			return true
		}
	}
	return false
}

// sendSplitting sends data; when the upstream refuses it for good, it
// sends halves until only the refused items are left, and hands those to
// lost. Items whose send failed with a retryable error are left in data
// (whatever was delivered or lost is moved out of it) and that error is
// returned, so that the retry sends only them: nothing is sent twice by
// the split. It returns nil when everything was delivered, the permanent
// error when something was lost, or a retryable error.
func sendSplitting[T any](ctx context.Context, data T, send func(context.Context, T) error, ops splittable[T], lost func(context.Context, T, error)) error {
	err := send(ctx, data)
	if err == nil || !consumererror.IsPermanent(err) {
		return err
	}
	if ops.count(data) <= 1 || requestIndependent(err) {
		lost(ctx, data, err)
		return err
	}
	half := ops.split(data)
	rest := ops.empty()
	ops.moveTo(data, rest) // data is now empty; what must be retried returns to it
	var retry, permanent error
	for _, part := range []T{half, rest} {
		switch perr := sendSplitting(ctx, part, send, ops, lost); {
		case perr == nil:
		case consumererror.IsPermanent(perr):
			permanent = perr
		default:
			retry = perr
			ops.moveTo(part, data)
		}
	}
	if retry != nil {
		return retry
	}
	return permanent
}

// level is one level of a signal's tree as pdata has it: the resources of
// a request, the scopes of a resource, or the items of a scope.
type level[E any] interface {
	Len() int
	At(int) E
	RemoveIf(func(E) bool)
	AppendEmpty() E
}

// resource and scope are what a signal's resource and scope elements have
// in common: their own fields, and moving them whole.
type resource[R any] interface {
	MoveTo(R)
	Resource() pcommon.Resource
	SchemaUrl() string
	SetSchemaUrl(string)
}

type scope[S any] interface {
	MoveTo(S)
	Scope() pcommon.InstrumentationScope
	SchemaUrl() string
	SetSchemaUrl(string)
}

// splitHalf is the one split algorithm, for every signal: it moves the
// first want items under src's resources (want less than what they hold)
// into dst. A resource or scope that holds no more than what is left to
// move goes whole; the one that holds more is divided: its own fields are
// copied to a new element of dst, which takes part of what it holds.
// Resources and scopes left empty are removed from src. scopes and items
// are the signal's accessors (ptrace.ResourceSpans.ScopeSpans,
// ptrace.ScopeSpans.Spans...).
func splitHalf[R resource[R], S scope[S], I interface{ MoveTo(I) }, RL level[R], SL level[S], IL level[I]](
	src, dst RL, want int, scopes func(R) SL, items func(S) IL,
) {
	inScope := func(s S) int { return items(s).Len() }
	inResource := func(r R) int {
		n := 0
		for i, ss := 0, scopes(r); i < ss.Len(); i++ {
			n += inScope(ss.At(i))
		}
		return n
	}
	moveFirst(src, dst, &want, inResource, func(s, d R) {
		s.Resource().CopyTo(d.Resource())
		d.SetSchemaUrl(s.SchemaUrl())
		moveFirst(scopes(s), scopes(d), &want, inScope, func(s, d S) {
			s.Scope().CopyTo(d.Scope())
			d.SetSchemaUrl(s.SchemaUrl())
			moveFirst(items(s), items(d), &want, func(I) int { return 1 }, nil)
		})
	})
}

// moveFirst moves elements of src to dst, in order, until *budget items
// have moved: an element holding (count) no more than what is left moves
// whole; the one holding more is handed to descend with a new element of
// dst, and removed from src if that left it empty. At the items' level
// count is 1, so descend is never called.
func moveFirst[E interface{ MoveTo(E) }, L level[E]](src, dst L, budget *int, count func(E) int, descend func(src, dst E)) {
	src.RemoveIf(func(e E) bool {
		if *budget <= 0 {
			return false
		}
		n := count(e)
		if n <= *budget {
			e.MoveTo(dst.AppendEmpty())
			*budget -= n
			return true
		}
		descend(e, dst.AppendEmpty())
		return count(e) == 0
	})
}

var tracesOps = splittable[ptrace.Traces]{
	count: ptrace.Traces.SpanCount,
	split: func(src ptrace.Traces) ptrace.Traces {
		dst := ptrace.NewTraces()
		splitHalf(src.ResourceSpans(), dst.ResourceSpans(), src.SpanCount()/2, ptrace.ResourceSpans.ScopeSpans, ptrace.ScopeSpans.Spans)
		return dst
	},
	moveTo: func(src, dst ptrace.Traces) { src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans()) },
	empty:  ptrace.NewTraces,
}

var logsOps = splittable[plog.Logs]{
	count: plog.Logs.LogRecordCount,
	split: func(src plog.Logs) plog.Logs {
		dst := plog.NewLogs()
		splitHalf(src.ResourceLogs(), dst.ResourceLogs(), src.LogRecordCount()/2, plog.ResourceLogs.ScopeLogs, plog.ScopeLogs.LogRecords)
		return dst
	},
	moveTo: func(src, dst plog.Logs) { src.ResourceLogs().MoveAndAppendTo(dst.ResourceLogs()) },
	empty:  plog.NewLogs,
}

// Metrics are split by whole metrics (a metric's points stay together).
var metricsOps = splittable[pmetric.Metrics]{
	count: pmetric.Metrics.MetricCount,
	split: func(src pmetric.Metrics) pmetric.Metrics {
		dst := pmetric.NewMetrics()
		splitHalf(src.ResourceMetrics(), dst.ResourceMetrics(), src.MetricCount()/2, pmetric.ResourceMetrics.ScopeMetrics, pmetric.ScopeMetrics.Metrics)
		return dst
	},
	moveTo: func(src, dst pmetric.Metrics) { src.ResourceMetrics().MoveAndAppendTo(dst.ResourceMetrics()) },
	empty:  pmetric.NewMetrics,
}
