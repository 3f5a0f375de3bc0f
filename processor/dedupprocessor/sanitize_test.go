package dedupprocessor

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/doubletake/doubletake/internal/sanitize"
)

// TestTelemetryLabelsSanitized: a service.name and scope names with
// invalid UTF-8, terminal escapes and a megabyte of text reach the
// processor's metrics as valid, escaped, bounded labels (Prometheus'
// exposition refuses invalid UTF-8 and answers the whole scrape with 500).
func TestTelemetryLabelsSanitized(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Traces.Nested.Detect = true })
	svcName := "shop\xff\x1b[2J" + strings.Repeat("s", 1<<20)
	scope := "lib\xc3\x28\n"
	td := doubleWrapped(1)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", svcName)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetName(scope)
	if err := h.sendTraces(td); err != nil {
		t.Fatal(err)
	}
	want := sanitize.Label(svcName)
	if !strings.HasPrefix(want, `shop\xff\x1b[2J`) {
		t.Fatalf("sanitized name %q", want)
	}
	if got := h.counter("otelcol_processor_dedup_received_items", attribute.String("service.name", want)); got != 3 {
		t.Fatalf("received_items{service.name=%q} = %d, want 3", want, got)
	}
	// The nested detector holds names clipped with a hash of the whole
	// (nested.MaxStringBytes): the label starts like the others.
	if got := h.counter("otelcol_processor_dedup_nested_spans"); got != 1 {
		t.Fatalf("nested_spans = %d, want 1", got)
	}
	for _, name := range []string{"otelcol_processor_dedup_received_items", "otelcol_processor_dedup_nested_spans"} {
		m, err := h.tel.GetMetric(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			for _, kv := range dp.Attributes.ToSlice() {
				v := kv.Value.String()
				if kv.Key == "service.name" && !strings.HasPrefix(v, `shop\xff\x1b[2J`) {
					t.Errorf("%s{service.name=%q}: want it to start with the escaped name", name, v)
				}
				if !utf8.ValidString(v) || len(v) > sanitize.MaxLabelBytes || strings.ContainsAny(v, "\x1b\n") {
					t.Errorf("%s{%s=%q}: want valid UTF-8, escaped, at most %d bytes", name, kv.Key, v, sanitize.MaxLabelBytes)
				}
			}
		}
	}
}
