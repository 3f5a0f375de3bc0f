package audit

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// fakeProm is an in-memory PromAPI: series with samples, selectors of
// equality and regex matchers, range selectors evaluated as Prometheus 2.x
// does (samples in [ts-range, ts]).
type fakeProm struct {
	series []fakeSeries
	meta   map[string][]promv1.Metadata

	queries   atomic.Int64
	inFlight  atomic.Int64
	maxFlight atomic.Int64
	mu        sync.Mutex
	queried   map[string]int // exact selectors seen

	// queryErr, when set, is the error Query returns for a selector (nil:
	// answer it).
	queryErr func(sel string) error
}

type fakeSeries struct {
	labels  model.LabelSet
	samples []Sample
}

type fakeMatcher struct {
	name, op, value string
	re              *regexp.Regexp
}

func parseFakeSelector(sel string) ([]fakeMatcher, error) {
	name, body, err := splitSelector(sel)
	if err != nil {
		return nil, err
	}
	var ms []fakeMatcher
	if name != "" {
		ms = append(ms, fakeMatcher{name: "__name__", op: "=", value: name})
	}
	for _, part := range splitOutsideQuotes(body) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.IndexAny(part, "=!")
		if i < 0 {
			return nil, fmt.Errorf("bad matcher %q", part)
		}
		m := fakeMatcher{name: strings.TrimSpace(part[:i])}
		rest := part[i:]
		for _, op := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(rest, op) {
				m.op = op
				rest = strings.TrimSpace(rest[len(op):])
				break
			}
		}
		v, err := strconv.Unquote(rest)
		if err != nil {
			return nil, fmt.Errorf("bad value in %q: %w", part, err)
		}
		m.value = v
		if m.op == "=~" || m.op == "!~" {
			if m.re, err = regexp.Compile("^(?:" + v + ")$"); err != nil {
				return nil, err
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func splitOutsideQuotes(s string) []string {
	var parts []string
	start, inQ := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQ = !inQ
		case ',':
			if !inQ {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func (m fakeMatcher) matches(ls model.LabelSet) bool {
	v := string(ls[model.LabelName(m.name)])
	switch m.op {
	case "=":
		return v == m.value
	case "!=":
		return v != m.value
	case "=~":
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

func (f *fakeProm) selectSeries(sel string, start, end int64) ([]fakeSeries, error) {
	ms, err := parseFakeSelector(sel)
	if err != nil {
		return nil, &promv1.Error{Type: promv1.ErrBadData, Msg: err.Error()}
	}
	var out []fakeSeries
next:
	for _, s := range f.series {
		for _, m := range ms {
			if !m.matches(s.labels) {
				continue next
			}
		}
		var in []Sample
		for _, p := range s.samples {
			if p.T >= start && p.T <= end {
				in = append(in, p)
			}
		}
		if len(in) > 0 {
			out = append(out, fakeSeries{labels: s.labels, samples: in})
		}
	}
	return out, nil
}

func (f *fakeProm) LabelValues(_ context.Context, label string, matches []string, start, end time.Time, _ ...promv1.Option) (model.LabelValues, promv1.Warnings, promv1.Infos, error) {
	set := map[model.LabelValue]struct{}{}
	for _, m := range matches {
		ss, err := f.selectSeries(m, start.UnixMilli(), end.UnixMilli())
		if err != nil {
			return nil, nil, nil, err
		}
		for _, s := range ss {
			set[s.labels[model.LabelName(label)]] = struct{}{}
		}
	}
	var vals model.LabelValues
	for v := range set {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	return vals, nil, nil, nil
}

func (f *fakeProm) Series(_ context.Context, matches []string, start, end time.Time, _ ...promv1.Option) ([]model.LabelSet, promv1.Warnings, promv1.Infos, error) {
	seen := map[model.Fingerprint]struct{}{}
	var out []model.LabelSet
	for _, m := range matches {
		ss, err := f.selectSeries(m, start.UnixMilli(), end.UnixMilli())
		if err != nil {
			return nil, nil, nil, err
		}
		for _, s := range ss {
			if _, ok := seen[s.labels.Fingerprint()]; !ok {
				seen[s.labels.Fingerprint()] = struct{}{}
				out = append(out, s.labels)
			}
		}
	}
	return out, nil, nil, nil
}

func (f *fakeProm) Query(_ context.Context, q string, ts time.Time, _ ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxFlight.Load()
		if n <= m || f.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(50 * time.Microsecond) // let queries overlap
	f.queries.Add(1)
	i := strings.LastIndex(q, "[")
	if i < 0 || !strings.HasSuffix(q, "ms]") {
		return nil, nil, nil, &promv1.Error{Type: promv1.ErrBadData, Msg: "want a range selector"}
	}
	rng, err := strconv.ParseInt(q[i+1:len(q)-3], 10, 64)
	if err != nil {
		return nil, nil, nil, err
	}
	sel := q[:i]
	if f.queryErr != nil {
		if err := f.queryErr(sel); err != nil {
			return nil, nil, nil, err
		}
	}
	f.mu.Lock()
	if f.queried == nil {
		f.queried = map[string]int{}
	}
	f.queried[sel]++
	f.mu.Unlock()
	end := ts.UnixMilli()
	ss, err := f.selectSeries(sel, end-rng, end)
	if err != nil {
		return nil, nil, nil, err
	}
	m := model.Matrix{}
	for _, s := range ss {
		st := &model.SampleStream{Metric: model.Metric(s.labels)}
		for _, p := range s.samples {
			st.Values = append(st.Values, model.SamplePair{Timestamp: model.Time(p.T), Value: model.SampleValue(p.V)})
		}
		m = append(m, st)
	}
	return m, nil, nil, nil
}

func (f *fakeProm) Metadata(context.Context, string, string) (map[string][]promv1.Metadata, error) {
	return f.meta, nil
}
