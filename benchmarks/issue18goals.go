package benchmarks

import "fmt"

// issue18Goals are issue 18's goals, from the runs of the issue18 preset: the bursts' ratios to
// the ceiling as medians of the rounds (RoundSeriesOf; every round of both series must be
// valid), the paced and overload runs of engine-sync by ID. Every drop counted has no figure to
// compare: a drop not counted makes the run invalid.
func issue18Goals() []goal {
	burst := func(sc string, kib bool, wantMB bool) func([]Result, Load) (float64, string, string) {
		return func(rs []Result, base Load) (float64, string, string) {
			l := withAck(base, FireAndForget)
			if kib {
				l.BodySize = issue18KiB
			}
			return seriesRatio(rs, sc, l, wantMB)
		}
	}
	run := func(id string, figure func(*Result) float64) func([]Result, Load) (float64, string, string) {
		return func(rs []Result, _ Load) (float64, string, string) {
			r, why := runByID(rs, id)
			if why != "" {
				return 0, id, why
			}
			return figure(r), id, ""
		}
	}
	dropped := func(r *Result) float64 { return float64(r.Dropped) }
	lag := func(r *Result) float64 { return r.Lag.Seconds() }
	heap := func(r *Result) float64 { return float64(r.PeakHeap) / (1 << 20) }
	anon := func(r *Result) float64 { return float64(r.PeakAnon) / (1 << 20) }
	return []goal{
		{text: "issue 18: fire-and-forget burst, engine-sync >= 0.8x ceiling-subscriber (medians of the rounds, msgs/s held)",
			want: 0.8, measure: burst("engine-sync", false, false)},
		{text: "issue 18: fire-and-forget burst, engine-async >= 0.85x ceiling-subscriber (medians of the rounds)",
			want: 0.85, measure: burst("engine-async", false, false)},
		{text: "issue 18: 1 KiB burst, engine-sync MB/s >= 0.8x ceiling-subscriber's (medians of the rounds)",
			want: 0.8, measure: burst("engine-sync", true, true)},
		{text: fmt.Sprintf("issue 18: paced at %.2fx the ceiling for %.0f s, engine-sync: messages dropped", issue18Paced, issue18Long.Seconds()),
			want: 0, atMost: true, measure: run(issue18PacedID, dropped)},
		{text: "issue 18: paced, engine-sync: last message stored within 1 s of the last publish (s)",
			want: 1, atMost: true, measure: run(issue18PacedID, lag)},
		{text: fmt.Sprintf("issue 18: overload (full speed for %.0f s), engine-sync: peak heap in use under 256 MiB (MiB)", issue18Long.Seconds()),
			want: 256, atMost: true, measure: run(issue18OverloadID, heap)},
		{text: "issue 18: overload, engine-sync: peak anonymous resident memory (heap, stacks, runtime; the store's mapped pages left out) within the default budget, 256 MiB (MiB)",
			want: 256, atMost: true, measure: run(issue18OverloadID, anon)},
		{text: "issue 18: overload, engine-sync: caught up within 1 s once the load stopped (last publish to last stored, s)",
			want: 1, atMost: true, measure: run(issue18OverloadID, lag)},
	}
}

// seriesRatio is the ratio of the median of the series of sc under l to its ceiling series'
// (MB/s when mb, else msgs/s); both must have all their rounds valid.
func seriesRatio(rs []Result, sc string, l Load, mb bool) (float64, string, string) {
	var s, c *RoundSeries
	series := RoundSeriesOf(rs)
	for i := range series {
		x := &series[i]
		if x.Cold || x.Load.Key() != l.Key() {
			continue
		}
		switch x.Scenario {
		case sc:
			s = x
		case "ceiling-subscriber":
			c = x
		}
	}
	runs := fmt.Sprintf("%s %s vs ceiling-subscriber, medians", sc, loadText(l))
	switch {
	case s == nil || c == nil:
		return 0, runs, "not run"
	case !s.Complete() || !c.Complete():
		return 0, runs, "invalid run"
	}
	runs = fmt.Sprintf("%s vs %s, medians of %d rounds", s.ID, c.ID, s.Rounds)
	if mb {
		return s.MBPerSec / c.MBPerSec, runs, ""
	}
	return s.MsgsPerSec / c.MsgsPerSec, runs, ""
}

// runByID finds the run of an ID, or says why there is none.
func runByID(rs []Result, id string) (*Result, string) {
	for i := range rs {
		if r := &rs[i]; r.Run.ID == id {
			if !r.Valid || r.MsgsPerSec <= 0 {
				return nil, "invalid run"
			}
			return r, ""
		}
	}
	return nil, "not run"
}
