package dedupprocessor

import (
	"context"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/doubletake/doubletake/processor/dedupprocessor/internal/statuspage"
)

// pressureEvery is how often resident memory is compared with
// memory_soft_limit_mib.
const pressureEvery = time.Second

// residentBytes is the process's resident set size: /proc/self/statm on
// Linux, else what the Go runtime holds from the OS.
func residentBytes() uint64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// memoryStatus is the process against memory_soft_limit_mib (0: off) as
// the status page shows it.
func memoryStatus(softLimitMiB int) statuspage.MemoryStatus {
	rss := residentBytes()
	return statuspage.MemoryStatus{
		ResidentMiB: rss >> 20, SoftLimitMiB: softLimitMiB,
		Pressure: softLimitMiB > 0 && rss > uint64(softLimitMiB)<<20,
	}
}

// pressure shrinks every unit's window by a quarter whenever the
// process's resident memory is above limit, before the memory_limiter (or
// the kernel) has to act; what it removes is counted as
// evicted_entries{reason="shrink"}. The span and log windows shrink; the
// metric streams are bounded by metrics.max_streams alone.
type pressure struct {
	signals   [3]unit
	tel       *telemetry
	logger    *zap.Logger
	limitMiB  int           // memory_soft_limit_mib, positive
	warnEvery time.Duration // telemetry.warn_interval
}

func (p pressure) loop(ctx context.Context) {
	limit := uint64(p.limitMiB) << 20
	tick := time.NewTicker(pressureEvery)
	defer tick.Stop()
	var lastWarn time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rss := residentBytes()
		if rss <= limit {
			continue
		}
		var removed int
		for _, u := range p.signals {
			removed += u.window().shrink(ctx, p.tel)
		}
		if time.Since(lastWarn) >= p.warnEvery {
			p.logger.Warn("memory pressure: dedup windows shrunk",
				zap.Uint64("resident_mib", rss>>20),
				zap.Int("memory_soft_limit_mib", p.limitMiB),
				zap.Int("entries_removed", removed))
			lastWarn = time.Now()
		}
	}
}
