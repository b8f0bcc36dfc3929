package benchmarks

import "time"

// epoch is this process's origin of time: the publish times carried in reply subjects, the
// times progress records (both on Go's monotonic clock, as durations since epoch), and the
// instant that ties Go's monotonic clock to the machine's (epochMono).
//
// epochMono is the machine's monotonic clock (CLOCK_MONOTONIC on Linux: one clock for every
// process, unlike Go's monotonic readings, which count from each process's start) read at epoch.
// With it a time of one child converts to an instant another child's can be subtracted from
// (monoNanos), which a wall-clock reading cannot promise over a minute-long run (NTP slews it).
var epoch, epochMono = readEpoch()

func readEpoch() (time.Time, int64) {
	t := time.Now()
	return t, machineMonotonic(t)
}

// monoNanos is t (a time of this process that has Go's monotonic reading: time.Now, or epoch
// plus a duration) on the machine's monotonic clock, in nanoseconds.
func monoNanos(t time.Time) int64 { return epochMono + int64(t.Sub(epoch)) }
