package benchmarks

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Usage is a process's resource use: CPU time (user + system) and peak resident set size.
type Usage struct {
	User   time.Duration `json:"user"`
	System time.Duration `json:"system"`
	// MaxRSS is the peak resident set in bytes: the process's high-water mark, file pages it
	// mapped and touched included (the CommitLog pages an engine wrote and read back count).
	MaxRSS int64 `json:"max_rss"`
}

// CPU is user plus system time.
func (u Usage) CPU() time.Duration { return u.User + u.System }

// Sub is the CPU used between earlier and u; the peak RSS is u's.
func (u Usage) Sub(earlier Usage) Usage {
	return Usage{User: u.User - earlier.User, System: u.System - earlier.System, MaxRSS: u.MaxRSS}
}

// selfUsage is getrusage(RUSAGE_SELF): every thread of this process. On Linux the peak RSS is
// VmHWM from /proc/self/status instead of ru_maxrss: ru_maxrss carries over exec, so a child
// would report at least the RSS its parent had when it forked.
func selfUsage() Usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}
	}
	u := fromRusage(&ru)
	if hwm, ok := vmHWM(); ok {
		u.MaxRSS = hwm
	}
	return u
}

// vmHWM reads the peak resident set of this process's address space (Linux).
func vmHWM() (int64, bool) { return procStatusKB("VmHWM:") }

// rssAnon reads the anonymous resident memory of this process now (Linux).
func rssAnon() (int64, bool) { return procStatusKB("RssAnon:") }

// procStatusKB reads the field of /proc/self/status named name (with its colon), in kB, as bytes.
func procStatusKB(name string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte(name)); ok {
			f := bytes.Fields(rest) // "1234 kB"
			if len(f) == 2 && string(f[1]) == "kB" {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb << 10, true
				}
			}
		}
	}
	return 0, false
}

// fromRusage converts a rusage; ru_maxrss is in KiB on Linux and in bytes on Darwin.
// Note that on Linux a process's ru_maxrss is at least its parent's RSS at fork (see selfUsage).
func fromRusage(ru *syscall.Rusage) Usage {
	rss := int64(ru.Maxrss)
	if runtime.GOOS != "darwin" {
		rss <<= 10
	}
	return Usage{
		User:   time.Duration(ru.Utime.Nano()),
		System: time.Duration(ru.Stime.Nano()),
		MaxRSS: rss,
	}
}
