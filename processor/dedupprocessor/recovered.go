package dedupprocessor

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/metadata"
	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// StorageStatus is one storage file found damaged at start.
type StorageStatus = statuspage.StorageStatus

func storageStatus() []StorageStatus {
	var out []StorageStatus
	for _, f := range recovered.Files() {
		out = append(out, StorageStatus{File: f.Path, KeptAs: f.MovedTo, Store: f.Store, Salvaged: f.Salvaged,
			Lost: f.Lost, LostEntries: f.LostEntries, LostUncounted: f.LostUncounted, Line: f.Line})
	}
	if n := recovered.Undecodable(); n > 0 {
		out = append(out, StorageStatus{Store: "queue", LostUncounted: true,
			Line: "queue entries that could not be decoded when sent, dropped by the queue: " + strconv.FormatInt(n, 10) + " (logged; their items cannot be counted)"})
	}
	return out
}

// observeRecovered observes otelcol_processor_dedup_storage_recovered_items:
// the items of the storage files found damaged at start, by store
// (queue, journal, storage) and outcome (salvaged, lost), plus one
// series of outcome "uncounted" (1 for each file whose loss could not be
// counted) and the queue entries that could not be decoded when sent
// (outcome undecodable, in entries). It is a counter over the process's
// life: a restart that finds nothing damaged starts it again at 0.
func observeRecovered(tb *metadata.TelemetryBuilder) error {
	return tb.RegisterProcessorDedupStorageRecoveredItemsCallback(func(_ context.Context, o metric.Int64Observer) error {
		type key struct{ store, outcome string }
		sums := map[key]int64{}
		for _, f := range recovered.Files() {
			sums[key{f.Store, "salvaged"}] += f.Salvaged
			sums[key{f.Store, "lost"}] += f.Lost
			if f.LostUncounted {
				sums[key{f.Store, "uncounted"}]++
			} else {
				sums[key{f.Store, "uncounted"}] += 0
			}
		}
		if n := recovered.Undecodable(); n > 0 {
			sums[key{"queue", "undecodable"}] = n
		}
		for k, v := range sums {
			o.Observe(v, metric.WithAttributes(attribute.String("store", k.store), attribute.String("outcome", k.outcome)))
		}
		return nil
	})
}
