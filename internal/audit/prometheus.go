package audit

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
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

// AuditPrometheus reads every counter-like series the matchers select over
// the range ending at End, as stored, and reports those with resets, worst
// first.
//
// Series are paged: metric names first (label values of __name__), then the
// series of one name, then their samples, either in one query per selector
// (ChunkSeries series at most) or one series per query.
func AuditPrometheus(ctx context.Context, api PromAPI, o PromOptions) (*PromReport, error) {
	o = o.withDefaults()
	end := o.End.Truncate(time.Second)
	start := end.Add(-o.Range)
	startMS, endMS := start.UnixMilli(), end.UnixMilli()
	window := fmt.Sprintf("[%dms]", o.Range.Milliseconds())

	for _, m := range o.Matchers {
		if _, _, err := splitSelector(m); err != nil {
			return nil, fmt.Errorf("--match: %w: %w", ErrBadQuery, err)
		}
	}

	rep := &PromReport{
		URL:      o.URL,
		Matchers: o.Matchers,
		Start:    start.UTC(),
		End:      end.UTC(),
		Range:    o.Range.String(),
		Classes:  map[Class]int{},
	}

	nameSet := map[string]struct{}{}
	for _, m := range o.Matchers {
		vals, warns, _, err := api.LabelValues(ctx, model.MetricNameLabel, []string{m}, start, end)
		if err != nil {
			return nil, wrapProm("listing metric names", err)
		}
		rep.addWarnings(warns)
		for _, v := range vals {
			nameSet[string(v)] = struct{}{}
		}
	}
	if len(nameSet) == 0 {
		return nil, fmt.Errorf("%w: no series match %s between %s and %s",
			ErrNoData, strings.Join(o.Matchers, " or "), start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	}
	names := make([]string, 0, len(nameSet))
	for n := range nameSet {
		names = append(names, n)
	}
	slices.Sort(names)
	rep.Names = len(names)

	meta, err := api.Metadata(ctx, "", "")
	if err != nil {
		if ctx.Err() != nil || fatal(err) {
			return nil, wrapProm("reading metric metadata", err)
		}
		rep.Problems = append(rep.Problems, wrapProm("reading metric metadata (types from name suffixes only)", err).Error())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		agg      = newAggregator(rep, o.MaxCharts)
		jobs     = make(chan queryJob, o.Concurrency)
		wg       sync.WaitGroup
		fatalMu  sync.Mutex
		fatalErr error
		prog     = &progress{names: int64(len(names))}
	)
	stop := func(err error) {
		fatalMu.Lock()
		if fatalErr == nil {
			fatalErr = err
		}
		fatalMu.Unlock()
		cancel()
	}
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				runJob(ctx, api, j, window, end, startMS, endMS, o, agg, prog, stop)
			}
		}()
	}
	progDone := make(chan struct{})
	var progWG sync.WaitGroup
	if o.Progress != nil {
		progWG.Add(1)
		go func() {
			defer progWG.Done()
			t := time.NewTicker(o.ProgressEvery)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					prog.print(o.Progress, false)
				case <-progDone:
					return
				}
			}
		}()
	}

	produce := func() error {
		for _, name := range names {
			if ctx.Err() != nil {
				return nil
			}
			prog.namesDone.Add(1)
			if ok, _ := counterLike(name, meta); !ok {
				agg.skipName()
				continue
			}
			agg.counterName()
			var sels []string
			for _, m := range o.Matchers {
				s, ok, err := withName(m, name)
				if err != nil {
					return fmt.Errorf("--match: %w: %w", ErrBadQuery, err)
				}
				if ok {
					sels = append(sels, s)
				}
			}
			if len(sels) == 0 {
				continue
			}
			series, warns, _, err := api.Series(ctx, sels, start, end)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				err = wrapProm(fmt.Sprintf("listing the series of %s", name), err)
				if fatal(err) {
					return err
				}
				agg.problem(err, 1)
				continue
			}
			agg.addWarnings(warns)
			if len(series) == 0 {
				continue
			}
			if len(series) <= o.ChunkSeries {
				jobs <- queryJob{name: name, selectors: sels}
				continue
			}
			labelNames := unionLabelNames(series)
			for _, ls := range series {
				fp := ls.Fingerprint()
				jobs <- queryJob{name: name, selectors: []string{exactSelector(ls, labelNames)}, want: &fp}
			}
		}
		return nil
	}
	if err := produce(); err != nil {
		stop(err)
	}
	close(jobs)
	wg.Wait()
	close(progDone)
	progWG.Wait()
	if o.Progress != nil {
		prog.print(o.Progress, true)
	}
	if fatalErr != nil {
		return nil, fatalErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rep.CounterNames == 0 {
		return nil, fmt.Errorf("%w: %d metric names match %s, none of them counter-like (type counter, histogram or summary in the metadata; otherwise a name ending in _total, _sum, _count or _bucket)",
			ErrNoData, rep.Names, strings.Join(o.Matchers, " or "))
	}
	agg.finish()
	return rep, nil
}

// runJob queries one job's selectors and analyses the series they return.
func runJob(ctx context.Context, api PromAPI, j queryJob, window string, end time.Time, startMS, endMS int64,
	o PromOptions, agg *aggregator, prog *progress, stop func(error)) {
	seen := map[model.Fingerprint]struct{}{}
	for _, sel := range j.selectors {
		v, warns, _, err := api.Query(ctx, sel+window, end)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			err = wrapProm(fmt.Sprintf("reading %s", sel), err)
			if fatal(err) {
				stop(err)
				return
			}
			agg.problem(err, 1)
			continue
		}
		agg.addWarnings(warns)
		m, ok := v.(model.Matrix)
		if !ok {
			agg.problem(fmt.Errorf("reading %s: %w: got a %s, want a matrix", sel, ErrMalformed, v.Type()), 1)
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
			samples := make([]Sample, len(ss.Values))
			for i, p := range ss.Values {
				samples[i] = Sample{T: int64(p.Timestamp), V: float64(p.Value)}
			}
			r := analyzeSeries(ss.Metric, samples, startMS, endMS, o)
			agg.add(r)
			prog.series.Add(1)
			if r.Resets > 0 {
				prog.affected.Add(1)
			}
		}
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

// counterLike says whether a metric name is read as a counter, and why.
func counterLike(name string, meta map[string][]promv1.Metadata) (bool, string) {
	if t, ok := metaType(meta, name); ok {
		return t == promv1.MetricTypeCounter, "metadata"
	}
	for _, suf := range []string{"_bucket", "_sum", "_count", "_total"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if t, ok := metaType(meta, base); ok {
			switch t {
			case promv1.MetricTypeHistogram, promv1.MetricTypeSummary:
				return suf != "_total", "metadata"
			case promv1.MetricTypeCounter:
				return suf == "_total", "metadata"
			}
			return false, "metadata"
		}
		return true, "suffix"
	}
	return false, "suffix"
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
