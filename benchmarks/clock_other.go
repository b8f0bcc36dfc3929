//go:build !linux

package benchmarks

import "time"

// machineMonotonic falls back to the wall clock where CLOCK_MONOTONIC is not read: the
// children's instants are then wall-clock readings, as the rates' are.
func machineMonotonic(t time.Time) int64 { return t.UnixNano() }
