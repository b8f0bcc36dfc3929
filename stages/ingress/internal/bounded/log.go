package bounded

import (
	"sync"
	"time"
)

// LogLimiter lets one log line of a kind through per Interval and counts what it held back, so
// that a flood of rejects or failures is reported, never silently, and never as a line per
// message. Safe for concurrent use.
type LogLimiter struct {
	Interval time.Duration
	mu       sync.Mutex
	last     time.Time
	held     int64
}

// Allow reports whether to log now and, if so, how many earlier events were held back.
func (l *LogLimiter) Allow(now time.Time) (ok bool, held int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.Interval {
		l.held++
		return false, 0
	}
	l.last, held, l.held = now, l.held, 0
	return true, held
}
