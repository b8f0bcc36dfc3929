package benchmarks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// GoalResult is one of the issue's goals checked against the runs of an invocation.
type GoalResult struct {
	// Goal says what is wanted, Runs which runs the figure comes from.
	Goal string
	Runs string
	// Measured is the figure (a ratio, or for AtMost goals a difference), Want the least it must
	// be (the most, when AtMost).
	Measured, Want float64
	AtMost         bool
	// Status is "met", "MISSED", or why there is no figure ("not run", "invalid run").
	Status string
}

// goal is how one goal is measured: the run of a scenario under a load, a figure from it (and,
// for some, from a second run), and the least the figure must be (the most, when atMost).
type goal struct {
	text   string
	want   float64
	atMost bool
	runs   func(base Load) (a, b runKey)
	// figure is the goal's figure; 0 for a ratio, or NaN, means there is none (no reference).
	figure func(a, b *Result) float64
	// measure, when set instead of runs and figure, finds the goal's runs itself (issue 18's:
	// medians of rounds, runs by ID) and returns the figure, what it comes from, and why there
	// is none ("" when there is).
	measure func(rs []Result, base Load) (figure float64, runs, why string)
}

// runKey names a run by scenario and load (b of a goal is unused when its scenario is ""), and,
// when fraction is set, the run limited to that fraction of the rate of the run of the same
// load without a limit (Run.RateFraction: the presets' half-load runs), whose rate the key
// cannot know in advance.
type runKey struct {
	scenario string
	load     Load
	fraction float64
}

func (k runKey) String() string {
	s := k.scenario + " " + loadText(k.load)
	if k.fraction > 0 {
		s += fmt.Sprintf(" @%.0f%%", 100*k.fraction)
	}
	return s
}

// matches says whether r is a run of k. A run that tolerates drops is none: those goals are
// about runs that store every message (issue 18's are checked by issue18Goals).
func (k runKey) matches(r *Result) bool {
	l := r.Run.Load
	if r.Run.TolerateDrops {
		return false
	}
	if k.fraction > 0 {
		if r.Run.RateFraction != k.fraction || len(r.Run.rateSources()) == 0 {
			return false
		}
		l.Rate = 0 // resolved from the earlier run's rate
	}
	return r.Run.Scenario == k.scenario && l.Key() == k.load.Key()
}

// withAck is base with ack mode a (window 4096 for request/reply and batched acks).
func withAck(base Load, a AckMode) Load {
	base.Ack, base.Window = a, 0
	if a.windowed() {
		base.Window = 4096
	}
	return base
}

// goals are the issue's goals, around the base load (128 B bodies unless said otherwise).
func goals() []goal {
	ratio := func(a, _ *Result) float64 { return a.Ratio }
	jsSync := func(a, _ *Result) float64 { return a.RatioJSSync }
	rate := func(a, b *Result) float64 { return a.MsgsPerSec / b.MsgsPerSec }
	bandwidth := func(a, b *Result) float64 { return a.MBPerSec / b.MBPerSec }
	sized := func(base Load, a AckMode, body int) Load { l := withAck(base, a); l.BodySize = body; return l }
	topics := func(base Load, a AckMode, t int) Load { l := withAck(base, a); l.Topics = t; return l }
	disk := runKey{"disk-ceiling", diskLoad(0), 0}
	gs := []goal{
		{text: "fire-and-forget, engine-async >= 0.8x ceiling-subscriber", want: 0.8,
			runs: func(b Load) (runKey, runKey) { return runKey{"engine-async", withAck(b, FireAndForget), 0}, runKey{} }, figure: ratio},
		{text: "request/reply 4096 in flight, engine-async >= 0.9x ceiling-responder", want: 0.9,
			runs: func(b Load) (runKey, runKey) { return runKey{"engine-async", withAck(b, RequestReply), 0}, runKey{} }, figure: ratio},
		{text: "request/reply 4096 in flight, engine-sync >= 0.85x ceiling-responder", want: 0.85,
			runs: func(b Load) (runKey, runKey) { return runKey{"engine-sync", withAck(b, RequestReply), 0}, runKey{} }, figure: ratio},
	}
	for _, a := range []AckMode{RequestReply, FireAndForget} {
		gs = append(gs, goal{text: fmt.Sprintf("%s, engine-sync >= 50x jetstream-syncalways", ackText(a)), want: 50,
			runs: func(b Load) (runKey, runKey) { return runKey{"engine-sync", withAck(b, a), 0}, runKey{} }, figure: jsSync})
	}
	for _, a := range []AckMode{RequestReply, FireAndForget} {
		gs = append(gs, goal{text: fmt.Sprintf("1 KiB %s, engine-sync MB/s >= 0.8x the disk's write+fdatasync MB/s (1 MiB batches)", ackText(a)), want: 0.8,
			runs: func(b Load) (runKey, runKey) { return runKey{"engine-sync", sized(b, a, 1024), 0}, disk }, figure: bandwidth})
	}
	for _, sc := range []string{"engine-async", "engine-sync"} {
		for _, a := range []AckMode{FireAndForget, RequestReply} {
			gs = append(gs, goal{text: fmt.Sprintf("%s, %s msgs/s at 10,000 topics >= 0.9x at 1 topic", ackText(a), sc), want: 0.9,
				runs: func(b Load) (runKey, runKey) {
					return runKey{sc, topics(b, a, 10_000), 0}, runKey{sc, topics(b, a, 1), 0}
				}, figure: rate})
		}
	}
	return append(append(gs, batchedGoals()...), issue18Goals()...)
}

// batchedGoals are issue 8's goals for batched acks, in sync mode at the base load: the rate
// against JetStream's async-acked publishing (request/reply, same window, default sync) and
// against the fire-and-forget ceiling (see referenceLoad), and the ack latency at half load
// against the sync engine's request/reply latency at half load ("sync latency": what an ack
// costs when each message gets its own reply after the group commit). The half-load runs are
// each at half its own peak (the presets' halfRate), so the batched one, with the higher peak,
// is the more loaded one.
func batchedGoals() []goal {
	batched := func(b Load) (runKey, runKey) { return runKey{"engine-sync", withAck(b, Batched), 0}, runKey{} }
	p99 := func(a, b *Result) float64 {
		if a.Latency.Count == 0 || b.Latency.Count == 0 {
			return math.NaN()
		}
		return float64(a.Latency.P99-b.Latency.P99) / float64(time.Millisecond)
	}
	return []goal{
		{text: "batched acks 4096 in flight, engine-sync >= 3x jetstream-default request/reply 4096 in flight (async-acked)", want: 3,
			runs: batched, figure: func(a, _ *Result) float64 { return a.RatioJS }},
		{text: "batched acks 4096 in flight, engine-sync >= 0.6x ceiling-subscriber (fire-and-forget)", want: 0.6,
			runs: batched, figure: func(a, _ *Result) float64 { return a.Ratio }},
		{text: "batched acks at half load, engine-sync ack p99 <= request/reply engine-sync p99 at half load + 2 ms (ms over it)",
			want: 2, atMost: true,
			runs: func(b Load) (runKey, runKey) {
				return runKey{"engine-sync", withAck(b, Batched), 0.5}, runKey{"engine-sync", withAck(b, RequestReply), 0.5}
			}, figure: p99},
	}
}

func ackText(a AckMode) string {
	if a == RequestReply {
		return "request/reply 4096 in flight"
	}
	return "fire-and-forget"
}

// CheckGoals checks the issue's goals against the results, around the base load (its ack mode
// and window are set per goal): each goal reads the valid runs it needs, or says why it cannot.
func CheckGoals(rs []Result, base Load) []GoalResult {
	var out []GoalResult
	for _, g := range goals() {
		gr := GoalResult{Goal: g.text, Want: g.want, AtMost: g.atMost}
		var why string
		if g.measure != nil {
			gr.Measured, gr.Runs, why = g.measure(rs, base)
		} else {
			ka, kb := g.runs(base)
			gr.Runs = ka.String()
			var a, b *Result
			a, why = findRun(rs, ka)
			if why == "" && kb.scenario != "" {
				gr.Runs += " vs " + kb.String()
				b, why = findRun(rs, kb)
			}
			if why == "" {
				gr.Measured = g.figure(a, b)
			}
		}
		if why == "" && (math.IsNaN(gr.Measured) || (gr.Measured == 0 && !g.atMost)) {
			why, gr.Measured = "no reference run", 0
		}
		switch {
		case why != "":
			gr.Status = why
		case g.atMost && gr.Measured <= g.want, !g.atMost && gr.Measured >= g.want:
			gr.Status = "met"
		default:
			gr.Status = "MISSED"
		}
		out = append(out, gr)
	}
	return out
}

// findRun finds the last valid run of k, or says why there is none.
func findRun(rs []Result, k runKey) (*Result, string) {
	why := "not run"
	for i := len(rs) - 1; i >= 0; i-- {
		r := &rs[i]
		if !k.matches(r) {
			continue
		}
		if r.Valid && r.MsgsPerSec > 0 {
			return r, ""
		}
		why = "invalid run"
	}
	return nil, why
}

// writeGoals writes the goals' table.
func writeGoals(b *strings.Builder, gs []GoalResult) {
	if len(gs) == 0 {
		return
	}
	b.WriteString("#### Goals\n\n| goal | runs | measured | wanted | |\n| --- | --- | --- | --- | --- |\n")
	for _, g := range gs {
		m, want := "", fnum(g.Want, 2)
		if g.Want == 0 {
			want = "0"
		}
		if g.Status == "met" || g.Status == "MISSED" {
			m = strconv.FormatFloat(g.Measured, 'f', 3, 64)
		}
		if g.AtMost {
			want = "<= " + want
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", g.Goal, g.Runs, m, want, g.Status)
	}
	b.WriteString("\n")
}
