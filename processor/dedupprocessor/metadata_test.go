package dedupprocessor

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"

	"github.com/doubletake/doubletake/internal/streams"
)

// metadataFile is what metadata.yaml says of the telemetry.
type metadataFile struct {
	Attributes map[string]struct {
		NameOverride string   `yaml:"name_override"`
		Enum         []string `yaml:"enum"`
	} `yaml:"attributes"`
	Telemetry struct {
		Metrics map[string]struct {
			Attributes []string `yaml:"attributes"`
		} `yaml:"metrics"`
	} `yaml:"telemetry"`
}

func loadMetadata(t *testing.T) metadataFile {
	t.Helper()
	b, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md metadataFile
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	return md
}

// enum is the values metadata.yaml declares for attribute key.
func (md metadataFile) enum(t *testing.T, key string) []string {
	t.Helper()
	a, ok := md.Attributes[key]
	if !ok {
		t.Fatalf("metadata.yaml declares no attribute %s", key)
	}
	return a.Enum
}

// TestMetadataDeclaresWhatIsRecorded runs traces (duplicates, conflicts,
// invalid ids, nested duplicates), logs and metrics through the processor
// and checks every instrument, attribute and value it recorded against
// metadata.yaml, which the telemetry builder and documentation.md are
// generated from: the yaml cannot drift from the code unnoticed again.
func TestMetadataDeclaresWhatIsRecorded(t *testing.T) {
	md := loadMetadata(t)
	reader := sdkmetric.NewManualReader()
	tel := componenttest.NewTelemetry(componenttest.WithMetricOptions(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	cfg := createDefaultConfig()
	cfg.Traces.Nested.Detect = true
	cfg.Traces.MaxSpans = 2 // evictions (reason=capacity)
	f := NewFactory()
	ctx := context.Background()
	tp, err := f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	lp, err := f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	mp, err := f.CreateMetrics(ctx, set, cfg, consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []component.Component{tp, lp, mp} {
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
	}
	send := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	send(tp.ConsumeTraces(ctx, traces(spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 1, "x", 0}, spanSpec{"a", 1, 1, "y", 0}, spanSpec{"a", 0, 0, "zero", 0})))
	send(tp.ConsumeTraces(ctx, doubleWrapped(9)))
	send(lp.ConsumeLogs(ctx, logs(logSpec{"b", "hello", 1, ""}, logSpec{"b", "hello", 1, ""})))
	s := uint64(1e9)
	send(mp.ConsumeMetrics(ctx, sumPoint(10*s, 20*s, 5)))
	send(mp.ConsumeMetrics(ctx, sumPoint(10*s, 20*s, 5)))
	send(mp.ConsumeMetrics(ctx, sumPoint(5*s, 21*s, 9)))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, c := range []component.Component{tp, lp, mp} {
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}

	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			name, ok := strings.CutPrefix(m.Name, "otelcol_")
			if !ok || !strings.HasPrefix(name, "processor_dedup_") {
				continue
			}
			decl, ok := md.Telemetry.Metrics[name]
			if !ok {
				t.Errorf("%s recorded, not declared in metadata.yaml", m.Name)
				continue
			}
			// The attribute keys the metric declares, by the name users see.
			keys := map[string]string{}
			for _, a := range decl.Attributes {
				k := a
				if o := md.Attributes[a].NameOverride; o != "" {
					k = o
				}
				keys[k] = a
			}
			for _, set := range dataPointAttrs(m.Data) {
				seen[name] = true
				for _, kv := range set.ToSlice() {
					a, ok := keys[string(kv.Key)]
					if !ok {
						t.Errorf("%s{%s=%q}: attribute not declared for it in metadata.yaml", m.Name, kv.Key, kv.Value.Emit())
						continue
					}
					if e := md.Attributes[a].Enum; len(e) > 0 && !slices.Contains(e, kv.Value.AsString()) {
						t.Errorf("%s{%s=%q}: value not among metadata.yaml's %s enum %v", m.Name, kv.Key, kv.Value.AsString(), a, e)
					}
				}
			}
		}
	}
	// The workload reached these; a check of nothing would pass.
	for _, want := range []string{
		"processor_dedup_received_items", "processor_dedup_duplicate_items", "processor_dedup_conflict_items",
		"processor_dedup_invalid_id_items", "processor_dedup_evicted_entries", "processor_dedup_nested_spans",
		"processor_dedup_metric_points", "processor_dedup_entries", "processor_dedup_entries_limit",
		"processor_dedup_effective_window",
	} {
		if !seen[want] {
			t.Errorf("otelcol_%s not recorded by the workload", want)
		}
	}
}

// dataPointAttrs returns the attribute sets of a metric's data points.
func dataPointAttrs(data metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	}
	return out
}

// TestMetadataNamesEveryReason: the reasons and actions the metric signal
// records come from internal/streams and actionNames; metadata.yaml lists
// each of them, so that a new one cannot go undocumented.
func TestMetadataNamesEveryReason(t *testing.T) {
	md := loadMetadata(t)
	var reasons []string
	for r := streams.Reason(1); r < streams.NumReasons; r++ {
		if r != streams.ReasonUnjudged { // counted in unjudged_points as reason=stream_limit
			reasons = append(reasons, r.String())
		}
	}
	var classes []string
	for c := range streams.Class(streams.NumClasses) {
		classes = append(classes, c.String())
	}
	var elections []string
	for e := streams.Election(1); e < streams.NumElections; e++ {
		elections = append(elections, e.String())
	}
	for _, c := range []struct {
		attr string
		want []string
	}{
		{"point_reason", reasons},
		{"election_reason", elections},
		{"point_action", actionNames[:]},
		{"writer_class", classes},
	} {
		got := md.enum(t, c.attr)
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(c.want))) {
			t.Errorf("metadata.yaml %s enum %v, the code records %v", c.attr, got, c.want)
		}
	}
}
