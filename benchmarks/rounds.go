package benchmarks

import (
	"fmt"
	"strings"
	"time"
)

// RoundSeries sums up a series of rounds: the runs of one target under one load that a preset
// interleaves with the rounds of other series (Run.Round), so that a slow moment of a shared
// machine falls on one round of each rather than on every round of one. Figures are medians of
// the valid rounds (the extremes: the most and least dropped, the highest peaks).
type RoundSeries struct {
	// ID is the runs' ID without the round; Group, Scenario, Load and Cold are theirs.
	ID, Group, Scenario string
	Load                Load
	Cold                bool
	// Rounds counts the series' runs, Valid the valid ones (the figures are theirs).
	Rounds, Valid int
	// MsgsPerSec and MBPerSec are the medians; Lag the median lag (Result.Lag).
	MsgsPerSec, MBPerSec float64
	Lag                  time.Duration
	// Ceiling is the series of the ceiling of the same load, Ratio MsgsPerSec over its
	// MsgsPerSec (0: none, or it has no valid round).
	Ceiling string
	Ratio   float64
	// DroppedMin, DroppedMax and DroppedPctMax range over the valid rounds; PeakHeap,
	// PeakAnon and TargetRSS are their highest.
	DroppedMin, DroppedMax        int64
	DroppedPctMax                 float64
	PeakHeap, PeakAnon, TargetRSS int64
}

// Complete says whether every round of the series is valid.
func (s *RoundSeries) Complete() bool { return s.Rounds > 0 && s.Valid == s.Rounds }

// RoundSeriesOf sums up the series of rounds among rs, in the order they first appear.
func RoundSeriesOf(rs []Result) []RoundSeries {
	var out []RoundSeries
	at := map[string]int{}
	rates, mbs, lags := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for i := range rs {
		r := &rs[i]
		if r.Run.Round <= 0 {
			continue
		}
		id := r.Run.Series()
		j, ok := at[id]
		if !ok {
			j = len(out)
			at[id] = j
			out = append(out, RoundSeries{ID: id, Group: r.Run.Group, Scenario: r.Run.Scenario,
				Load: r.Run.Load, Cold: r.Run.Target.Cold})
		}
		s := &out[j]
		s.Rounds++
		if !r.Valid || r.MsgsPerSec <= 0 {
			continue
		}
		if s.Valid == 0 || r.Dropped < s.DroppedMin {
			s.DroppedMin = r.Dropped
		}
		s.Valid++
		s.DroppedMax = max(s.DroppedMax, r.Dropped)
		s.DroppedPctMax = max(s.DroppedPctMax, r.DroppedPct())
		s.PeakHeap, s.PeakAnon, s.TargetRSS = max(s.PeakHeap, r.PeakHeap), max(s.PeakAnon, r.PeakAnon), max(s.TargetRSS, r.TargetRSS)
		rates[id] = append(rates[id], r.MsgsPerSec)
		mbs[id] = append(mbs[id], r.MBPerSec)
		lags[id] = append(lags[id], float64(r.Lag))
	}
	for i := range out {
		s := &out[i]
		s.MsgsPerSec, s.MBPerSec = median(rates[s.ID]), median(mbs[s.ID])
		s.Lag = time.Duration(median(lags[s.ID]))
	}
	for i := range out {
		s := &out[i]
		for j := range out {
			c := &out[j]
			if sc := scenarios[c.Scenario]; sc != nil && sc.CeilingFor == s.Load.Ack && !c.Cold &&
				c.Load.Key() == s.Load.Key() && c.MsgsPerSec > 0 && s.MsgsPerSec > 0 {
				s.Ceiling, s.Ratio = c.ID, s.MsgsPerSec/c.MsgsPerSec
				break
			}
		}
	}
	return out
}

// writeRounds writes the medians of the series of a group, if it has any.
func writeRounds(b *strings.Builder, series []RoundSeries, group string) {
	var rows []string
	for i := range series {
		s := &series[i]
		if s.Group != group {
			continue
		}
		ratio := ""
		switch {
		case s.Ceiling == s.ID:
			ratio = "ceiling"
		case s.Ratio > 0:
			ratio = fnum(s.Ratio, 3)
		}
		dropped := ""
		if s.Valid > 0 {
			dropped = count(s.DroppedMin)
			if s.DroppedMax != s.DroppedMin {
				dropped += "-" + count(s.DroppedMax)
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d of %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
			s.ID, loadText(s.Load), s.Valid, s.Rounds, count(int64(s.MsgsPerSec)), fnum(s.MBPerSec, 1), ratio,
			dropped, fnum(s.DroppedPctMax, 2), fnum(s.Lag.Seconds(), 3),
			fnum(float64(s.PeakHeap)/(1<<20), 0), fnum(float64(s.PeakAnon)/(1<<20), 0), fnum(float64(s.TargetRSS)/(1<<20), 0)))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("Medians of the rounds (dropped: the least and the most of a round; peaks: the highest):\n\n")
	b.WriteString("| series | load | valid rounds | msgs/s | MB/s | vs ceiling | dropped | dropped % (max) | lag s | peak heap MiB | peak anon MiB | target RSS MiB |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
}
