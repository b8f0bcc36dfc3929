package indexfile

import (
	"fmt"
	"time"
)

// NameLen is the length of an index file name: local time as yyyyMMddHHmmssSSS, RocketMQ's
// UtilAll.timeMillisToHumanString (not an offset and not epoch milliseconds).
const NameLen = 17

// nameLayout is the layout of the first 14 digits; milliseconds follow as 3 digits.
const nameLayout = "20060102150405"

// FormatName is the file name for a file created at t, in t's location.
func FormatName(t time.Time) string {
	return fmt.Sprintf("%04d%02d%02d%02d%02d%02d%03d",
		t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6)
}

// IsName reports whether name has the form of an index file name.
func IsName(name string) bool {
	_, ok := parseWall(name)
	return ok
}

// parseWall reads a name back as wall-clock fields (in UTC, so that adding a millisecond is
// plain calendar arithmetic, with no daylight-saving gap or repeat in the way).
func parseWall(name string) (time.Time, bool) {
	if len(name) != NameLen {
		return time.Time{}, false
	}
	for i := 0; i < NameLen; i++ {
		if name[i] < '0' || name[i] > '9' {
			return time.Time{}, false
		}
	}
	t, err := time.ParseInLocation(nameLayout, name[:14], time.UTC)
	if err != nil {
		return time.Time{}, false
	}
	ms := int(name[14]-'0')*100 + int(name[15]-'0')*10 + int(name[16]-'0')
	return t.Add(time.Duration(ms) * time.Millisecond), true
}

// nextName names a new file created at now: the local time, unless that does not sort after
// last (the clock went back, daylight saving ended, or two files in one millisecond), in which
// case the millisecond after last, so that name order stays creation order.
func nextName(now time.Time, loc *time.Location, last string) string {
	name := FormatName(now.In(loc))
	if last == "" || name > last {
		return name
	}
	return afterName(last)
}

// afterName is the name one millisecond after name (which must be a valid name).
func afterName(name string) string {
	t, ok := parseWall(name)
	if !ok {
		panic("indexfile: afterName of invalid name " + name)
	}
	return FormatName(t.Add(time.Millisecond))
}
