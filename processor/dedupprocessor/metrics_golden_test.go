package dedupprocessor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The golden metric cases live in testdata/metrics/<case>/case.txt, in the
// compact text format that testdata/metrics/README.md describes: a config,
// requests in sequence each with the output expected downstream, then the
// processor's own metrics and (optionally) its warnings.
func TestGoldenMetrics(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "metrics", "*", "case.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no cases in testdata/metrics")
	}
	for _, path := range dirs {
		name := filepath.Base(filepath.Dir(path))
		t.Run(name, func(t *testing.T) { runGoldenCase(t, path) })
	}
}

type goldenRequest struct {
	in, out string
	now     int64 // the processor's clock for this request, Unix ns
	fail    bool  // the next consumer refuses this request
	line    int
}

type goldenCase struct {
	config    string
	requests  []goldenRequest
	telemetry string
	logs      *string // nil: not checked
}

func parseGoldenCase(t *testing.T, path string) goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gc goldenCase
	var cur *string
	now := int64(1000 * time.Second)
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "-- ") || !strings.HasSuffix(line, " --") {
			if cur != nil {
				*cur += line + "\n"
			}
			continue
		}
		head := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --"))
		switch head[0] {
		case "config":
			cur = &gc.config
		case "in":
			r := goldenRequest{line: i + 1}
			now += int64(time.Second)
			for _, opt := range head[1:] {
				switch {
				case opt == "fail":
					r.fail = true
				case strings.HasPrefix(opt, "now="):
					now = int64(parseSeconds(t, strings.TrimPrefix(opt, "now=")))
				default:
					t.Fatalf("%s:%d: unknown option %q", path, i+1, opt)
				}
			}
			r.now = now
			gc.requests = append(gc.requests, r)
			cur = &gc.requests[len(gc.requests)-1].in
		case "out":
			if len(gc.requests) == 0 {
				t.Fatalf("%s:%d: out before in", path, i+1)
			}
			cur = &gc.requests[len(gc.requests)-1].out
		case "telemetry":
			cur = &gc.telemetry
		case "logs":
			gc.logs = new(string)
			cur = gc.logs
		default:
			t.Fatalf("%s:%d: unknown section %q", path, i+1, head[0])
		}
	}
	return gc
}

// failSwitch is the next consumer: it keeps a copy of what it is offered
// (the processor's caller may reuse the request) and refuses it while fail
// is set.
type failSwitch struct {
	got  []pmetric.Metrics
	fail bool
}

func (f *failSwitch) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *failSwitch) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c := pmetric.NewMetrics()
	md.CopyTo(c)
	f.got = append(f.got, c)
	if f.fail {
		return errors.New("downstream unavailable")
	}
	return nil
}

// metricsHarness is one dedup component serving metrics, with a sink, a
// telemetry reader and a log observer.
type metricsHarness struct {
	t    *testing.T
	tel  *componenttest.Telemetry
	p    processor.Metrics
	sw   *failSwitch
	logs *observer.ObservedLogs
	now  int64
}

func newMetricsHarness(t *testing.T, cfg *Config) *metricsHarness {
	t.Helper()
	if err := confmap.Validate(cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	h := &metricsHarness{t: t, tel: componenttest.NewTelemetry(), sw: &failSwitch{}, logs: logs}
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	p, err := NewFactory().CreateMetrics(context.Background(), set, cfg, h.sw)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	p.(*metricsProcessor).st.metrics.now = func() int64 { return h.now }
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		_ = h.tel.Shutdown(context.Background())
	})
	return h
}

func runGoldenCase(t *testing.T, path string) {
	gc := parseGoldenCase(t, path)
	cfg := createDefaultConfig()
	if strings.TrimSpace(gc.config) != "" {
		r, err := confmap.NewRetrievedFromYAML([]byte(gc.config))
		if err != nil {
			t.Fatal(err)
		}
		conf, err := r.AsConf()
		if err != nil {
			t.Fatal(err)
		}
		if err := conf.Unmarshal(cfg); err != nil {
			t.Fatalf("config: %v", err)
		}
	}
	h := newMetricsHarness(t, cfg)
	for n, r := range gc.requests {
		md := parseMetricsText(t, r.in)
		h.now = r.now
		h.sw.fail = r.fail
		h.sw.got = nil
		err := h.p.ConsumeMetrics(context.Background(), md)
		// With fail, out is what the processor offered downstream.
		want, got := normalise(r.out), ""
		switch len(h.sw.got) {
		case 0:
		case 1:
			got = printMetricsText(h.sw.got[0])
		default:
			t.Fatalf("request %d: %d deliveries", n+1, len(h.sw.got))
		}
		if wantErr := r.fail && len(h.sw.got) > 0; (err != nil) != wantErr {
			t.Errorf("request %d (line %d): error %v, want error: %v", n+1, r.line, err, wantErr)
		}
		if got != want {
			t.Errorf("request %d (line %d): output differs\n--- got:\n%s--- want:\n%s", n+1, r.line, got, want)
		}
	}
	if got, want := telemetryText(t, h.tel), normalise(gc.telemetry); got != want {
		t.Errorf("telemetry differs\n--- got:\n%s--- want:\n%s", got, want)
	}
	if gc.logs != nil {
		if got, want := logsText(h.logs), normalise(*gc.logs); got != want {
			t.Errorf("logs differ\n--- got:\n%s--- want:\n%s", got, want)
		}
	}
}

// normalise drops comments and blank lines and collapses spaces.
func normalise(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		b.WriteString(strings.Join(f, " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// parseSeconds reads a decimal number of seconds into nanoseconds exactly.
func parseSeconds(t *testing.T, s string) uint64 {
	t.Helper()
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 9 {
		t.Fatalf("time %q: more than 9 decimals", s)
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	var f uint64
	if frac != "" {
		f, err = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			t.Fatalf("time %q: %v", s, err)
		}
	}
	return w*1e9 + f
}

func formatSeconds(ns uint64) string {
	s := strconv.FormatUint(ns/1e9, 10)
	if f := ns % 1e9; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%09d", f), "0")
	}
	return s
}

func parseMetricsText(t *testing.T, text string) pmetric.Metrics {
	t.Helper()
	md := pmetric.NewMetrics()
	var rm pmetric.ResourceMetrics
	var sm pmetric.ScopeMetrics
	var m pmetric.Metric
	have := 0 // 1 resource, 2 scope, 3 metric
	fail := func(line string, format string, args ...any) {
		t.Helper()
		t.Fatalf("%q: %s", line, fmt.Sprintf(format, args...))
	}
	for _, line := range strings.Split(normalise(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "resource":
			rm = md.ResourceMetrics().AppendEmpty()
			putAttrs(t, rm.Resource().Attributes(), f[1:])
			have = 1
		case "scope":
			if have < 1 {
				fail(line, "scope before resource")
			}
			sm = rm.ScopeMetrics().AppendEmpty()
			if len(f) > 1 {
				name, version, _ := strings.Cut(f[1], "@")
				sm.Scope().SetName(name)
				sm.Scope().SetVersion(version)
				putAttrs(t, sm.Scope().Attributes(), f[2:])
			}
			have = 2
		case "metric":
			if have < 2 || len(f) < 3 {
				fail(line, "metric needs a scope, a name and a type")
			}
			m = sm.Metrics().AppendEmpty()
			m.SetName(f[1])
			var temp pmetric.AggregationTemporality
			mono := false
			for _, o := range f[3:] {
				switch {
				case o == "cumulative":
					temp = pmetric.AggregationTemporalityCumulative
				case o == "delta":
					temp = pmetric.AggregationTemporalityDelta
				case o == "monotonic":
					mono = true
				case strings.HasPrefix(o, "unit="):
					m.SetUnit(strings.TrimPrefix(o, "unit="))
				default:
					fail(line, "unknown metric option %q", o)
				}
			}
			switch f[2] {
			case "gauge":
				m.SetEmptyGauge()
			case "sum":
				s := m.SetEmptySum()
				s.SetAggregationTemporality(temp)
				s.SetIsMonotonic(mono)
			case "histogram":
				m.SetEmptyHistogram().SetAggregationTemporality(temp)
			case "exphistogram":
				m.SetEmptyExponentialHistogram().SetAggregationTemporality(temp)
			case "summary":
				m.SetEmptySummary()
			default:
				fail(line, "unknown type %q", f[2])
			}
			have = 3
		case "point":
			if have < 3 || len(f) < 3 {
				fail(line, "point needs a metric, a start and a time")
			}
			values, attrs := f[3:], []string(nil)
			if i := slices.Index(f, "|"); i >= 0 {
				values, attrs = f[3:i], f[i+1:]
			}
			start, ts := pcommon.Timestamp(parseSeconds(t, f[1])), pcommon.Timestamp(parseSeconds(t, f[2]))
			parsePoint(t, line, m, start, ts, values, attrs)
		default:
			fail(line, "unknown line")
		}
	}
	return md
}

func putAttrs(t *testing.T, m pcommon.Map, kvs []string) {
	t.Helper()
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("attribute %q: want key=value", kv)
		}
		m.PutStr(k, v)
	}
}

func parseFloats(t *testing.T, s string) []float64 {
	t.Helper()
	if s == "" {
		return nil
	}
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			t.Fatalf("number %q: %v", p, err)
		}
		out = append(out, v)
	}
	return out
}

func parseUints(t *testing.T, s string) []uint64 {
	t.Helper()
	if s == "" {
		return nil
	}
	var out []uint64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			t.Fatalf("count %q: %v", p, err)
		}
		out = append(out, v)
	}
	return out
}

func parsePoint(t *testing.T, line string, m pmetric.Metric, start, ts pcommon.Timestamp, values, attrs []string) {
	t.Helper()
	kv := map[string]string{}
	flags := pmetric.DefaultDataPointFlags
	for _, v := range values {
		if v == "novalue" {
			flags = flags.WithNoRecordedValue(true)
			continue
		}
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			t.Fatalf("%q: value %q: want key=value", line, v)
		}
		kv[k] = val
	}
	num := func(k string) float64 {
		f := parseFloats(t, kv[k])
		if len(f) != 1 {
			t.Fatalf("%q: want one number for %s", line, k)
		}
		return f[0]
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
		var dp pmetric.NumberDataPoint
		if m.Type() == pmetric.MetricTypeGauge {
			dp = m.Gauge().DataPoints().AppendEmpty()
		} else {
			dp = m.Sum().DataPoints().AppendEmpty()
		}
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetFlags(flags)
		if s, ok := kv["i"]; ok {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			dp.SetIntValue(i)
		} else if _, ok := kv["v"]; ok {
			dp.SetDoubleValue(num("v"))
		}
		putAttrs(t, dp.Attributes(), attrs)
	case pmetric.MetricTypeHistogram:
		dp := m.Histogram().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetFlags(flags)
		dp.SetCount(uint64(num("count")))
		if _, ok := kv["sum"]; ok {
			dp.SetSum(num("sum"))
		}
		if _, ok := kv["min"]; ok {
			dp.SetMin(num("min"))
		}
		if _, ok := kv["max"]; ok {
			dp.SetMax(num("max"))
		}
		dp.ExplicitBounds().FromRaw(parseFloats(t, kv["bounds"]))
		dp.BucketCounts().FromRaw(parseUints(t, kv["buckets"]))
		putAttrs(t, dp.Attributes(), attrs)
	case pmetric.MetricTypeExponentialHistogram:
		dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetFlags(flags)
		dp.SetCount(uint64(num("count")))
		if _, ok := kv["sum"]; ok {
			dp.SetSum(num("sum"))
		}
		if _, ok := kv["scale"]; ok {
			dp.SetScale(int32(num("scale")))
		}
		if _, ok := kv["zero"]; ok {
			dp.SetZeroCount(uint64(num("zero")))
		}
		for key, b := range map[string]pmetric.ExponentialHistogramDataPointBuckets{"pos": dp.Positive(), "neg": dp.Negative()} {
			if s, ok := kv[key]; ok {
				off, counts, _ := strings.Cut(s, ":")
				o, err := strconv.ParseInt(off, 10, 32)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				b.SetOffset(int32(o))
				b.BucketCounts().FromRaw(parseUints(t, counts))
			}
		}
		putAttrs(t, dp.Attributes(), attrs)
	case pmetric.MetricTypeSummary:
		dp := m.Summary().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetFlags(flags)
		dp.SetCount(uint64(num("count")))
		dp.SetSum(num("sum"))
		if s := kv["q"]; s != "" {
			for _, qv := range strings.Split(s, ",") {
				q, v, _ := strings.Cut(qv, ":")
				e := dp.QuantileValues().AppendEmpty()
				e.SetQuantile(parseFloats(t, q)[0])
				e.SetValue(parseFloats(t, v)[0])
			}
		}
		putAttrs(t, dp.Attributes(), attrs)
	}
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func joinFloats(s pcommon.Float64Slice) string {
	var p []string
	for i := 0; i < s.Len(); i++ {
		p = append(p, fmtFloat(s.At(i)))
	}
	return strings.Join(p, ",")
}

func joinUints(s pcommon.UInt64Slice) string {
	var p []string
	for i := 0; i < s.Len(); i++ {
		p = append(p, strconv.FormatUint(s.At(i), 10))
	}
	return strings.Join(p, ",")
}

func attrText(m pcommon.Map) string {
	var p []string
	for k, v := range m.All() {
		p = append(p, k+"="+v.AsString())
	}
	return strings.Join(p, " ")
}

// printMetricsText writes md in the text format, attributes in their order.
func printMetricsText(md pmetric.Metrics) string {
	var b strings.Builder
	line := func(parts ...string) {
		var keep []string
		for _, p := range parts {
			if p != "" {
				keep = append(keep, p)
			}
		}
		b.WriteString(strings.Join(keep, " "))
		b.WriteByte('\n')
	}
	point := func(start, ts pcommon.Timestamp, flags pmetric.DataPointFlags, values string, attrs pcommon.Map) {
		if flags.NoRecordedValue() {
			values = strings.TrimSpace(values + " novalue")
		}
		a := attrText(attrs)
		if a != "" {
			a = "| " + a
		}
		line("point", formatSeconds(uint64(start)), formatSeconds(uint64(ts)), values, a)
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		line("resource", attrText(rm.Resource().Attributes()))
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			name := sm.Scope().Name()
			if v := sm.Scope().Version(); v != "" {
				name += "@" + v
			}
			line("scope", name, attrText(sm.Scope().Attributes()))
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				unit := ""
				if m.Unit() != "" {
					unit = "unit=" + m.Unit()
				}
				temp := func(t pmetric.AggregationTemporality) string {
					switch t {
					case pmetric.AggregationTemporalityCumulative:
						return "cumulative"
					case pmetric.AggregationTemporalityDelta:
						return "delta"
					}
					return ""
				}
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					line("metric", m.Name(), "gauge", unit)
				case pmetric.MetricTypeSum:
					mono := ""
					if m.Sum().IsMonotonic() {
						mono = "monotonic"
					}
					line("metric", m.Name(), "sum", temp(m.Sum().AggregationTemporality()), mono, unit)
				case pmetric.MetricTypeHistogram:
					line("metric", m.Name(), "histogram", temp(m.Histogram().AggregationTemporality()), unit)
				case pmetric.MetricTypeExponentialHistogram:
					line("metric", m.Name(), "exphistogram", temp(m.ExponentialHistogram().AggregationTemporality()), unit)
				case pmetric.MetricTypeSummary:
					line("metric", m.Name(), "summary", unit)
				default:
					line("metric", m.Name(), "empty")
				}
				numbers := func(dps pmetric.NumberDataPointSlice) {
					for n := 0; n < dps.Len(); n++ {
						dp := dps.At(n)
						v := ""
						switch dp.ValueType() {
						case pmetric.NumberDataPointValueTypeInt:
							v = "i=" + strconv.FormatInt(dp.IntValue(), 10)
						case pmetric.NumberDataPointValueTypeDouble:
							v = "v=" + fmtFloat(dp.DoubleValue())
						}
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Flags(), v, dp.Attributes())
					}
				}
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					numbers(m.Gauge().DataPoints())
				case pmetric.MetricTypeSum:
					numbers(m.Sum().DataPoints())
				case pmetric.MetricTypeHistogram:
					dps := m.Histogram().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						dp := dps.At(n)
						v := []string{"count=" + strconv.FormatUint(dp.Count(), 10)}
						if dp.HasSum() {
							v = append(v, "sum="+fmtFloat(dp.Sum()))
						}
						if dp.HasMin() {
							v = append(v, "min="+fmtFloat(dp.Min()))
						}
						if dp.HasMax() {
							v = append(v, "max="+fmtFloat(dp.Max()))
						}
						if dp.ExplicitBounds().Len() > 0 {
							v = append(v, "bounds="+joinFloats(dp.ExplicitBounds()))
						}
						if dp.BucketCounts().Len() > 0 {
							v = append(v, "buckets="+joinUints(dp.BucketCounts()))
						}
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Flags(), strings.Join(v, " "), dp.Attributes())
					}
				case pmetric.MetricTypeExponentialHistogram:
					dps := m.ExponentialHistogram().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						dp := dps.At(n)
						v := []string{"count=" + strconv.FormatUint(dp.Count(), 10)}
						if dp.HasSum() {
							v = append(v, "sum="+fmtFloat(dp.Sum()))
						}
						v = append(v, "scale="+strconv.Itoa(int(dp.Scale())), "zero="+strconv.FormatUint(dp.ZeroCount(), 10))
						if c := dp.Positive().BucketCounts(); c.Len() > 0 {
							v = append(v, fmt.Sprintf("pos=%d:%s", dp.Positive().Offset(), joinUints(c)))
						}
						if c := dp.Negative().BucketCounts(); c.Len() > 0 {
							v = append(v, fmt.Sprintf("neg=%d:%s", dp.Negative().Offset(), joinUints(c)))
						}
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Flags(), strings.Join(v, " "), dp.Attributes())
					}
				case pmetric.MetricTypeSummary:
					dps := m.Summary().DataPoints()
					for n := 0; n < dps.Len(); n++ {
						dp := dps.At(n)
						v := []string{"count=" + strconv.FormatUint(dp.Count(), 10), "sum=" + fmtFloat(dp.Sum())}
						var qs []string
						for q := 0; q < dp.QuantileValues().Len(); q++ {
							e := dp.QuantileValues().At(q)
							qs = append(qs, fmtFloat(e.Quantile())+":"+fmtFloat(e.Value()))
						}
						if len(qs) > 0 {
							v = append(v, "q="+strings.Join(qs, ","))
						}
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Flags(), strings.Join(v, " "), dp.Attributes())
					}
				}
			}
		}
	}
	return normalise(b.String())
}

const telemetryPrefix = "otelcol_processor_dedup_"

// telemetryText renders every data point of the processor's metrics that
// carries signal=metrics, as name{k=v,...} value, sorted; the prefix and
// the signal attribute are left out.
func telemetryText(t *testing.T, tel *componenttest.Telemetry) string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var lines []string
	add := func(name string, set attribute.Set, value string) {
		if v, ok := set.Value("signal"); !ok || v.AsString() != "metrics" {
			return
		}
		var kv []string
		for _, a := range set.ToSlice() {
			if a.Key != "signal" {
				kv = append(kv, string(a.Key)+"="+a.Value.String())
			}
		}
		lines = append(lines, strings.TrimPrefix(name, telemetryPrefix)+"{"+strings.Join(kv, ",")+"} "+value)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == telemetryPrefix+"effective_window" {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(m.Name, dp.Attributes, strconv.FormatInt(dp.Value, 10))
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					add(m.Name, dp.Attributes, strconv.FormatInt(dp.Value, 10))
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					add(m.Name, dp.Attributes, fmtFloat(dp.Value))
				}
			}
		}
	}
	slices.SortFunc(lines, func(a, b string) int { // by name, then attributes
		an, ar, _ := strings.Cut(a, "{")
		bn, br, _ := strings.Cut(b, "{")
		if c := strings.Compare(an, bn); c != 0 {
			return c
		}
		return strings.Compare(ar, br)
	})
	return normalise(strings.Join(lines, "\n"))
}

// logsText renders warnings as "warn <message> k=v ...", with the fields a
// reader acts on; times as Unix seconds.
func logsText(logs *observer.ObservedLogs) string {
	var b strings.Builder
	for _, e := range logs.All() {
		if e.Level < zapcore.WarnLevel {
			continue
		}
		b.WriteString("warn " + strings.ReplaceAll(e.Message, " ", "_"))
		fields := e.ContextMap()
		for _, k := range []string{"service.name", "metric", "reason", "elected_start", "other_start", "points", "action", "class", "max_streams", "unjudged_points", "held_points_expired"} {
			v, ok := fields[k]
			if !ok {
				continue
			}
			if tm, ok := v.(time.Time); ok {
				v = formatSeconds(uint64(tm.UnixNano()))
			}
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
		b.WriteByte('\n')
	}
	return normalise(b.String())
}

// TestMetricsTextRoundTrip keeps the test format honest: what is parsed
// prints back the same.
func TestMetricsTextRoundTrip(t *testing.T) {
	text := normalise(`
resource service.name=api host.name=a
scope meter@1.2 k=v
metric requests sum cumulative monotonic unit=1
point 1 10.5 i=3 | method=GET
point 1 11 v=2.5 novalue
metric g gauge
point 0 12 v=-1
metric h histogram delta unit=ms
point 1 10 count=3 sum=6 bounds=1,5 buckets=1,1,1 | b=1
metric e exphistogram cumulative
point 1 10 count=4 sum=8 scale=2 zero=1 pos=-1:1,2 neg=0:0,1
metric s summary
point 1 10 count=2 sum=3 q=0.5:1,0.99:2
`)
	if got := printMetricsText(parseMetricsText(t, text)); got != text {
		t.Fatalf("round trip:\n%s\nwant:\n%s", got, text)
	}
}
