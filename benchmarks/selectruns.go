package benchmarks

import (
	"fmt"
	"regexp"
	"slices"
)

// SelectRuns keeps the runs whose ID matches pattern, in their order, and the earlier runs
// their rates are taken from (RateOf, RateOfMedian), which they cannot run without. It is for
// measuring a part of a preset again while working on it; the goals then read only what ran.
func SelectRuns(runs []Run, pattern string) ([]Run, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("--only %q: %w", pattern, err)
	}
	keep := make(map[string]bool)
	for i := len(runs) - 1; i >= 0; i-- {
		r := &runs[i]
		if !keep[r.ID] && !re.MatchString(r.ID) {
			continue
		}
		keep[r.ID] = true
		for _, id := range r.rateSources() {
			keep[id] = true
		}
	}
	out := slices.DeleteFunc(slices.Clone(runs), func(r Run) bool { return !keep[r.ID] })
	if len(out) == 0 {
		return nil, fmt.Errorf("--only %q: no run of the preset matches", pattern)
	}
	return out, nil
}
