package dedupprocessor

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/metadatatest"
)

// TestStorageRecoveredItems: what the data dir's recovery found, as
// otelcol_processor_dedup_storage_recovered_items reports it by store and
// outcome: salvaged and lost items, files whose loss could not be counted,
// queue entries that could not be decoded when sent. The recovery record
// is the process's: this is the only test of the package that adds to it.
func TestStorageRecoveredItems(t *testing.T) {
	h := newHarness(t, nil)
	recovered.Add(recovered.File{Store: "journal", Salvaged: 5, Lost: 2})
	recovered.Add(recovered.File{Store: "queue", Salvaged: 3, LostUncounted: true})
	recovered.AddUndecodable(4)
	point := func(store, outcome string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("store", store), attribute.String("outcome", outcome)), Value: v}
	}
	metadatatest.AssertEqualProcessorDedupStorageRecoveredItems(t, h.tel, []metricdata.DataPoint[int64]{
		point("journal", "salvaged", 5), point("journal", "lost", 2), point("journal", "uncounted", 0),
		point("queue", "salvaged", 3), point("queue", "lost", 0), point("queue", "uncounted", 1), point("queue", "undecodable", 4),
	}, metricdatatest.IgnoreTimestamp())
}
