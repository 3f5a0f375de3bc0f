package nested

import (
	"fmt"
	"strconv"
	"strings"
)

// Diagnosis is the finding's one-line summary, e.g.
//
//	fastapi 0.142.0 inside opentelemetry.instrumentation.asgi 0.48b0: one request recorded twice ("POST /rollout", 100% of server spans): two instrumentations are active; keep one
func Diagnosis(f Finding) string {
	name := strconv.Quote(f.Name)
	if f.InnerName != "" && f.InnerName != f.Name {
		name += " and " + strconv.Quote(f.InnerName)
	}
	share := percent(f.AffectedSpans, f.KindSpans) + " of " + strings.ToLower(f.Kind) + " spans"
	return Wording(f.OuterScope.String(), f.InnerScope.String(), f.Kind, name+", "+share)
}

// Wording says what a nested duplicate of kind (a span kind, "SERVER" …)
// means and what to do about it, for the detector's findings and for the
// processor's status page, which keeps no shares: detail is what goes in
// the parentheses (the quoted span name, and the share where it is known).
func Wording(outerScope, innerScope, kind, detail string) string {
	what := "operation"
	switch kind {
	case "SERVER":
		what = "request"
	case "CLIENT":
		what = "outgoing call"
	case "PRODUCER":
		what = "message sent"
	case "CONSUMER":
		what = "message received"
	}
	advice := "two instrumentations are active; keep one"
	if outerScope == innerScope {
		advice = "the same instrumentation is applied twice (a handler or client wrapped twice?); keep one"
	}
	return fmt.Sprintf("%s inside %s: one %s recorded twice (%s): %s", innerScope, outerScope, what, detail, advice)
}

// percent formats n/total without rounding a part up to 100% or down to
// 0%.
func percent(n, total int) string {
	if total <= 0 {
		return "?%"
	}
	if n >= total {
		return "100%"
	}
	p := 100 * float64(n) / float64(total)
	switch {
	case n <= 0:
		return "0%"
	case p < 0.1:
		return "<0.1%"
	case p > 99.9:
		return ">99.9%"
	}
	s := strconv.FormatFloat(p, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}
