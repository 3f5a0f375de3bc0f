package nested

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Defaults for Options' zero fields.
const (
	DefaultMinCoverage = 0.9
	DefaultSkew        = time.Millisecond
	DefaultMaxSpans    = 100_000
	DefaultMaxExamples = 3
	// DefaultMaxBytes bounds what a Detector's held spans take: about
	// 90% of it is left for DefaultMaxSpans spans of ordinary size.
	DefaultMaxBytes = 64 << 20
	// MaxMaxSpans is the largest MaxSpans (slots are int32).
	MaxMaxSpans = 1 << 24

	// ProcessorMaxSpans and ProcessorMaxBytes are the dedup processor's
	// bounds (traces.nested.max_spans, max_bytes): a gateway holds the
	// detector for as long as it runs, next to its windows, so it keeps
	// a fifth of what a verify or audit run, which ends, may hold
	// (DefaultMaxSpans, DefaultMaxBytes): about 7 MB for the spans.
	ProcessorMaxSpans = 20_000
	ProcessorMaxBytes = 16 << 20
)

// Options tune the rule. The zero value means every default.
type Options struct {
	// MinCoverage is the share of the outer span's duration the inner
	// span must cover: inner ≥ MinCoverage × outer − Skew. 0 means
	// DefaultMinCoverage (0.9); otherwise in (0, 1].
	MinCoverage float64 `mapstructure:"min_coverage" json:"min_coverage"`
	// Skew is how far the inner span may start before the outer one or
	// end after it, and the absolute slack on MinCoverage (timestamps
	// rounded by an SDK, instrumentation overhead on very short spans).
	// 0 means DefaultSkew (1ms); it is never negative.
	Skew time.Duration `mapstructure:"skew" json:"skew"`
	// MaxSpans bounds the spans a Detector holds while it waits for
	// their parents or children; the oldest go first, counted in
	// Stats.Evicted. 0 means DefaultMaxSpans (100,000: about 35 MB,
	// some 340 bytes a span); at most MaxMaxSpans.
	MaxSpans int `mapstructure:"max_spans" json:"max_spans"`
	// MaxBytes bounds the bytes a Detector's held spans take: a fixed
	// SpanOverhead each plus their strings (service, scope, name, route,
	// method; each clipped to MaxStringBytes). The oldest go first,
	// counted in Stats.EvictedBytes. 0 means DefaultMaxBytes (64 MiB).
	MaxBytes int `mapstructure:"max_bytes" json:"max_bytes"`
	// MaxExamples is how many (trace, outer, inner) ids a Finding keeps.
	// 0 means DefaultMaxExamples (3); negative keeps none.
	MaxExamples int `mapstructure:"max_examples" json:"max_examples"`
	// InternalInServer also flags an INTERNAL span inside a SERVER span
	// of another scope (OpenTelemetry Python's instrumentations start an
	// INTERNAL span when a server span is already active). Off by default.
	InternalInServer bool `mapstructure:"internal_in_server" json:"internal_in_server"`
}

// Check reports a setting out of range. It is not named Validate: the
// collector's config validation calls every Validate it finds, and Options
// is embedded (squashed) in the dedup processor's traces.nested section,
// whose own Validate reports these errors once, under that section's path.
func (o Options) Check() error {
	var errs []error
	if math.IsNaN(o.MinCoverage) || o.MinCoverage < 0 || o.MinCoverage > 1 {
		errs = append(errs, fmt.Errorf("min_coverage %v: want a number in (0, 1], or 0 for the default %v", o.MinCoverage, DefaultMinCoverage))
	}
	if o.Skew < 0 {
		errs = append(errs, fmt.Errorf("skew %v: must not be negative", o.Skew))
	}
	if o.MaxSpans < 0 || o.MaxSpans > MaxMaxSpans {
		errs = append(errs, fmt.Errorf("max_spans %d: want 1 to %d, or 0 for the default %d", o.MaxSpans, MaxMaxSpans, DefaultMaxSpans))
	}
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max_bytes %d: must not be negative (0 for the default %d)", o.MaxBytes, DefaultMaxBytes))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero fields and clamps what Validate would refuse.
// CheckSet checks options whose every bound and tolerance is set, as a
// collector config sets them (its defaults are written in the default
// config): there 0 is refused for min_coverage, skew, max_spans and
// max_bytes rather than taken for a default, and max_examples 0 keeps
// none. Each error names its field, as the collector's section errors do.
func (o Options) CheckSet() error {
	var errs []error
	if math.IsNaN(o.MinCoverage) || o.MinCoverage <= 0 || o.MinCoverage > 1 {
		errs = append(errs, fmt.Errorf("min_coverage must be in (0, 1], got %v", o.MinCoverage))
	}
	if o.Skew <= 0 {
		errs = append(errs, fmt.Errorf("skew must be positive, got %s", o.Skew))
	}
	if o.MaxSpans < 1 || o.MaxSpans > MaxMaxSpans {
		errs = append(errs, fmt.Errorf("max_spans must be between 1 and %d, got %d", MaxMaxSpans, o.MaxSpans))
	}
	if o.MaxBytes < 1 {
		errs = append(errs, fmt.Errorf("max_bytes must be at least 1, got %d", o.MaxBytes))
	}
	if o.MaxExamples < 0 {
		errs = append(errs, fmt.Errorf("max_examples must not be negative (0 keeps none), got %d", o.MaxExamples))
	}
	return errors.Join(errs...)
}

// Set is o as CheckSet reads it, for the Detector: max_examples 0 keeps
// none.
func (o Options) Set() Options {
	if o.MaxExamples == 0 {
		o.MaxExamples = -1
	}
	return o
}

func (o Options) withDefaults() Options {
	if math.IsNaN(o.MinCoverage) || o.MinCoverage <= 0 || o.MinCoverage > 1 {
		o.MinCoverage = DefaultMinCoverage
	}
	if o.Skew <= 0 {
		o.Skew = DefaultSkew
	}
	if o.MaxSpans <= 0 {
		o.MaxSpans = DefaultMaxSpans
	}
	if o.MaxSpans > MaxMaxSpans {
		o.MaxSpans = MaxMaxSpans
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxExamples == 0 {
		o.MaxExamples = DefaultMaxExamples
	}
	return o
}

// Scope is an instrumentation scope.
type Scope struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// String is "name version", or the name alone.
func (s Scope) String() string {
	n := s.Name
	if n == "" {
		n = "(unnamed scope)"
	}
	if s.Version == "" {
		return n
	}
	return n + " " + s.Version
}

// How a pair matched.
const (
	ByName   = "name"   // the same span name
	ByRoute  = "route"  // the same http.route (or url.template) and HTTP method
	ByMethod = "method" // HTTP SERVER spans of one method, one of them named by the method alone, without a route
)

// spanInfo is what the rule looks at in one span.
type spanInfo struct {
	service    string
	scope      Scope
	name       string
	kind       ptrace.SpanKind // UNSPECIFIED is read as INTERNAL
	route      string          // http.route, else url.template
	method     string          // http.request.method, else http.method
	start, end uint64
}

// SpanOverhead is what MaxBytes counts for a held span besides its
// strings: its record, its index entries and its trace mark.
const SpanOverhead = 340

func kindOf(k ptrace.SpanKind) ptrace.SpanKind {
	if k == ptrace.SpanKindUnspecified {
		return ptrace.SpanKindInternal
	}
	return k
}

// kindName is the OTLP enum name without its prefix.
func kindName(k ptrace.SpanKind) string {
	switch kindOf(k) {
	case ptrace.SpanKindServer:
		return "SERVER"
	case ptrace.SpanKindClient:
		return "CLIENT"
	case ptrace.SpanKindProducer:
		return "PRODUCER"
	case ptrace.SpanKindConsumer:
		return "CONSUMER"
	case ptrace.SpanKindInternal:
		return "INTERNAL"
	}
	return fmt.Sprintf("KIND_%d", int32(k))
}

func strAttr(m pcommon.Map, keys ...string) string {
	for _, k := range keys {
		if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			return v.Str()
		}
	}
	return ""
}

// serviceName is the resource's service.name ("" when absent).
func serviceName(r pcommon.Resource) string {
	return strAttr(r.Attributes(), "service.name")
}

func readSpan(service string, scope Scope, sp ptrace.Span, in *interner) spanInfo {
	route, method := routeAndMethod(sp.Attributes())
	return spanInfo{
		service: service,
		scope:   scope,
		name:    in.str(sp.Name()),
		kind:    kindOf(sp.Kind()),
		route:   in.str(route),
		method:  in.str(method),
		start:   uint64(sp.StartTimestamp()),
		end:     uint64(sp.EndTimestamp()),
	}
}

// routeAndMethod reads, in one pass over the attributes, what
// strAttr(a, "http.route", "url.template") and strAttr(a,
// "http.request.method", "http.method") would: for each name its first
// occurrence counts, and only a non-empty string.
//
// Most attributes are none of the four: their names are told apart by
// length first, and the four kept in locals, which costs a third of a
// switch on the name into an array.
func routeAndMethod(a pcommon.Map) (route, method string) {
	var httpRoute, urlTemplate, requestMethod, httpMethod string
	var seen uint8
	for k, v := range a.All() {
		var bit uint8
		switch len(k) {
		case len("http.route"):
			if k != "http.route" {
				continue
			}
			bit = 1
		case len("url.template"):
			if k != "url.template" {
				continue
			}
			bit = 2
		case len("http.request.method"):
			if k != "http.request.method" {
				continue
			}
			bit = 4
		case len("http.method"):
			if k != "http.method" {
				continue
			}
			bit = 8
		default:
			continue
		}
		if seen&bit != 0 {
			continue
		}
		seen |= bit
		if v.Type() != pcommon.ValueTypeStr {
			continue
		}
		switch bit {
		case 1:
			httpRoute = v.Str()
		case 2:
			urlTemplate = v.Str()
		case 4:
			requestMethod = v.Str()
		default:
			httpMethod = v.Str()
		}
	}
	if httpRoute == "" {
		httpRoute = urlTemplate
	}
	if requestMethod == "" {
		requestMethod = httpMethod
	}
	return httpRoute, requestMethod
}

// match reports whether c, a child of p, records p's operation a second
// time, and by which rule.
func (o *Options) match(p, c *spanInfo) (string, bool) {
	if p.service != c.service {
		return "", false
	}
	switch {
	case p.kind == c.kind:
		// Two INTERNAL spans of one scope nested under one name are
		// nearly always recursion (a function calling itself), not two
		// instrumentations.
		if p.kind == ptrace.SpanKindInternal && p.scope == c.scope {
			return "", false
		}
	case o.InternalInServer && p.kind == ptrace.SpanKindServer && c.kind == ptrace.SpanKindInternal:
		if p.scope == c.scope {
			return "", false
		}
	default:
		return "", false
	}
	by, ok := sameOperation(p, c)
	if !ok || !o.covers(p, c) {
		return "", false
	}
	return by, true
}

// matchSibling reports whether two SERVER spans with the same parent
// record one request twice, as when each of two instrumentations extracts
// the incoming trace context; outerIsA says which one is the outer span:
// the one that covers the other; when each covers the other (within
// Skew): for a pair matched by method or path, the one without a route
// (a wrapper outside the router never learns it: its span is the outer
// one whichever of the two ends a fraction of a millisecond later);
// otherwise the longer one, then the one that starts first, then a.
func (o *Options) matchSibling(a, b *spanInfo) (outerIsA bool, by string, ok bool) {
	if a.service != b.service || a.kind != ptrace.SpanKindServer || b.kind != ptrace.SpanKindServer {
		return false, "", false
	}
	by, ok = sameOperation(a, b)
	if !ok {
		return false, "", false
	}
	ab, ba := o.covers(a, b), o.covers(b, a)
	switch {
	case ab && ba:
		if (by == ByMethod || by == ByPath) && (a.route == "") != (b.route == "") {
			return a.route == "", by, true
		}
		da, db := a.end-a.start, b.end-b.start
		return da > db || da == db && a.start <= b.start, by, true
	case ab:
		return true, by, true
	case ba:
		return false, by, true
	}
	return false, "", false
}

// sameOperation: the same name; or the same route and HTTP method; or two
// HTTP SERVER spans of one method, one of them without a route and named
// by the method alone, or by the method and a path the other's route
// fits.
func sameOperation(p, c *spanInfo) (string, bool) {
	switch {
	case p.name == c.name:
		return ByName, true
	case c.route != "" && c.route == p.route && c.method != "" && c.method == p.method:
		return ByRoute, true
	case p.kind == ptrace.SpanKindServer && c.kind == ptrace.SpanKindServer &&
		p.method != "" && p.method == c.method &&
		(methodOnly(p) && p.route == "" || methodOnly(c) && c.route == ""):
		return ByMethod, true
	case byPath(p, c): // pathname.go
		return ByPath, true
	}
	return "", false
}

// methodOnly: the span is named as HTTP semantic conventions name a server
// span whose route is unknown ("GET", "HTTP GET", or "HTTP" for an
// unknown method).
func methodOnly(s *spanInfo) bool {
	return s.name == s.method || s.name == "HTTP "+s.method || s.name == "HTTP"
}

// covers: c lies within p (give or take Skew) and lasts at least
// MinCoverage of p, less Skew.
func (o *Options) covers(p, c *spanInfo) bool {
	if p.end < p.start || c.end < c.start {
		return false
	}
	skew := uint64(o.Skew)
	if c.start < p.start && p.start-c.start > skew {
		return false
	}
	if c.end > p.end && c.end-p.end > skew {
		return false
	}
	pd, cd := float64(p.end-p.start), float64(c.end-c.start)
	return cd+float64(skew) >= o.MinCoverage*pd
}

// MaxStringBytes bounds each string a Detector keeps from a span: a
// longer one is held as a copy of its first bytes, "…" and a 64-bit hash
// of the whole (so that two long strings still compare equal only when
// they are, barring a hash collision), never the request's own string.
const MaxStringBytes = 256

// clipHashLen is the length of "…" and 16 hex digits.
const clipHashLen = len("…") + 16

// clip returns s, or for a string longer than MaxStringBytes a new string
// of at most MaxStringBytes: its prefix (cut at a UTF-8 sequence start),
// "…", and the hex xxh3 hash of all of s.
func clip(s string) string {
	if len(s) <= MaxStringBytes {
		return s
	}
	cut := MaxStringBytes - clipHashLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	var b strings.Builder
	b.Grow(cut + clipHashLen)
	b.WriteString(s[:cut])
	b.WriteString("…")
	var h [8]byte
	binary.BigEndian.PutUint64(h[:], xxh3.HashString(s))
	b.WriteString(hex.EncodeToString(h[:]))
	return b.String()
}

// interner shares equal strings between held spans and clips long ones,
// in a table of max strings (a power of two) indexed by their hash, without
// a Go map: a string whose place is taken replaces the one there (only
// sharing is lost; the strings stay valid). It allocates its table on first
// use and holds at most max strings of at most MaxStringBytes.
type interner struct {
	t   []string
	max int
}

// strHome places a non-empty string in an interner's table by its length
// and its first and last eight bytes: cheaper than hashing all of it, and
// a collision only loses sharing.
func strHome(s string) uint64 {
	var a, b uint64
	if len(s) >= 8 {
		a = binary.LittleEndian.Uint64([]byte(s[:8]))
		b = binary.LittleEndian.Uint64([]byte(s[len(s)-8:]))
	} else {
		for i := range len(s) {
			a = a<<8 | uint64(s[i])
		}
	}
	hi, lo := bits.Mul64(a^uint64(len(s))*0x9e3779b97f4a7c15, b^0xd6e8feb86659fd93)
	return hi ^ lo
}

func (in *interner) str(s string) string {
	if s == "" {
		return s
	}
	if in == nil {
		return clip(s)
	}
	if in.t == nil {
		in.t = make([]string, 1<<bits.Len(uint(max(in.max, 1)-1)))
	}
	// Keyed by the clipped string: the table must not keep a long one.
	c := clip(s)
	i := strHome(c) & uint64(len(in.t)-1)
	if in.t[i] == c {
		return in.t[i]
	}
	in.t[i] = c
	return c
}
