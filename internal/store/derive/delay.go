package derive

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DelayLevels is the delay of each delay level in ms, level 1 first (messageDelayLevel). nil
// means the default levels.
type DelayLevels []int64

// defaultDelayLevels is RocketMQ's default "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".
var defaultDelayLevels = DelayLevels{
	1000, 5000, 10000, 30000,
	60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000, 540000, 600000, 1200000, 1800000,
	3600000, 7200000,
}

// DefaultDelayLevels returns a copy of RocketMQ's default delay levels.
func DefaultDelayLevels() DelayLevels { return append(DelayLevels(nil), defaultDelayLevels...) }

// ParseDelayLevels parses a messageDelayLevel setting: space-separated durations, each a number
// and a unit s, m, h or d ("1s 5s 10s 30s 1m ... 2h").
func ParseDelayLevels(s string) (DelayLevels, error) {
	units := map[byte]int64{'s': 1000, 'm': 60000, 'h': 3600000, 'd': 86400000}
	var levels DelayLevels
	for i, f := range strings.Split(s, " ") {
		if f == "" {
			return nil, fmt.Errorf("derive: delay level %d is empty in %q", i+1, s)
		}
		unit, ok := units[f[len(f)-1]]
		if !ok {
			return nil, fmt.Errorf("derive: delay level %d %q has no unit s, m, h or d", i+1, f)
		}
		n, err := strconv.ParseInt(f[:len(f)-1], 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/unit {
			return nil, fmt.Errorf("derive: delay level %d %q is not a duration", i+1, f)
		}
		levels = append(levels, n*unit)
	}
	return levels, nil
}

// parseJavaInt parses s as Integer.parseInt does for ASCII: an optional sign, then at least one
// decimal digit, within int32.
func parseJavaInt(s string) (int64, bool) {
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > math.MaxInt32+1 {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	if n > math.MaxInt32 {
		return 0, false
	}
	return n, true
}
