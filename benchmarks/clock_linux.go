package benchmarks

import (
	"time"

	"golang.org/x/sys/unix"
)

// machineMonotonic reads CLOCK_MONOTONIC, which every process on the machine shares (t, read
// just before, is the fallback if the clock cannot be read).
func machineMonotonic(t time.Time) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return t.UnixNano()
	}
	return ts.Nano()
}
