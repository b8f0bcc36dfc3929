package readapi

import (
	"strconv"
	"strings"
)

// applied collects the bounds a read applied where its request asked for more: a larger max,
// maxBytes or waitMs is lowered, not refused, and the reply says so (get's "applied", pull's
// and read's Rs-Applied header), so that a client knows why it got less than it asked for.
type applied map[string]int64

// lower records that name was asked as asked and applied as used, when that is lower.
func (a *applied) lower(name string, asked, used int64) {
	if asked > used {
		if *a == nil {
			*a = applied{}
		}
		(*a)[name] = used
	}
}

// header is the Rs-Applied value: name=value pairs, comma-separated, in a fixed order.
func (a applied) header() string {
	var parts []string
	for _, name := range []string{"max", "maxBytes", "waitMs"} {
		if v, ok := a[name]; ok {
			parts = append(parts, name+"="+strconv.FormatInt(v, 10))
		}
	}
	return strings.Join(parts, ",")
}
