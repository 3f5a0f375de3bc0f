package audit

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
)

// PromAPI is the part of client_golang's Prometheus HTTP API
// (api/prometheus/v1) that an audit reads through; promv1.NewAPI's result
// satisfies it.
type PromAPI interface {
	LabelValues(ctx context.Context, label string, matches []string, startTime, endTime time.Time, opts ...promv1.Option) (model.LabelValues, promv1.Warnings, promv1.Infos, error)
	Series(ctx context.Context, matches []string, startTime, endTime time.Time, opts ...promv1.Option) ([]model.LabelSet, promv1.Warnings, promv1.Infos, error)
	Query(ctx context.Context, query string, ts time.Time, opts ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error)
	Metadata(ctx context.Context, metric, limit string) (map[string][]promv1.Metadata, error)
}

// Defaults of PromOptions.
const (
	DefaultRange         = 24 * time.Hour
	DefaultMatcher       = `{__name__=~".+"}`
	DefaultConcurrency   = 4
	DefaultChunkSeries   = 100
	DefaultMaxCharts     = 20
	DefaultChartPoints   = 600
	DefaultProgressEvery = 2 * time.Second
	// maxProblems bounds the per-series failures reported one by one.
	maxProblems = 10
)

// PromOptions tune a Prometheus audit. The zero value audits every
// counter-like series over the last 24 hours.
type PromOptions struct {
	URL      string   // for the report only
	Matchers []string // series selectors; default DefaultMatcher
	End      time.Time
	Range    time.Duration
	// Concurrency is the number of queries in flight.
	Concurrency int
	// ChunkSeries: a metric name with at most this many matched series is
	// read in one query per selector; a larger one one series at a time, so
	// at most Concurrency series' samples are held at once.
	ChunkSeries  int
	Deinterleave DeinterleaveOptions
	// MaxCharts bounds the charts kept (the worst series); ChartPoints the
	// stored samples drawn per chart.
	MaxCharts   int
	ChartPoints int
	// Progress, when set, receives a progress line every ProgressEvery and
	// one at the end.
	Progress      io.Writer
	ProgressEvery time.Duration
}

func (o PromOptions) withDefaults() PromOptions {
	if len(o.Matchers) == 0 {
		o.Matchers = []string{DefaultMatcher}
	}
	if o.End.IsZero() {
		o.End = time.Now()
	}
	if o.Range <= 0 {
		o.Range = DefaultRange
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ChunkSeries <= 0 {
		o.ChunkSeries = DefaultChunkSeries
	}
	if o.MaxCharts < 0 {
		o.MaxCharts = 0
	} else if o.MaxCharts == 0 {
		o.MaxCharts = DefaultMaxCharts
	}
	if o.ChartPoints <= 0 {
		o.ChartPoints = DefaultChartPoints
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	return o
}

// queryJob reads the series one or more selectors match over the range.
// want, when set, keeps only the series with that exact label set.
type queryJob struct {
	name      string
	selectors []string
	want      *model.Fingerprint
}

// promAudit is one run of AuditPrometheus: the API, the options and the
// range, and what the run accumulates.
type promAudit struct {
	api            PromAPI
	o              PromOptions
	start, end     time.Time
	startMS, endMS int64
	window         string // the range selector appended to every query
	rep            *PromReport
	agg            *aggregator
	prog           *progress
	meta           map[string][]promv1.Metadata
}

// AuditPrometheus reads every counter-like series the matchers select over
// the range ending at End, as stored, and reports those with resets, worst
// first.
//
// Series are paged: metric names first (label values of __name__), then the
// series of one name, then their samples, either in one query per selector
// (ChunkSeries series at most) or one series per query, Concurrency queries
// at a time. A fatal error (see fatal) cancels the audit; any other failure
// of one query is counted in the report and the audit goes on.
func AuditPrometheus(ctx context.Context, api PromAPI, o PromOptions) (*PromReport, error) {
	o = o.withDefaults()
	for _, m := range o.Matchers {
		if _, _, err := splitSelector(m); err != nil {
			return nil, fmt.Errorf("--match: %w: %w", ErrBadQuery, err)
		}
	}
	a := newPromAudit(api, o)
	names, err := a.metricNames(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.readMetadata(ctx); err != nil {
		return nil, err
	}
	if err := a.readSeries(ctx, names); err != nil {
		return nil, err
	}
	if a.rep.CounterNames == 0 {
		return nil, fmt.Errorf("%w: %d metric names match %s, none of them counter-like (type counter, histogram or summary in the metadata; otherwise a name ending in _total, _sum, _count or _bucket)",
			ErrNoData, a.rep.Names, strings.Join(o.Matchers, " or "))
	}
	a.agg.finish()
	return a.rep, nil
}

func newPromAudit(api PromAPI, o PromOptions) *promAudit {
	end := o.End.Truncate(time.Second)
	start := end.Add(-o.Range)
	rep := &PromReport{
		URL:      o.URL,
		Matchers: o.Matchers,
		Start:    start.UTC(),
		End:      end.UTC(),
		Range:    o.Range.String(),
		Classes:  map[Class]int{},
	}
	return &promAudit{
		api: api, o: o,
		start: start, end: end, startMS: start.UnixMilli(), endMS: end.UnixMilli(),
		window: fmt.Sprintf("[%dms]", o.Range.Milliseconds()),
		rep:    rep,
		agg:    newAggregator(rep, o.MaxCharts),
		prog:   &progress{},
	}
}

// metricNames lists the metric names the matchers select, sorted; none is
// ErrNoData.
func (a *promAudit) metricNames(ctx context.Context) ([]string, error) {
	set := map[string]struct{}{}
	for _, m := range a.o.Matchers {
		vals, warns, _, err := a.api.LabelValues(ctx, model.MetricNameLabel, []string{m}, a.start, a.end)
		if err != nil {
			return nil, wrapProm("listing metric names", err)
		}
		a.rep.addWarnings(warns)
		for _, v := range vals {
			set[string(v)] = struct{}{}
		}
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("%w: no series match %s between %s and %s",
			ErrNoData, strings.Join(a.o.Matchers, " or "), a.start.UTC().Format(time.RFC3339), a.end.UTC().Format(time.RFC3339))
	}
	names := slices.Sorted(maps.Keys(set))
	a.rep.Names = len(names)
	a.prog.names = int64(len(names))
	return names, nil
}

// readMetadata reads the metric types. Without them types come from name
// suffixes: a failure that is not fatal is a problem in the report.
func (a *promAudit) readMetadata(ctx context.Context) error {
	meta, err := a.api.Metadata(ctx, "", "")
	if err != nil {
		if ctx.Err() != nil || fatal(err) {
			return wrapProm("reading metric metadata", err)
		}
		a.rep.Problems = append(a.rep.Problems, wrapProm("reading metric metadata (types from name suffixes only)", err).Error())
	}
	a.meta = meta
	return nil
}

// readSeries lists the series of each counter-like name and reads their
// samples, at most Concurrency queries at once. It returns the first fatal
// error, or the context's.
func (a *promAudit) readSeries(ctx context.Context, names []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.o.Concurrency)
	stopProgress := a.reportProgress()

	var listErr error
	for _, name := range names {
		if gctx.Err() != nil {
			break
		}
		if listErr = a.queueName(gctx, g, name); listErr != nil {
			cancel() // the queries under way stop
			break
		}
	}
	queryErr := g.Wait()
	stopProgress()
	switch {
	case listErr != nil:
		return listErr
	case queryErr != nil:
		return queryErr
	}
	return ctx.Err()
}

// queueName lists the series of one metric name and queues the queries
// that read them: one per selector for at most ChunkSeries series, else
// one per series. Only a fatal error is returned.
func (a *promAudit) queueName(ctx context.Context, g *errgroup.Group, name string) error {
	a.prog.namesDone.Add(1)
	if !counterLike(name, a.meta) {
		a.agg.skipName()
		return nil
	}
	a.agg.counterName()
	var sels []string
	for _, m := range a.o.Matchers {
		s, ok, err := withName(m, name)
		if err != nil {
			return fmt.Errorf("--match: %w: %w", ErrBadQuery, err)
		}
		if ok {
			sels = append(sels, s)
		}
	}
	if len(sels) == 0 {
		return nil
	}
	series, warns, _, err := a.api.Series(ctx, sels, a.start, a.end)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		err = wrapProm(fmt.Sprintf("listing the series of %s", name), err)
		if fatal(err) {
			return err
		}
		a.agg.problem(err, 1)
		return nil
	}
	a.agg.addWarnings(warns)
	if len(series) == 0 {
		return nil
	}
	if len(series) <= a.o.ChunkSeries {
		a.queue(ctx, g, queryJob{name: name, selectors: sels})
		return nil
	}
	labelNames := unionLabelNames(series)
	for _, ls := range series {
		fp := ls.Fingerprint()
		a.queue(ctx, g, queryJob{name: name, selectors: []string{exactSelector(ls, labelNames)}, want: &fp})
	}
	return nil
}

// queue runs j in the group once a slot is free; a job that gets its slot
// after the audit was cancelled does nothing.
func (a *promAudit) queue(ctx context.Context, g *errgroup.Group, j queryJob) {
	g.Go(func() error {
		if ctx.Err() != nil {
			return nil
		}
		return a.runJob(ctx, j)
	})
}

// reportProgress prints a progress line every ProgressEvery until the
// returned func is called, which prints the final one.
func (a *promAudit) reportProgress() (stop func()) {
	if a.o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(a.o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				a.prog.print(a.o.Progress, false)
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		a.prog.print(a.o.Progress, true)
	}
}

// runJob queries one job's selectors and analyses the series they return.
// Only a fatal error is returned; the others are counted in the report.
func (a *promAudit) runJob(ctx context.Context, j queryJob) error {
	seen := map[model.Fingerprint]struct{}{}
	for _, sel := range j.selectors {
		v, warns, _, err := a.api.Query(ctx, sel+a.window, a.end)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = wrapProm(fmt.Sprintf("reading %s", sel), err)
			if fatal(err) {
				return err
			}
			a.agg.problem(err, 1)
			continue
		}
		a.agg.addWarnings(warns)
		m, ok := v.(model.Matrix)
		if !ok {
			a.agg.problem(fmt.Errorf("reading %s: %w: got a %s, want a matrix", sel, ErrMalformed, v.Type()), 1)
			continue
		}
		for _, ss := range m {
			fp := ss.Metric.Fingerprint()
			if j.want != nil && fp != *j.want {
				continue
			}
			if _, dup := seen[fp]; dup {
				continue
			}
			seen[fp] = struct{}{}
			if len(ss.Values) == 0 {
				continue // native histograms only
			}
			a.addSeries(ss)
		}
	}
	return nil
}

// addSeries analyses one series' samples into the report.
func (a *promAudit) addSeries(ss *model.SampleStream) {
	samples := make([]Sample, len(ss.Values))
	for i, p := range ss.Values {
		samples[i] = Sample{T: int64(p.Timestamp), V: float64(p.Value)}
	}
	r := analyzeSeries(ss.Metric, samples, a.startMS, a.endMS, a.o)
	a.agg.add(r)
	a.prog.series.Add(1)
	if r.Resets > 0 {
		a.prog.affected.Add(1)
	}
}

// analyzeSeries turns one series' samples into its result (with a chart
// when it has resets).
func analyzeSeries(metric model.Metric, samples []Sample, startMS, endMS int64, o PromOptions) *SeriesResult {
	a := Analyze(samples, startMS, endMS, o.Deinterleave)
	labels := make(map[string]string, len(metric))
	for k, v := range metric {
		labels[string(k)] = string(v)
	}
	r := resultOf(metric.String(), labels, a)
	if a.Resets > 0 && o.MaxCharts > 0 {
		r.chart = newChart(r.Series, a, samples, startMS, endMS, o.ChartPoints)
	}
	return r
}

// counterLike says whether a metric name is read as a counter: by its
// metadata when Prometheus has some, else by its suffix.
func counterLike(name string, meta map[string][]promv1.Metadata) bool {
	if t, ok := metaType(meta, name); ok {
		return t == promv1.MetricTypeCounter
	}
	for _, suf := range []string{"_bucket", "_sum", "_count", "_total"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if t, ok := metaType(meta, base); ok {
			switch t {
			case promv1.MetricTypeHistogram, promv1.MetricTypeSummary:
				return suf != "_total"
			case promv1.MetricTypeCounter:
				return suf == "_total"
			}
			return false
		}
		return true
	}
	return false
}

// metaType is the type the metadata gives a name: counter when any target
// says counter.
func metaType(meta map[string][]promv1.Metadata, name string) (promv1.MetricType, bool) {
	ms := meta[name]
	if len(ms) == 0 {
		return "", false
	}
	for _, m := range ms {
		if m.Type == promv1.MetricTypeCounter {
			return m.Type, true
		}
	}
	return ms[0].Type, true
}

// unionLabelNames is every label name of the series, sorted.
func unionLabelNames(series []model.LabelSet) []model.LabelName {
	set := map[model.LabelName]struct{}{}
	for _, ls := range series {
		for k := range ls {
			set[k] = struct{}{}
		}
	}
	names := make([]model.LabelName, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// exactSelector selects exactly the series ls among series with the given
// label names: every label it has by value, every other one as absent.
func exactSelector(ls model.LabelSet, names []model.LabelName) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(n))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(string(ls[n])))
	}
	b.WriteByte('}')
	return b.String()
}

// progress counts what an audit has done, for the progress line.
type progress struct {
	names     int64
	namesDone atomic.Int64
	series    atomic.Int64
	affected  atomic.Int64
}

func (p *progress) print(w io.Writer, final bool) {
	word := "progress"
	if final {
		word = "done"
	}
	fmt.Fprintf(w, "doubletake audit: %s: metric names %d/%d, %d series read, %d with resets\n",
		word, p.namesDone.Load(), p.names, p.series.Load(), p.affected.Load())
}

// Float is a number that marshals NaN and infinities as null.
type Float float64

// MarshalJSON renders f, or null when it is not finite.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}
