package benchmarks

import (
	"fmt"
	"strings"
)

// GoalResult is one of the goals checked against the runs of an invocation.
type GoalResult struct {
	// Goal says what is wanted, Runs which runs the figure comes from.
	Goal string
	Runs string
	// Measured is the figure (a ratio), Want the least it must be.
	Measured, Want float64
	// Status is "met", "MISSED", or why there is no figure ("not run", "invalid run").
	Status string
}

// goal is how one goal is measured: the run of a scenario under a load, a figure from it (and,
// for some, from a second run), and the least the figure must be.
type goal struct {
	text  string
	want  float64
	runs  func(base Load) (a, b runKey)
	ratio func(a, b *Result) float64
}

// runKey names a run by scenario and load (b of a goal is unused when its scenario is "").
type runKey struct {
	scenario string
	load     Load
}

func (k runKey) String() string { return k.scenario + " " + loadText(k.load) }

// withAck is base with ack mode a (window 4096 for request/reply).
func withAck(base Load, a AckMode) Load {
	base.Ack, base.Window = a, 0
	if a == RequestReply {
		base.Window = 4096
	}
	return base
}

// goals are the goals, around the base load (128 B bodies unless said otherwise).
func goals() []goal {
	ratio := func(a, _ *Result) float64 { return a.Ratio }
	jsSync := func(a, _ *Result) float64 { return a.RatioJSSync }
	rate := func(a, b *Result) float64 { return a.MsgsPerSec / b.MsgsPerSec }
	bandwidth := func(a, b *Result) float64 { return a.MBPerSec / b.MBPerSec }
	sized := func(base Load, a AckMode, body int) Load { l := withAck(base, a); l.BodySize = body; return l }
	topics := func(base Load, a AckMode, t int) Load { l := withAck(base, a); l.Topics = t; return l }
	disk := runKey{"disk-ceiling", diskLoad(0)}
	gs := []goal{
		{"fire-and-forget, engine-async >= 0.8x ceiling-subscriber", 0.8,
			func(b Load) (runKey, runKey) { return runKey{"engine-async", withAck(b, FireAndForget)}, runKey{} }, ratio},
		{"request/reply 4096 in flight, engine-async >= 0.9x ceiling-responder", 0.9,
			func(b Load) (runKey, runKey) { return runKey{"engine-async", withAck(b, RequestReply)}, runKey{} }, ratio},
		{"request/reply 4096 in flight, engine-sync >= 0.85x ceiling-responder", 0.85,
			func(b Load) (runKey, runKey) { return runKey{"engine-sync", withAck(b, RequestReply)}, runKey{} }, ratio},
	}
	for _, a := range []AckMode{RequestReply, FireAndForget} {
		gs = append(gs, goal{fmt.Sprintf("%s, engine-sync >= 50x jetstream-syncalways", ackText(a)), 50,
			func(b Load) (runKey, runKey) { return runKey{"engine-sync", withAck(b, a)}, runKey{} }, jsSync})
	}
	for _, a := range []AckMode{RequestReply, FireAndForget} {
		gs = append(gs, goal{fmt.Sprintf("1 KiB %s, engine-sync MB/s >= 0.8x the disk's write+fdatasync MB/s (1 MiB batches)", ackText(a)), 0.8,
			func(b Load) (runKey, runKey) { return runKey{"engine-sync", sized(b, a, 1024)}, disk }, bandwidth})
	}
	for _, sc := range []string{"engine-async", "engine-sync"} {
		for _, a := range []AckMode{FireAndForget, RequestReply} {
			gs = append(gs, goal{fmt.Sprintf("%s, %s msgs/s at 10,000 topics >= 0.9x at 1 topic", ackText(a), sc), 0.9,
				func(b Load) (runKey, runKey) {
					return runKey{sc, topics(b, a, 10_000)}, runKey{sc, topics(b, a, 1)}
				}, rate})
		}
	}
	return gs
}

func ackText(a AckMode) string {
	if a == RequestReply {
		return "request/reply 4096 in flight"
	}
	return "fire-and-forget"
}

// CheckGoals checks the goals against the results, around the base load (its ack mode
// and window are set per goal): each goal reads the valid runs it needs, or says why it cannot.
func CheckGoals(rs []Result, base Load) []GoalResult {
	var out []GoalResult
	for _, g := range goals() {
		ka, kb := g.runs(base)
		gr := GoalResult{Goal: g.text, Want: g.want, Runs: ka.String()}
		a, why := findRun(rs, ka)
		var b *Result
		if why == "" && kb.scenario != "" {
			gr.Runs += " vs " + kb.String()
			b, why = findRun(rs, kb)
		}
		if why == "" {
			gr.Measured = g.ratio(a, b)
			if gr.Measured == 0 {
				why = "no reference run"
			}
		}
		switch {
		case why != "":
			gr.Status = why
		case gr.Measured >= g.want:
			gr.Status = "met"
		default:
			gr.Status = "MISSED"
		}
		out = append(out, gr)
	}
	return out
}

// findRun finds the last valid run of k (not rate-limited), or says why there is none.
func findRun(rs []Result, k runKey) (*Result, string) {
	why := "not run"
	for i := len(rs) - 1; i >= 0; i-- {
		r := &rs[i]
		if r.Run.Scenario != k.scenario || r.Run.Load.Key() != k.load.Key() {
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
		m := ""
		if g.Measured > 0 {
			m = fnum(g.Measured, 3)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", g.Goal, g.Runs, m, fnum(g.Want, 2), g.Status)
	}
	b.WriteString("\n")
}
