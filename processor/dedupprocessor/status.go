package dedupprocessor

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/doubletake/doubletake/internal/nested"
	"github.com/doubletake/doubletake/internal/termsafe"
)

// The status page's bounds and defaults.
const (
	defaultStatusRows    = 20   // status.max_rows
	maxStatusRows        = 1000 // the most status.max_rows may be
	defaultStatusStreams = 1000 // status.max_streams
	maxStatusStreams     = 100000
	statusRefresh        = 5 * time.Second // the page's meta refresh
	// statusNameBytes is the most bytes of a name (service, metric) the
	// page shows; longer ones are cut at a character boundary and marked.
	statusNameBytes = 256
	// statusAttrBytes bounds a metric stream's point attributes as the
	// page keeps and shows them ("key=value, ..."), statusAttrs their
	// number.
	statusAttrBytes = 512
	statusAttrs     = 32
)

// StatusConfig configures the status page: per service, who sends copies
// and why; the metric streams with more than one writer; the state's
// health. Off unless http.endpoint is set.
type StatusConfig struct {
	// HTTP is the server's address (loopback in the embedded default), TLS
	// and auth, as every collector HTTP server takes them.
	HTTP confighttp.ServerConfig `mapstructure:"http"`
	// MaxRows is the most rows each table shows, worst first.
	MaxRows int `mapstructure:"max_rows"`
	// MaxStreams is the most metric streams with more than one writer the
	// page remembers; events of streams past it are counted in
	// otelcol_processor_dedup_status_refused_events and not shown.
	MaxStreams int `mapstructure:"max_streams"`
}

func defaultStatusConfig() StatusConfig {
	return StatusConfig{HTTP: confighttp.NewDefaultServerConfig(), MaxRows: defaultStatusRows, MaxStreams: defaultStatusStreams}
}

func (c *StatusConfig) enabled() bool { return c.HTTP.NetAddr.Endpoint != "" }

func (c *StatusConfig) validate() []error {
	if !c.enabled() {
		return nil
	}
	var errs []error
	if c.MaxRows < 1 || c.MaxRows > maxStatusRows {
		errs = append(errs, fmt.Errorf("status.max_rows must be between 1 and %d, got %d", maxStatusRows, c.MaxRows))
	}
	if c.MaxStreams < 1 || c.MaxStreams > maxStatusStreams {
		errs = append(errs, fmt.Errorf("status.max_streams must be between 1 and %d, got %d", maxStatusStreams, c.MaxStreams))
	}
	return errs
}

// serviceTotals is one service's running totals for the status page, kept
// on its serviceStats and guarded by services.mu.
type serviceTotals struct {
	received, dups int64
	whole, partial int64 // requests repeated whole / copies mixed with new items
	first, last    time.Time
}

func (t *serviceTotals) add(received, dups int64, whole bool, now time.Time) {
	if received <= 0 {
		return
	}
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	t.received += received
	if dups > 0 {
		t.dups += dups
		if whole {
			t.whole++
		} else {
			t.partial++
		}
	}
}

// streamBook remembers the metric streams (service, metric) that had more
// than one writer, up to a bound; the ones past it are counted.
type streamBook struct {
	max     int
	refused metric.Int64Counter
	opt     metric.AddOption

	mu      sync.Mutex
	entries map[streamKey]*streamEntry
	dropped int64 // events of streams refused since start
}

// streamKey is a stream as the page tells it: its service, metric and
// point attributes (streamAttrs).
type streamKey struct{ service, metric, attrs string }

type streamEntry struct {
	service, metric string
	attrs           string
	elected, other  uint64 // writers' start times, Unix ns; 0 for gauges
	points          int64  // points that broke the single-writer rule
	elections       int64
	event           string // the latest: overlap, decrease, election:earlier_start...
	action          string
	diagnosis       string
	class, evidence string // metrics.overlap auto: the other writer's (metrics_class.go)
	first, last     time.Time
}

func newStreamBook(max int, refused metric.Int64Counter) (*streamBook, error) {
	return &streamBook{
		max: max, refused: refused, entries: make(map[streamKey]*streamEntry),
		opt: metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", "metrics"))),
	}, nil
}

// note records one request's notable event for one service's stream. A nil
// book (no status page) records nothing.
func (b *streamBook) note(service string, e metricEvent, points, elections int64, now time.Time) {
	if b == nil || !e.set {
		return
	}
	k := streamKey{service, e.metric, e.attrs}
	b.mu.Lock()
	en, ok := b.entries[k]
	if !ok {
		if len(b.entries) >= b.max {
			b.dropped++
			b.mu.Unlock()
			b.refused.Add(context.Background(), 1, b.opt)
			return
		}
		en = &streamEntry{service: service, metric: e.metric, attrs: e.attrs, first: now}
		b.entries[k] = en
	}
	en.elected, en.other = e.elected, e.writer
	en.points += points
	en.elections += elections
	en.event, en.action, en.diagnosis = eventName(e), actionNames[e.action], suggest(e)
	if e.judged {
		en.class, en.evidence = e.class.String(), e.evidence
	}
	en.last = now
	b.mu.Unlock()
}

// Status is what the page and its JSON show. Names are cleaned: control
// characters escaped, at most statusNameBytes bytes.
type Status struct {
	Generated time.Time       `json:"generated"`
	MaxRows   int             `json:"max_rows"`
	Services  []ServiceStatus `json:"services"`
	// ServicesNotShown counts services past max_rows.
	ServicesNotShown int            `json:"services_not_shown"`
	Streams          []StreamStatus `json:"streams"`
	StreamsNotShown  int            `json:"streams_not_shown"`
	// StreamsRefused counts events of streams past status.max_streams,
	// which are never shown.
	StreamsRefused int64 `json:"streams_refused"`
	// NestedDetect says whether traces.nested.detect is on; Nested are its
	// findings by service and scope pair, most spans first.
	NestedDetect   bool            `json:"nested_detect"`
	Nested         []NestedStatus  `json:"nested"`
	NestedNotShown int             `json:"nested_not_shown"`
	Windows        []WindowStatus  `json:"windows"`
	Memory         MemoryStatus    `json:"memory"`
	Journals       []JournalStatus `json:"journals,omitempty"`
	// Queues are the sending queues of the exporters after dedup that
	// report them (dedup_otlp_grpc, dedup_otlp_http).
	Queues []QueueStatus `json:"queues"`
}

// NestedStatus is one service's nested duplicates (double
// instrumentation) of one scope pair.
type NestedStatus struct {
	Service    string `json:"service"`
	OuterScope string `json:"outer_scope"`
	InnerScope string `json:"inner_scope"`
	// Spans counts nested duplicates found (action counted) or inner
	// spans removed (collapsed).
	Spans  int64  `json:"spans"`
	Action string `json:"action"`
	// Kind and Name are the latest outer span's.
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	LastSeen  time.Time `json:"last_seen"`
	Diagnosis string    `json:"diagnosis"`
}

// ServiceStatus is one service's spans or log records.
type ServiceStatus struct {
	Service   string    `json:"service"`
	Signal    string    `json:"signal"`
	Received  int64     `json:"received"`
	Copies    int64     `json:"copies"`
	Share     float64   `json:"duplicate_share"`
	Action    string    `json:"action"` // dropped or passed (detect mode)
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Diagnosis string    `json:"diagnosis,omitempty"`
}

// StreamStatus is one metric stream with more than one writer.
type StreamStatus struct {
	Service string `json:"service"`
	Metric  string `json:"metric"`
	// Attributes are the point attributes of the stream's first notable
	// point, sorted by key ("key=value, ..."), cut after 512 bytes.
	Attributes   string     `json:"attributes"`
	ElectedStart *time.Time `json:"elected_start,omitempty"`
	OtherStart   *time.Time `json:"other_start,omitempty"`
	Points       int64      `json:"points"`
	Elections    int64      `json:"elections"`
	Event        string     `json:"event"`
	Action       string     `json:"action"`
	FirstSeen    time.Time  `json:"first_seen"`
	LastSeen     time.Time  `json:"last_seen"`
	Diagnosis    string     `json:"diagnosis"`
	// Class and Evidence, with metrics.overlap auto: what the other writer
	// is (undecided, copy, peer) and why, judged from the values.
	Class    string `json:"class,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

// WindowStatus is one signal's state.
type WindowStatus struct {
	Signal     string  `json:"signal"`
	Entries    int     `json:"entries"`
	Limit      int     `json:"limit"`
	Fill       float64 `json:"fill"`
	Effective  float64 `json:"effective_window_seconds"`
	Configured float64 `json:"configured_window_seconds"` // metrics: max_stale
	Short      bool    `json:"shorter_than_configured"`
	Evicted    uint64  `json:"evicted_capacity"`
	Shrunk     uint64  `json:"evicted_shrink"`
	Expired    uint64  `json:"expired"`
}

// MemoryStatus is the process against memory_soft_limit_mib.
type MemoryStatus struct {
	ResidentMiB  uint64 `json:"resident_mib"`
	SoftLimitMiB int    `json:"soft_limit_mib"` // 0: off
	Pressure     bool   `json:"pressure"`
}

// JournalStatus is one stored window's journal.
type JournalStatus struct {
	Signal   string `json:"signal"`
	Segments int    `json:"segments"`
	Limit    int    `json:"limit"`
}

// statusServer serves the state's status page.
type statusServer struct {
	st   *state
	set  component.TelemetrySettings
	cfg  StatusConfig
	book *streamBook
	tmpl *template.Template

	srv     *http.Server
	done    chan struct{}
	persist *persistence // set by start, before the server serves; nil without storage
	queues  *queueWatch  // the factory's, set when the state is made
}

//go:embed status.html
var statusHTML string

func newStatusServer(st *state, set component.TelemetrySettings) (*statusServer, error) {
	if !st.cfg.Status.enabled() {
		return nil, nil
	}
	book, err := newStreamBook(st.cfg.Status.MaxStreams, st.tel.statusRefused)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("status").Funcs(template.FuncMap{
		"pct":  func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
		"secs": func(f float64) string { return (time.Duration(f * float64(time.Second))).Round(time.Second).String() },
		"when": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"whenp": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		},
		"refresh": func() int { return int(statusRefresh / time.Second) },
	}).Parse(statusHTML)
	if err != nil {
		return nil, err
	}
	return &statusServer{st: st, set: set, cfg: st.cfg.Status, book: book, tmpl: tmpl}, nil
}

// start listens and serves; a nil server (status off) does nothing.
func (s *statusServer) start(ctx context.Context, host component.Host, p *persistence) error {
	if s == nil {
		return nil
	}
	s.persist = p
	ln, err := s.cfg.HTTP.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("status.http.endpoint %q: %w", s.cfg.HTTP.NetAddr.Endpoint, err)
	}
	srv, err := s.cfg.HTTP.ToServer(ctx, host.GetExtensions(), s.set, s.handler())
	if err != nil {
		ln.Close()
		return fmt.Errorf("status: %w", err)
	}
	s.srv, s.done = srv, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.set.Logger.Error("status page server", zap.Error(err))
		}
	}()
	s.set.Logger.Info("status page", zap.String("endpoint", ln.Addr().String()))
	return nil
}

func (s *statusServer) stop() {
	if s == nil || s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	s.srv = nil
}

func (s *statusServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		st := s.snapshot(time.Now())
		var b strings.Builder
		if err := s.tmpl.Execute(&b, st); err != nil {
			http.Error(w, "rendering the status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(b.String()))
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.snapshot(time.Now()))
	})
	return mux
}

// snapshot copies what the page shows: each lock is held for a copy only,
// sorting and cleaning happen after.
func (s *statusServer) snapshot(now time.Time) Status {
	out := Status{Generated: now.UTC(), MaxRows: s.cfg.MaxRows}
	drop := s.st.cfg.Mode == ModeDrop
	action := "passed"
	if drop {
		action = "dropped"
	}
	for _, svcs := range []*services{s.st.traces.svcs, s.st.logs.svcs} {
		type row struct {
			name string
			t    serviceTotals
		}
		svcs.mu.Lock()
		rows := make([]row, 0, len(svcs.known)+1)
		for _, st := range svcs.known {
			rows = append(rows, row{st.name, st.totals})
		}
		rows = append(rows, row{svcs.other.name, svcs.other.totals})
		svcs.mu.Unlock()
		for _, r := range rows {
			if r.t.received == 0 {
				continue
			}
			ss := ServiceStatus{
				Service: cleanName(r.name), Signal: svcs.signal, Received: r.t.received, Copies: r.t.dups,
				Share: float64(r.t.dups) / float64(r.t.received), Action: action,
				FirstSeen: r.t.first.UTC(), LastSeen: r.t.last.UTC(),
			}
			if r.t.dups > 0 {
				ss.Diagnosis = diagnose(r.t.whole, r.t.partial)
			}
			out.Services = append(out.Services, ss)
		}
	}
	sort.SliceStable(out.Services, func(i, j int) bool {
		a, b := out.Services[i], out.Services[j]
		if a.Copies != b.Copies {
			return a.Copies > b.Copies
		}
		if a.Share != b.Share {
			return a.Share > b.Share
		}
		return a.Service < b.Service
	})
	if n := len(out.Services) - s.cfg.MaxRows; n > 0 {
		out.ServicesNotShown = n
		out.Services = out.Services[:s.cfg.MaxRows]
	}

	s.book.mu.Lock()
	streams := make([]streamEntry, 0, len(s.book.entries))
	for _, e := range s.book.entries {
		streams = append(streams, *e)
	}
	out.StreamsRefused = s.book.dropped
	s.book.mu.Unlock()
	sort.Slice(streams, func(i, j int) bool {
		a, b := streams[i], streams[j]
		if a.points+a.elections != b.points+b.elections {
			return a.points+a.elections > b.points+b.elections
		}
		if a.service != b.service {
			return a.service < b.service
		}
		if a.metric != b.metric {
			return a.metric < b.metric
		}
		return a.attrs < b.attrs
	})
	if n := len(streams) - s.cfg.MaxRows; n > 0 {
		out.StreamsNotShown = n
		streams = streams[:s.cfg.MaxRows]
	}
	for _, e := range streams {
		ss := StreamStatus{
			Service: cleanName(e.service), Metric: cleanName(e.metric), Attributes: cleanNameBytes(e.attrs, statusAttrBytes),
			Points: e.points, Elections: e.elections,
			Event: e.event, Action: e.action, FirstSeen: e.first.UTC(), LastSeen: e.last.UTC(), Diagnosis: e.diagnosis,
			Class: e.class, Evidence: cleanNameBytes(e.evidence, statusAttrBytes),
		}
		if e.elected != 0 || e.other != 0 {
			el, ot := time.Unix(0, int64(e.elected)).UTC(), time.Unix(0, int64(e.other)).UTC()
			ss.ElectedStart, ss.OtherStart = &el, &ot
		}
		out.Streams = append(out.Streams, ss)
	}

	out.NestedDetect = s.st.nested != nil
	out.Nested, out.NestedNotShown = s.nestedRows(s.cfg.MaxRows)

	nowNs := now.UnixNano()
	for _, w := range []struct {
		w          *signalWindow
		configured time.Duration
	}{
		{&s.st.traces.signalWindow, s.st.cfg.Traces.Window},
		{&s.st.logs.signalWindow, s.st.cfg.Logs.Window},
		{&s.st.metrics.signalWindow, s.st.cfg.Metrics.MaxStale},
	} {
		snap := w.w.snapshot(nowNs)
		ws := WindowStatus{
			Signal: w.w.signal, Entries: snap.entries, Limit: snap.limit,
			Effective: snap.effective.Seconds(), Configured: w.configured.Seconds(),
			Evicted: snap.stats.Evicted, Shrunk: snap.stats.Shrunk, Expired: snap.stats.Expired,
		}
		if snap.limit > 0 {
			ws.Fill = float64(snap.entries) / float64(snap.limit)
		}
		// The window reaches back less far than configured only when it
		// has had to evict: otherwise it is young, not short.
		ws.Short = snap.stats.Evicted+snap.stats.Shrunk > 0 && snap.effective < w.configured
		out.Windows = append(out.Windows, ws)
	}

	rss := residentBytes()
	out.Memory = MemoryStatus{ResidentMiB: rss >> 20, SoftLimitMiB: s.st.cfg.MemorySoftLimitMiB}
	out.Memory.Pressure = s.st.cfg.MemorySoftLimitMiB > 0 && rss > uint64(s.st.cfg.MemorySoftLimitMiB)<<20

	if s.persist != nil {
		out.Journals = []JournalStatus{
			{Signal: "traces", Segments: s.st.traces.segments(), Limit: maxSegments},
			{Signal: "logs", Segments: s.st.logs.segments(), Limit: maxSegments},
		}
	}
	if s.queues != nil {
		out.Queues = s.queues.read(s.st.id)
	}
	return out
}

// nestedRows copies the nested detector's counts by service and scope
// pair (bounded by its label cap) and returns the max worst, cleaned, and
// how many more there are.
func (s *statusServer) nestedRows(max int) ([]NestedStatus, int) {
	n := s.st.nested
	if n == nil {
		return nil, 0
	}
	type row struct {
		k nestedLabelKey
		r nestedRow
	}
	n.mu.Lock()
	rows := make([]row, 0, len(n.labels))
	for k, r := range n.labels {
		rows = append(rows, row{k, *r})
	}
	n.mu.Unlock()
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.r.spans != b.r.spans {
			return a.r.spans > b.r.spans
		}
		if a.k.service != b.k.service {
			return a.k.service < b.k.service
		}
		if a.k.outer != b.k.outer {
			return a.k.outer < b.k.outer
		}
		if a.k.inner != b.k.inner {
			return a.k.inner < b.k.inner
		}
		return !a.k.collapsed
	})
	more := 0
	if len(rows) > max {
		more, rows = len(rows)-max, rows[:max]
	}
	out := make([]NestedStatus, 0, len(rows))
	for _, r := range rows {
		ns := NestedStatus{
			Service: cleanName(r.k.service), OuterScope: cleanName(r.k.outer), InnerScope: cleanName(r.k.inner),
			Spans: r.r.spans, Action: "counted", Kind: cleanName(r.r.kind), Name: cleanName(r.r.name), LastSeen: r.r.last.UTC(),
		}
		if r.k.collapsed {
			ns.Action = "collapsed"
		}
		ns.Diagnosis = nestedDiagnosis(ns)
		out = append(out, ns)
	}
	return out, more
}

// nestedDiagnosis says what a nested duplicate means in the nested
// detector's words (internal/nested), without its shares, which the
// processor does not keep.
func nestedDiagnosis(n NestedStatus) string {
	return nested.Wording(n.OuterScope, n.InnerScope, n.Kind, strconv.Quote(n.Name))
}

// streamAttrs is how the page tells a stream's point attributes apart:
// "key=value" sorted by key, at most statusAttrs of them and about
// statusAttrBytes bytes, copied (nothing of the request is kept). Maps,
// arrays and bytes show their size only.
func streamAttrs(m pcommon.Map) string {
	if m.Len() == 0 {
		return ""
	}
	type kv struct{ k, v string }
	clip := func(s string) string {
		if len(s) > statusAttrBytes {
			s = s[:statusAttrBytes]
		}
		return strings.Clone(s)
	}
	kvs := make([]kv, 0, min(m.Len(), statusAttrs))
	for k, v := range m.All() {
		if len(kvs) == statusAttrs {
			break
		}
		var val string
		switch v.Type() {
		case pcommon.ValueTypeStr:
			val = clip(v.Str())
		case pcommon.ValueTypeMap:
			val = "{" + strconv.Itoa(v.Map().Len()) + " keys}"
		case pcommon.ValueTypeSlice:
			val = "[" + strconv.Itoa(v.Slice().Len()) + " values]"
		case pcommon.ValueTypeBytes:
			val = "(" + strconv.Itoa(v.Bytes().Len()) + " bytes)"
		default:
			val = v.AsString()
		}
		kvs = append(kvs, kv{clip(k), val})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
	var b strings.Builder
	for i, e := range kvs {
		if b.Len() >= statusAttrBytes {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.k)
		b.WriteByte('=')
		b.WriteString(e.v)
	}
	if more := m.Len() - len(kvs); more > 0 {
		b.WriteString(", +" + strconv.Itoa(more) + " more")
	}
	return b.String()
}

// cleanName makes a client-chosen name safe to show: invalid UTF-8,
// control and format characters become visible escapes, and it is cut to
// statusNameBytes bytes at a character boundary, saying how long it was.
// HTML escaping is the template's.
func cleanName(s string) string { return cleanNameBytes(s, statusNameBytes) }

// cleanNameBytes is cleanName, cut at max bytes.
func cleanNameBytes(s string, max int) string {
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= max {
			return b.String() + "… (" + strconv.Itoa(len(s)) + " bytes, cut at " + strconv.Itoa(i) + ")"
		}
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
			b.WriteRune(r)
		case termsafe.Unsafe(r):
			// Control and format characters (bidi overrides, zero-width)
			// would rewrite how the page reads.
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
