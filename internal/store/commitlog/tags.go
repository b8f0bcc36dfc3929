package commitlog

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
			return nil, fmt.Errorf("commitlog: delay level %d is empty in %q", i+1, s)
		}
		unit, ok := units[f[len(f)-1]]
		if !ok {
			return nil, fmt.Errorf("commitlog: delay level %d %q has no unit s, m, h or d", i+1, f)
		}
		n, err := strconv.ParseInt(f[:len(f)-1], 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/unit {
			return nil, fmt.Errorf("commitlog: delay level %d %q is not a duration", i+1, f)
		}
		levels = append(levels, n*unit)
	}
	return levels, nil
}

// TagsCode returns the consume queue tags code of the record: Java's String.hashCode of the TAGS
// property sign-extended to 64 bits, 0 without tags. On SCHEDULE_TOPIC_XXXX with a DELAY property it
// is instead the delivery time, StoreTimestamp + the delay of the level (clamped to the highest
// level; level <= 0 keeps the tags hash), as RocketMQ's checkMessageAndReturnSize computes it.
// levels nil means DefaultDelayLevels. A DELAY that is not a Java int keeps the tags hash (RocketMQ
// would reject the whole record; a field only the dispatcher derives is no reason to lose data).
// It allocates nothing.
func (v View) TagsCode(levels DelayLevels) int64 {
	return v.TagsCodeOf(v.Properties().DispatchProps(), levels)
}

// parseJavaInt parses b as Integer.parseInt does for ASCII: an optional sign, then at least one
// decimal digit, within int32.
func parseJavaInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
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
