package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestIssue18Preset checks that issue18 builds the issue's runs: bursts of 400,000 messages per
// publisher in 3 interleaved rounds (ceiling, sync, async, the engines' cold twins), 1 KiB
// rounds, the paced runs at 0.75x the median of the ceiling's rounds, the sync engine at 0.5x
// and 0.75x the median of its own rounds, and the overload runs, 60 s each; every run with nats.go's default pending limits and drops tolerated; scaled.
func TestIssue18Preset(t *testing.T) {
	runs, err := Preset("issue18", PresetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	byID := map[string]Run{}
	for _, r := range runs {
		ids = append(ids, r.ID)
		byID[r.ID] = r
		if !r.TolerateDrops || r.Target.PendingMsgs != 0 || r.Target.PendingBytes != 0 || r.Load.Ack != FireAndForget {
			t.Errorf("%s: drops tolerated %v, pending limits %d/%d, ack %s", r.ID, r.TolerateDrops,
				r.Target.PendingMsgs, r.Target.PendingBytes, r.Load.Ack)
		}
		if l := r.Load; l.Publishers != 4 || l.Topics != 16 || (l.BodySize != 128 && l.BodySize != 1024) {
			t.Errorf("%s: load %+v", r.ID, l)
		}
		if r.Target.Cold != strings.Contains(r.ID, "/cold") {
			t.Errorf("%s: cold %v", r.ID, r.Target.Cold)
		}
	}
	var want []string
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("ceiling-subscriber/ff#%d", i), fmt.Sprintf("engine-sync/ff#%d", i),
			fmt.Sprintf("engine-async/ff#%d", i), fmt.Sprintf("engine-sync/ff/cold#%d", i), fmt.Sprintf("engine-async/ff/cold#%d", i))
	}
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("ceiling-subscriber/ff/b1KiB#%d", i), fmt.Sprintf("engine-sync/ff/b1KiB#%d", i),
			fmt.Sprintf("engine-sync/ff/b1KiB/cold#%d", i))
	}
	want = append(want, "ceiling-subscriber/ff@75%", issue18PacedID, "engine-sync/ff@50%-of-engine", "engine-sync/ff@75%-of-engine",
		"ceiling-subscriber/ff/overload", issue18OverloadID)
	if !slices.Equal(ids, want) {
		t.Fatalf("runs\n%v\nwant\n%v", ids, want)
	}
	for _, id := range want[:15] {
		if r := byID[id]; r.Load.Messages != 1_600_000 || r.Load.BodySize != 128 || r.Load.Duration != 0 || r.Round == 0 ||
			r.Series()+fmt.Sprintf("#%d", r.Round) != id || r.Group != "ff-burst" {
			t.Errorf("%s: %+v", id, r)
		}
	}
	for _, id := range want[15:24] {
		if r := byID[id]; r.Load.Messages != 512<<10 || r.Load.BodySize != 1024 || r.Round == 0 || r.Group != "ff-1KiB" {
			t.Errorf("%s: %+v", id, r)
		}
	}
	ceilings := []string{"ceiling-subscriber/ff#1", "ceiling-subscriber/ff#2", "ceiling-subscriber/ff#3"}
	for _, id := range want[24:26] {
		if r := byID[id]; r.Load.Duration != time.Minute || r.Load.Messages != 0 || !slices.Equal(r.RateOfMedian, ceilings) ||
			r.RateFraction != 0.75 || r.Round != 0 || r.Group != "ff-paced" || r.Timeout < 4*time.Minute {
			t.Errorf("%s: %+v", id, r)
		}
	}
	engines := []string{"engine-sync/ff#1", "engine-sync/ff#2", "engine-sync/ff#3"}
	for i, id := range want[26:28] {
		if r := byID[id]; r.Load.Duration != time.Minute || r.Load.Messages != 0 || !slices.Equal(r.RateOfMedian, engines) ||
			r.RateFraction != []float64{0.5, 0.75}[i] || r.Round != 0 || r.Group != "ff-own-rate" || r.Timeout < 4*time.Minute {
			t.Errorf("%s: %+v", id, r)
		}
	}
	for _, id := range want[28:] {
		if r := byID[id]; r.Load.Duration != time.Minute || r.Load.Rate != 0 || len(r.rateSources()) != 0 || r.Group != "ff-overload" {
			t.Errorf("%s: %+v", id, r)
		}
	}
	d := EstimateRuns(runs)
	t.Logf("issue18: %d runs, estimated %s", len(runs), d.Round(time.Second))
	if d < 4*time.Minute || d > 15*time.Minute {
		t.Errorf("issue18 is estimated at %s", d)
	}

	scaled, err := Preset("issue18", PresetOptions{Scale: 0.25, Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range scaled {
		if strings.Contains(r.ID, "/cold") || !r.Target.Cold {
			t.Errorf("--cold: %s is a twin, or warm", r.ID)
		}
		if r.Load.Duration != 0 && r.Load.Duration != 15*time.Second || r.Load.Messages != 0 && r.Load.Messages != 400_000 && r.Load.Messages != 128<<10 {
			t.Errorf("scaled: %s: %+v", r.ID, r.Load)
		}
	}
	if len(scaled) != len(runs)-9 {
		t.Errorf("--cold: %d runs, want %d without the twins", len(scaled), len(runs)-9)
	}
}

// TestIssue18Validate checks that drops are tolerated only where they are counted.
func TestIssue18Validate(t *testing.T) {
	ok := Run{ID: "a", Scenario: "engine-sync", TolerateDrops: true,
		Load: Load{Publishers: 1, BodySize: 64, Topics: 1, Messages: 10, Ack: FireAndForget}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	rr := ok
	rr.Load.Ack, rr.Load.Window = RequestReply, 1
	kafka := ok
	kafka.Scenario = "kafka-style"
	round := ok
	round.Round = 2
	both := ok
	both.RateOf, both.RateOfMedian, both.RateFraction = "x", []string{"y"}, 0.5
	for _, r := range []Run{rr, kafka, round, both} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

// TestSourceRate checks where a run takes its rate: one run's, or the median of the valid ones.
func TestSourceRate(t *testing.T) {
	results := []Result{
		{Run: Run{ID: "a"}, Valid: true, MsgsPerSec: 300},
		{Run: Run{ID: "b"}, Valid: true, MsgsPerSec: 100},
		{Run: Run{ID: "c"}, MsgsPerSec: 1e9}, // invalid
		{Run: Run{ID: "d"}, Valid: true, MsgsPerSec: 200},
	}
	byID := map[string]int{"a": 0, "b": 1, "c": 2, "d": 3}
	for _, tc := range []struct {
		srcs []string
		rate float64
		bad  bool
	}{
		{nil, 0, false}, {[]string{"a"}, 300, false}, {[]string{"c"}, 0, true}, {[]string{"a", "b", "d"}, 200, false},
		{[]string{"a", "b", "c"}, 200, false}, {[]string{"c", "c"}, 0, true},
	} {
		rate, why := sourceRate(results, byID, tc.srcs)
		if rate != tc.rate || (why != "") != tc.bad {
			t.Errorf("%v: rate %g (%q), want %g", tc.srcs, rate, why, tc.rate)
		}
	}
}

// TestIssue18Goals checks issue 18's goals and the medians of rounds on made-up results.
func TestIssue18Goals(t *testing.T) {
	base := BaseLoad(PresetOptions{})
	runs, err := Preset("issue18", PresetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string][]float64{ // by series, per round
		"ceiling-subscriber/ff": {1000, 1200, 900}, "engine-sync/ff": {850, 700, 900}, "engine-async/ff": {800, 810, 820},
		"engine-sync/ff/cold": {500, 500, 500}, "engine-async/ff/cold": {400, 400, 400},
		"ceiling-subscriber/ff/b1KiB": {100, 100, 100}, "engine-sync/ff/b1KiB": {90, 90, 10}, "engine-sync/ff/b1KiB/cold": {9, 9, 9},
	}
	var rs []Result
	for _, r := range runs {
		res := Result{Run: r, Valid: true, Sent: 1000, Dropped: int64(r.Round) * 10, PeakHeap: 100 << 20, Lag: 300 * time.Millisecond}
		if r.Round > 0 {
			res.MsgsPerSec = rates[r.Series()][r.Round-1]
		} else {
			res.MsgsPerSec = 500
		}
		res.MBPerSec = res.MsgsPerSec * float64(r.Load.BodySize) / 1e6
		switch r.ID {
		case "engine-sync/ff/b1KiB#3":
			res.Valid = false
		case issue18PacedID:
			res.Dropped = 0
		case issue18OverloadID:
			res.PeakHeap, res.Lag = 300<<20, 2*time.Second
		}
		rs = append(rs, res)
	}
	computeRatios(rs)
	status := map[string]GoalResult{}
	for _, g := range CheckGoals(rs, base) {
		status[g.Goal] = g
	}
	for _, tc := range []struct {
		prefix, status string
		measured       float64
	}{
		{"issue 18: fire-and-forget burst, engine-sync", "met", 0.85},
		{"issue 18: fire-and-forget burst, engine-async", "MISSED", 0.81},
		{"issue 18: 1 KiB burst", "invalid run", 0},
		{"issue 18: paced at 0.75x the ceiling for 60 s", "met", 0},
		{"issue 18: paced, engine-sync: last message", "met", 0.3},
		{"issue 18: overload (full speed for 60 s)", "MISSED", 300},
		{"issue 18: overload, engine-sync: caught up", "MISSED", 2},
		// Runs that tolerate drops are not the earlier issues'.
		{"fire-and-forget, engine-async >= 0.8x", "not run", 0},
	} {
		found := false
		for goal, g := range status {
			if strings.HasPrefix(goal, tc.prefix) {
				found = true
				if g.Status != tc.status || fmt.Sprintf("%.3f", g.Measured) != fmt.Sprintf("%.3f", tc.measured) {
					t.Errorf("%s: %s %.3f, want %s %.3f (%s)", goal, g.Status, g.Measured, tc.status, tc.measured, g.Runs)
				}
			}
		}
		if !found {
			t.Errorf("no goal %q", tc.prefix)
		}
	}

	series := RoundSeriesOf(rs)
	if len(series) != 8 {
		t.Fatalf("%d series: %+v", len(series), series)
	}
	if s := series[0]; s.ID != "ceiling-subscriber/ff" || s.MsgsPerSec != 1000 || s.Ratio != 1 || s.DroppedMin != 10 || s.DroppedMax != 30 {
		t.Errorf("ceiling series %+v", s)
	}
	if s := series[3]; s.ID != "engine-sync/ff/cold" || s.Ceiling != "ceiling-subscriber/ff" || s.Ratio != 0.5 {
		t.Errorf("cold series %+v", s)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, Info{Command: "test", Goals: CheckGoals(rs, base)}, rs); err != nil {
		t.Fatal(err)
	}
	if out := md.String(); !strings.Contains(out, "| engine-sync/ff/b1KiB | ff 1KiB p4 t16 | 2 of 3 | 90 | 0.1 | 0.900 | 10-20 |") ||
		!strings.Contains(out, "| engine-sync/ff | ff 128B p4 t16 | 3 of 3 | 850 | 0.1 | 0.850 | 10-30 | 3.00 | 0.300 | 100 |") {
		t.Errorf("medians missing from the report:\n%s", out)
	}
}

// TestCountedDrops runs tiny fire-and-forget runs with drops: a ceiling that drops a message
// and counts it, which is valid when drops are tolerated (its rate is what it held) and invalid
// otherwise; a ceiling and an engine that lose a message without counting it, invalid either
// way; and engines with tiny pending limits, where nats.go drops what it will: valid, with
// every message sent either held or counted as dropped.
func TestCountedDrops(t *testing.T) {
	tolerant := func(r Run, id string) Run {
		r.ID, r.TolerateDrops = r.ID+"/"+id, true
		return r
	}
	counted := tolerant(tinyRun("ceiling-subscriber", FireAndForget), "counted")
	counted.Fault.TargetDropCounted = 42
	strict := counted
	strict.ID, strict.TolerateDrops = strict.ID+"/strict", false
	uncounted := tolerant(tinyRun("ceiling-subscriber", FireAndForget), "uncounted")
	uncounted.Fault.TargetDrop, uncounted.Stall = 42, 300*time.Millisecond
	skipped := tolerant(tinyRun("engine-sync", FireAndForget), "skipped")
	skipped.Fault.PublisherSkip, skipped.Stall = 17, 300*time.Millisecond
	runs := []Run{counted, strict, uncounted, skipped}
	for _, sc := range []string{"engine-sync", "engine-async"} {
		r := tolerant(tinyRun(sc, FireAndForget), "pending16")
		r.Load.Messages = 3000
		r.Target.PendingMsgs, r.Target.PendingBytes = 16, 16<<10
		runs = append(runs, r)
	}
	results, err := testRunner(t).Run(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if !r.Valid || r.Sent != 301 || r.Found != 300 || r.Dropped != 1 {
		t.Errorf("%s: valid %v, sent %d, found %d, dropped %d: %v", r.Run.ID, r.Valid, r.Sent, r.Found, r.Dropped, r.Problems)
	} else if held := r.MsgsPerSec * r.Elapsed.Seconds(); held < 299.9 || held > 300.1 || r.PeakHeap <= 0 || r.Lag == 0 {
		t.Errorf("%s: rate over %.1f messages, peak heap %d, lag %s", r.Run.ID, held, r.PeakHeap, r.Lag)
	}
	for i, want := range map[int]string{1: "nats.go dropped 1 messages", 2: "received: 1 of 301 messages missing",
		3: "1 lost without being counted as dropped"} {
		if r := results[i]; r.Valid || !strings.Contains(strings.Join(r.Problems, "; "), want) {
			t.Errorf("%s: valid %v, problems %v, want %q", r.Run.ID, r.Valid, r.Problems, want)
		}
	}
	for _, r := range results[4:] {
		if !r.Valid || r.Found+r.Dropped != r.Sent || r.Sent != 3000 || r.Engine == nil || r.Engine.Dropped != r.Dropped {
			t.Errorf("%s: valid %v, sent %d, found %d, dropped %d: %v", r.Run.ID, r.Valid, r.Sent, r.Found, r.Dropped, r.Problems)
		}
		t.Logf("%s: %d of %d dropped, lag %s, peak heap %d MiB", r.Run.ID, r.Dropped, r.Sent, r.Lag, r.PeakHeap>>20)
	}
}
