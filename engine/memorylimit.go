package engine

import (
	"os"
	"runtime/debug"
)

// DefaultMemoryLimit is the memory budget of an engine's whole process (`engine run
// --memory-limit`): the Go runtime's soft limit, under which the collector keeps the heap, the
// stacks and the runtime's own memory. The default pending limits (ingress.DefaultPendingMsgs,
// DefaultPendingBytes) are sized to fit in it with the rest of the pipeline (docs/CONFIG.md,
// "Memory").
const DefaultMemoryLimit = 256 << 20

// ApplyMemoryLimit makes limit bytes the process's soft memory limit (debug.SetMemoryLimit),
// unless the GOMEMLIMIT environment variable chose one (Go's own setting wins, as Go users
// expect) or limit is 0 (no limit). It returns the limit in force.
func ApplyMemoryLimit(limit int64) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set || limit <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(limit)
	return limit
}
