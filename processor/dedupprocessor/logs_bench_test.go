package dedupprocessor

import (
	"context"
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
)

// This file uses only the factory, the config and threadCPU (the thread CPU
// clock of threadcpu_*_test.go), so that it also compiles in a copy of an
// older tree for before/after runs.

// benchLogAttrs are a log record's attributes, in sorted key order.
var benchLogAttrs = []struct {
	k string
	v any
}{
	{"code.function.name", "rollouts.Get"},
	{"code.line.number", int64(142)},
	{"http.request.method", "GET"},
	{"http.response.status_code", int64(200)},
	{"http.route", "/api/v1/rollouts/{id}"},
	{"log.iostream", "stdout"},
}

// benchLogUnsorted is an order of benchLogAttrs with keys out of order, as
// an application writes them (route and status first, code location last).
var benchLogUnsorted = []int{4, 2, 3, 5, 0, 1}

// benchLogs is a request of benchBatch log records over 10 resources,
// shaped like SDK output: timestamps, a severity, a string body and six
// attributes each. With sorted, every map's keys (the resource's and the
// records') are inserted in sorted order; otherwise out of order.
func benchLogs(sorted bool) plog.Logs {
	ld := plog.NewLogs()
	for r := range 10 {
		rl := ld.ResourceLogs().AppendEmpty()
		ra := rl.Resource().Attributes()
		svc := "svc-" + string(rune('a'+r))
		if sorted {
			ra.PutStr("host.name", "host-1")
			ra.PutStr("service.name", svc)
		} else {
			ra.PutStr("service.name", svc)
			ra.PutStr("host.name", "host-1")
		}
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("rollouts")
		recs := sl.LogRecords()
		for range benchBatch / 10 {
			lr := recs.AppendEmpty()
			lr.SetSeverityNumber(plog.SeverityNumberInfo)
			lr.SetSeverityText("INFO")
			lr.Body().SetStr("GET /api/v1/rollouts/42 200 12ms")
			for i := range benchLogAttrs {
				if !sorted {
					i = benchLogUnsorted[i]
				}
				switch v := benchLogAttrs[i].v.(type) {
				case string:
					lr.Attributes().PutStr(benchLogAttrs[i].k, v)
				case int64:
					lr.Attributes().PutInt(benchLogAttrs[i].k, v)
				}
			}
		}
	}
	return ld
}

// setLogStamps gives each record of ld a timestamp: at a position whose
// record of the previous request (prev) was new, while fewer than
// dupShare*benchBatch duplicates have been made, the previous request's
// stamp (the record exported twice); otherwise a fresh one from *seq. It
// returns this request's stamps and which of them were fresh. Every record
// is repeated at most once, so the duplicates are the share asked for at
// any window size.
func setLogStamps(ld plog.Logs, seq *uint64, prev []uint64, prevFresh []bool, dupShare float64) ([]uint64, []bool) {
	stamps, fresh := make([]uint64, 0, benchBatch), make([]bool, 0, benchBatch)
	n, dups := 0, 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		recs := rls.At(i).ScopeLogs().At(0).LogRecords()
		for j := 0; j < recs.Len(); j++ {
			var ts uint64
			isNew := true
			if len(prev) == benchBatch && prevFresh[n] && float64(dups) < dupShare*benchBatch {
				ts, isNew = prev[n], false
				dups++
			} else {
				*seq++
				ts = 1_700_000_000_000_000_000 + *seq
			}
			recs.At(j).SetTimestamp(pcommon.Timestamp(ts))
			recs.At(j).SetObservedTimestamp(pcommon.Timestamp(ts + 1_000_000))
			stamps, fresh = append(stamps, ts), append(fresh, isNew)
			n++
		}
	}
	return stamps, fresh
}

// BenchmarkLogsProcessor is the log path in steady state: the window is
// full (max_records 1M, every new record evicts one), requests of 1000
// records, none or half of each request repeating records of the previous
// one; attributes inserted in sorted key order or out of order (the
// canonical encoder writes every map sorted by key).
func BenchmarkLogsProcessor(b *testing.B) {
	for _, bc := range []struct {
		name   string
		share  float64
		sorted bool
	}{
		{"dup=0%/attrs=sorted", 0, true}, {"dup=50%/attrs=sorted", 0.5, true},
		{"dup=0%/attrs=unsorted", 0, false}, {"dup=50%/attrs=unsorted", 0.5, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := createDefaultConfig()
			p, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Shutdown(context.Background()) }()
			tmpl := benchLogs(bc.sorted)
			ld := plog.NewLogs()
			var (
				seq   uint64
				prev  []uint64
				fresh []bool
			)
			// Fill the window so every new record evicts one.
			for range cfg.Logs.MaxRecords/benchBatch + 1 {
				tmpl.CopyTo(ld)
				prev, fresh = setLogStamps(ld, &seq, nil, nil, 0)
				if err := p.ConsumeLogs(context.Background(), ld); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time of this goroutine's thread in ConsumeLogs, beside
			// the wall time, as BenchmarkTracesProcessor measures it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu int64
			var kept int
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				if i > 0 {
					kept += ld.LogRecordCount()
				}
				tmpl.CopyTo(ld)
				prev, fresh = setLogStamps(ld, &seq, prev, fresh, bc.share)
				b.StartTimer()
				c0 := threadCPU()
				if err := p.ConsumeLogs(context.Background(), ld); err != nil {
					b.Fatal(err)
				}
				cpu += threadCPU() - c0
			}
			b.StopTimer()
			kept += ld.LogRecordCount()
			// The duplicates were dropped: the share asked for, exactly.
			if want := b.N * int(float64(benchBatch)*(1-bc.share)); kept != want {
				b.Fatalf("%d records forwarded, want %d", kept, want)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/record")
			if cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N*benchBatch), "cpu-ns/record")
			}
		})
	}
}
