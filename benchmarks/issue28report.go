package benchmarks

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The issue28 preset's Markdown report: each part's figures with their ratios to the peer or
// ceiling of the same invocation, and the issue's goals, met or MISSED.

func writeIssue28(w io.Writer, r *Issue28Report) {
	fmt.Fprintf(w, "# Consumer groups (issue 28)\n\n`%s`, started %s, took %s on %s. Load averages (1, 5, 15 min): %s.\n\n",
		r.Command, r.Started.Format(time.RFC3339), r.Took.Round(time.Second), r.Host, strings.Join(r.Load, "; "))
	if r.Throughput != nil {
		writeThroughput(w, r.Throughput)
	}
	if r.Churn != nil {
		writeChurn(w, r.Churn)
	}
	if r.Tail != nil {
		writeTail(w, r.Tail)
	}
	if r.Idle != nil {
		writeIdle(w, r.Idle)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "- PROBLEM: %s\n", p)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// quantile is the nearest-rank quantile q (0-1) of xs (p99 of 20 samples is the largest).
func quantile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(min(i, len(s)-1), 0)]
}

func medianOf(xs []float64) float64 { return median(slices.Clone(xs)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func writeThroughput(w io.Writer, t *ThroughputReport) {
	fmt.Fprintf(w, "## Throughput: a topic of %s messages (%d B bodies, 4 queues) read whole\n\n", count(t.Messages), t.Body)
	fmt.Fprintf(w, "Fills: %s.\n\n", strings.Join(t.Fill, "; "))
	rounds := 0
	for _, r := range t.Runs {
		rounds = max(rounds, r.Round)
	}
	for _, cache := range []string{"warm", "cold"} {
		// by reader, by round
		byReader := map[string]map[int]ThroughputRun{}
		for _, r := range t.Runs {
			if r.Cache == cache || (cache == "cold" && strings.HasPrefix(r.Reader, "ceiling")) {
				if byReader[r.Reader] == nil {
					byReader[r.Reader] = map[int]ThroughputRun{}
				}
				byReader[r.Reader][r.Round] = r
			}
		}
		if len(byReader) == 0 {
			continue
		}
		title := "from the page cache"
		if cache == "cold" {
			title = "after the page cache was dropped (the ceilings, storage-free, are the warm runs')"
		}
		fmt.Fprintf(w, "### %s\n\n| reader | procs |", title)
		for k := 1; k <= rounds; k++ {
			fmt.Fprintf(w, " round %d msgs/s |", k)
		}
		fmt.Fprintf(w, " median | vs jetstream-1 (per round) | vs ceiling-read (per round) | server CPU µs/msg | readers CPU µs/msg |\n|---|---|")
		for k := 0; k < rounds+5; k++ {
			fmt.Fprint(w, "---|")
		}
		fmt.Fprintln(w)
		for _, name := range tpReaders {
			runs := byReader[name]
			if runs == nil {
				continue
			}
			var rates, srv, rd []float64
			var vsJS, vsCeil []string
			procs := 0
			for _, r := range runs {
				procs = max(procs, r.Procs)
			}
			fmt.Fprintf(w, "| %s | %d |", name, procs)
			for k := 1; k <= rounds; k++ {
				r, ok := runs[k]
				if !ok || !r.Valid {
					fmt.Fprint(w, " invalid |")
					continue
				}
				fmt.Fprintf(w, " %s |", count(int64(r.MsgsPerSec)))
				rates = append(rates, r.MsgsPerSec)
				srv = append(srv, float64(r.ServerCPU.Microseconds())/float64(r.Messages))
				rd = append(rd, float64(r.ReadersCPU.Microseconds())/float64(r.Messages))
				if js, ok := byReader[tpJetStream][k]; ok && js.Valid && js.MsgsPerSec > 0 {
					vsJS = append(vsJS, fmt.Sprintf("%.2f", r.MsgsPerSec/js.MsgsPerSec))
				}
				if c, ok := byReader[tpCeilingRead][k]; ok && c.Valid && c.MsgsPerSec > 0 {
					vsCeil = append(vsCeil, fmt.Sprintf("%.2f", r.MsgsPerSec/c.MsgsPerSec))
				}
			}
			fmt.Fprintf(w, " %s | %s | %s | %.2f | %.2f |\n", count(int64(medianOf(rates))), strings.Join(vsJS, ", "),
				strings.Join(vsCeil, ", "), medianOf(srv), medianOf(rd))
		}
		fmt.Fprintln(w)
		// The goal: the group at least 5x JetStream's pull consumer, round by round.
		var ratios []float64
		for k := 1; k <= rounds; k++ {
			g, ok1 := byReader[tpGroup][k]
			js, ok2 := byReader[tpJetStream][k]
			if ok1 && ok2 && g.Valid && js.Valid && js.MsgsPerSec > 0 {
				ratios = append(ratios, g.MsgsPerSec/js.MsgsPerSec)
			}
		}
		if len(ratios) > 0 {
			fmt.Fprintf(w, "Goal, %s: group-4 >= 5x jetstream-1: median of the rounds' ratios %.2f (least %.2f): **%s**.\n\n",
				cache, medianOf(ratios), slices.Min(ratios), verdict(medianOf(ratios) >= 5))
		}
	}
	for _, r := range t.Runs {
		if !r.Valid {
			fmt.Fprintf(w, "- round %d %s %s invalid: %s\n", r.Round, r.Cache, r.Reader, r.Problem)
		}
	}
	fmt.Fprintln(w)
}

func writeChurn(w io.Writer, c *ChurnReport) {
	fmt.Fprintf(w, "## Rebalance and duplicates: 4 members under %s msgs/s\n\n", count(int64(c.Rate)))
	row := func(name string, evs []ChurnEvent) []time.Duration {
		var ds []time.Duration
		bad := 0
		for _, e := range evs {
			if e.Problem != "" {
				bad++
				continue
			}
			ds = append(ds, e.Took)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d |\n", name, len(ds), ms(quantile(ds, 0.5)), ms(quantile(ds, 0.99)), ms(quantile(ds, 1)), bad)
		return ds
	}
	fmt.Fprintln(w, "| event | measured | p50 | p99 | max | failed |\n|---|---|---|---|---|---|")
	leaves := row("clean leave: Close begins -> its queues' first message handed out by another member", c.Leaves)
	row("join (after a leave): join begins -> its first message of each queue it gets", c.Joins)
	kills := row("kill -9 -> its queues' first message handed out by another member", c.Kills)
	row("join (after a kill)", c.KillJoins)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Published %s; (queue, offset)s handled %s; missing (never handled) %d.\n\n", count(c.Published), count(c.Handled), c.Missing)
	fmt.Fprintf(w, "| kill | member | queues | took | its window (handled past its last commit) | handled again by others | engine's redelivered count |\n|---|---|---|---|---|---|---|\n")
	for i, e := range c.Kills {
		fmt.Fprintf(w, "| %d | %s | %v | %s | %d | %d | %d |\n", i+1, e.Member, e.Queues, ms(e.Took), e.Window, e.Dups, e.Redelivered)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- Goal: clean leave to its queues read by the others <= 1 s (p99 of %d): %s, **%s**.\n", len(leaves),
		ms(quantile(leaves, 0.99)), verdict(len(leaves) > 0 && len(leaves) == len(c.Leaves) && quantile(leaves, 0.99) <= time.Second))
	fmt.Fprintf(w, "- Goal: kill -9 to its queues read <= session timeout (%s) + 1 s (p99 of %d): %s, **%s**.\n", c.Session, len(kills),
		ms(quantile(kills, 0.99)), verdict(len(kills) > 0 && len(kills) == len(c.Kills) && quantile(kills, 0.99) <= c.Session+time.Second))
	fmt.Fprintf(w, "- Goal: 0 duplicates over the clean leaves and joins: %d (the engine counted %d redelivered), **%s**.\n",
		c.DupClean, c.RedeliveredClean, verdict(c.DupClean == 0 && c.RedeliveredClean == 0))
	fmt.Fprintf(w, "- Goal: after each kill, duplicates only within the killed member's uncommitted window: %d within, %d outside, **%s**; "+
		"counted by the engine: %d redelivered, by the outside count: %d handled twice (the engine also counts what the killed member had read ahead and not handed out).\n",
		c.DupKill, c.DupOutside, verdict(c.DupOutside == 0 && c.Missing == 0), c.Redelivered, c.DupKill)
	fmt.Fprintf(w, "- At least once: %d offsets below the queues' ends never handled, **%s**.\n\n", c.Missing, verdict(c.Missing == 0))
	for _, p := range c.Problems {
		fmt.Fprintf(w, "- PROBLEM: %s\n", p)
	}
}

func writeTail(w io.Writer, t *TailReport) {
	fmt.Fprintf(w, "## Tailing: publish to handout at %s msgs/s, %s\n\n", count(int64(t.Rate)), t.Duration)
	fmt.Fprintln(w, "| flush | messages timed | member p50 | p99 | p99.9 | max | subscriber p50 | p99 | p99.9 | max | member p99 - subscriber p99 |\n|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.Runs {
		if r.Problem != "" && r.Member.Count == 0 {
			fmt.Fprintf(w, "| %s | invalid: %s |\n", r.Flush, r.Problem)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Flush, count(r.Member.Count),
			ms(r.Member.P50), ms(r.Member.P99), ms(r.Member.P999), ms(r.Member.Max),
			ms(r.Subscriber.P50), ms(r.Subscriber.P99), ms(r.Subscriber.P999), ms(r.Subscriber.Max), ms(r.P99Diff))
	}
	fmt.Fprintln(w)
	for _, r := range t.Runs {
		if r.Flush == "async" && r.Member.Count > 0 {
			fmt.Fprintf(w, "Goal: member p99 within 2 ms of the subscriber's (async flush): %s, **%s**.\n\n", ms(r.P99Diff),
				verdict(r.P99Diff <= 2*time.Millisecond && r.Problem == ""))
		}
		if r.Problem != "" {
			fmt.Fprintf(w, "- %s: %s\n", r.Flush, r.Problem)
		}
	}
}

func writeIdle(w io.Writer, t *IdleReport) {
	fmt.Fprintf(w, "## %s idle groups of one member each, over %s\n\n", count(int64(t.Groups)), t.Window)
	fmt.Fprintln(w, "| members | engine CPU, % of a core | engine RSS MiB | heap in use MiB | heap after a GC MiB | members' process CPU % | requests/s | errors | joins took |\n|---|---|---|---|---|---|---|---|---|")
	var none *IdleRun
	for i, r := range t.Runs {
		if r.Kind == "none" {
			none = &t.Runs[i]
		}
		reqs := "-"
		if r.Requests > 0 {
			reqs = count(int64(float64(r.Requests) / t.Window.Seconds()))
		}
		fmt.Fprintf(w, "| %s | %.1f | %d | %d | %d | %.1f | %s | %d | %s |\n", r.Kind, 100*r.EngineCPU, r.RSS>>20, r.Heap>>20,
			r.HeapAfterGC>>20, 100*r.MembersCPU, reqs, r.Errors, r.JoinTook.Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	if none != nil {
		for _, r := range t.Runs {
			if r.Kind == "none" || r.Joined == 0 {
				continue
			}
			fmt.Fprintf(w, "- %s: per group, %.2f µs of engine CPU a second and %.1f KiB of heap after a GC (%.1f KiB of RSS) more than none.\n",
				r.Kind, (r.EngineCPU-none.EngineCPU)*1e6/float64(r.Joined), float64(r.HeapAfterGC-none.HeapAfterGC)/1024/float64(r.Joined),
				float64(r.RSS-none.RSS)/1024/float64(r.Joined))
		}
		fmt.Fprintln(w)
	}
	for _, r := range t.Runs {
		if r.Problem != "" {
			fmt.Fprintf(w, "- %s: %s\n", r.Kind, r.Problem)
		}
	}
}
