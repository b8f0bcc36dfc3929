package vfs

import (
	"os"
	"strconv"
	"strings"
)

// DefaultMaxMapCount is Linux's default vm.max_map_count, assumed where it cannot be read.
const DefaultMaxMapCount = 65530

// MaxMapCount is how many memory mappings this process may hold (Linux's vm.max_map_count).
// Every mapped segment is one, so it bounds how many ConsumeQueues can stay mapped at once: a
// store with more active queues than that must map and unmap them as they are used. Kafka's
// operators raise it for the same reason (one mapping per log segment index).
func MaxMapCount() int {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return DefaultMaxMapCount
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return DefaultMaxMapCount
	}
	return n
}
