package dedupprocessor

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/doubletake/doubletake/internal/scan"
)

// Copies that name their cause. A release known to export twice (the
// hazard database scan and verify read, internal/scan/hazards.yaml) often
// records under its own instrumentation scope: FastAPI 0.142.x records its
// spans and log events under scope "fastapi", version 0.142.x, and sends
// every one of them twice. When a copy is found, its scope is matched
// against the database (scan.ScopeMatcher), once per scope of a request
// that holds copies, never for a span or record that is not a copy; the
// release found is kept on the service's ledger (one pointer and a count,
// so the state is bounded by telemetry.max_services) and named with
// verify's advice on the status page, in /status.json, in the summary
// line and in the warning. A listed release is matched without
// allocating; the matcher holds nothing that grows.

// copyScope remembers, while one resource's items are judged, the scope
// whose release was looked up last: the copies of one scope cost one
// lookup.
type copyScope struct {
	at  int // the scope's index + 1; 0 before any lookup
	rel *scan.Finding
}

// copyIn notes a copy of the si-th scope of the resource c counts: when
// scope names a known release, the copy is counted against it.
func (c *counts) copyIn(cs *copyScope, m *scan.ScopeMatcher, si int, scope pcommon.InstrumentationScope) {
	if cs.at != si+1 {
		cs.at, cs.rel = si+1, m.Match(scope.Name(), scope.Version())
	}
	if cs.rel != nil {
		c.release = cs.rel
		c.releaseCopies++
	}
}

// copyRelease is the release known to export twice among the scopes of a
// metric copy's resource, nil when none. A second metric reader exports
// every meter of its provider, so the copied stream's own scope is often
// the application's: FastAPI 0.142's reader sends the app's counters
// beside its own http.server.* metrics under scope "fastapi" 0.142.x. It
// is looked up when a request's event names a copy (once per resource and
// request at most), never for a point that is not one.
func copyRelease(m *scan.ScopeMatcher, rm pmetric.ResourceMetrics) *scan.Finding {
	if m == nil {
		return nil
	}
	sms := rm.ScopeMetrics()
	for i := range sms.Len() {
		sc := sms.At(i).Scope()
		if f := m.Match(sc.Name(), sc.Version()); f != nil {
			return f
		}
	}
	return nil
}
