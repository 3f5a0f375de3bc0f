package dedupprocessor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/internal/recovered"
	"github.com/doubletake/doubletake/internal/storagestate"
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

// dataDirReporters are the host's storage extensions that report their
// data dir's room (log_storage), in the order of their ids.
func dataDirReporters(host component.Host) []storagestate.Reporter {
	exts := host.GetExtensions()
	ids := slices.SortedFunc(maps.Keys(exts), func(a, b component.ID) int { return strings.Compare(a.String(), b.String()) })
	var out []storagestate.Reporter
	for _, id := range ids {
		if r, ok := exts[id].(storagestate.Reporter); ok {
			out = append(out, r)
		}
	}
	return out
}

// dataDirStatus reads each reporter's data dir: a full one gets the line
// the page shows.
func dataDirStatus(reporters []storagestate.Reporter) []statuspage.DataDirStatus {
	var out []statuspage.DataDirStatus
	for _, r := range reporters {
		st := r.StorageState()
		row := statuspage.DataDirStatus{Directory: st.Directory, Full: st.Full(), FreeBytes: st.FreeBytes, FullClients: st.FullClients, RefusedWrites: st.RefusedWrites}
		if row.Full {
			free := "unknown"
			if st.FreeBytes >= 0 {
				free = strconv.FormatInt(st.FreeBytes, 10) + " bytes"
			}
			row.Line = fmt.Sprintf("data dir full: %s free on the filesystem of %s, new data refused (retryably: HTTP 503, gRPC Unavailable) by %s until the queue drains or room is freed; %d writes refused so far. What was accepted is kept and delivered.",
				free, st.Directory, strings.Join(st.FullClients, ", "), st.RefusedWrites)
		}
		out = append(out, row)
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
