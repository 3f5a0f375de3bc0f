package distro

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// availableMemory is the memory the process may use: the cgroup v2 limit
// when one is set, else the machine's total; 0 when neither can be read.
func availableMemory() uint64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return v
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// dedupSoftLimitMiB is where the default config's dedup starts giving
// memory back: half of what the process may use, below the 60% at which
// memory_limiter (limit 80%, spike 20%) starts refusing data.
func dedupSoftLimitMiB() int {
	return int(availableMemory() / 2 >> 20)
}
