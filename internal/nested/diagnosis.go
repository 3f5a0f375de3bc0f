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
	what := "operation"
	switch f.Kind {
	case "SERVER":
		what = "request"
	case "CLIENT":
		what = "outgoing call"
	case "PRODUCER":
		what = "message sent"
	case "CONSUMER":
		what = "message received"
	}
	name := strconv.Quote(f.Name)
	if f.InnerName != "" && f.InnerName != f.Name {
		name += " and " + strconv.Quote(f.InnerName)
	}
	advice := "two instrumentations are active; keep one"
	if f.OuterScope == f.InnerScope {
		advice = "the same instrumentation is applied twice (a handler or client wrapped twice?); keep one"
	}
	return fmt.Sprintf("%s inside %s: one %s recorded twice (%s, %s of %s spans): %s",
		f.InnerScope, f.OuterScope, what, name, percent(f.AffectedSpans, f.KindSpans), strings.ToLower(f.Kind), advice)
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
