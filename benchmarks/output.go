package benchmarks

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Info describes an invocation, for the heading of a report.
type Info struct {
	Command   string
	Started   time.Time
	Took      time.Duration
	Host      string // CPUs, GOMAXPROCS, OS/arch, Go version
	WorkDir   string
	Preset    string
	Invalid   int
	TotalRuns int
	// Goals are the goals checked against the runs (see CheckGoals); Charts are the
	// charts written beside the report, as paths relative to it.
	Goals  []GoalResult
	Charts []string
}

// column is one column of the outputs: its CSV name ("" keeps it out of the CSV), its Markdown
// heading ("" keeps it out of the Markdown table, which is meant to be read) and how to format a
// result's value. New figures are new columns; the writers do not change.
type column struct {
	csv, md string
	val     func(r *Result) string
}

var columns = []column{
	{"run", "run", func(r *Result) string { return r.Run.ID }},
	{"group", "", func(r *Result) string { return r.Run.Group }},
	{"scenario", "target", func(r *Result) string { return r.Run.Scenario }},
	{"ack", "", func(r *Result) string { return string(r.Run.Load.Ack) }},
	{"window", "", func(r *Result) string { return itoa(int64(r.Run.Load.Window)) }},
	{"publishers", "", func(r *Result) string { return itoa(int64(r.Run.Load.Publishers)) }},
	{"topics", "", func(r *Result) string { return itoa(int64(r.Run.Load.Topics)) }},
	{"body_bytes", "", func(r *Result) string { return itoa(int64(r.Run.Load.BodySize)) }},
	{"", "load", func(r *Result) string {
		if sc := scenarios[r.Run.Scenario]; sc != nil && sc.SelfLoaded {
			return sizeText(r.Run.Load.BodySize) + " write+fdatasync"
		}
		return loadText(r.Run.Load)
	}},
	{"rate_limit", "", func(r *Result) string { return fnum(r.Run.Load.Rate, 0) }},
	{"sent", "", func(r *Result) string { return itoa(r.Sent) }},
	{"found", "", func(r *Result) string { return itoa(r.Found) }},
	{"acked", "", func(r *Result) string { return itoa(r.Acked) }},
	{"ack_messages", "", func(r *Result) string { return itoa(r.AckMessages) }},
	{"resent", "", func(r *Result) string { return itoa(r.Resent) }},
	{"elapsed_s", "", func(r *Result) string { return fnum(r.Elapsed.Seconds(), 3) }},
	{"msgs_per_s", "msgs/s", func(r *Result) string { return fnum(r.MsgsPerSec, 0) }},
	{"mb_per_s", "MB/s", func(r *Result) string { return fnum(r.MBPerSec, 1) }},
	{"ratio", "", func(r *Result) string { return fnum(r.Ratio, 3) }},
	{"", "vs ceiling", func(r *Result) string { return ratioText(r, r.Ceiling, r.Ratio, "ceiling") }},
	{"ceiling_run", "", func(r *Result) string { return r.Ceiling }},
	{"ratio_js", "", func(r *Result) string { return fnum(r.RatioJS, 3) }},
	{"", "vs JS", func(r *Result) string { return ratioText(r, r.JetStream, r.RatioJS, "JS") }},
	{"jetstream_run", "", func(r *Result) string { return r.JetStream }},
	{"ratio_js_sync", "", func(r *Result) string { return fnum(r.RatioJSSync, 3) }},
	{"", "vs JS sync", func(r *Result) string { return ratioText(r, r.JetStreamSync, r.RatioJSSync, "JS sync") }},
	{"jetstream_sync_run", "", func(r *Result) string { return r.JetStreamSync }},
	{"publish_msgs_per_s", "", func(r *Result) string { return fnum(r.PublishPerSec, 0) }},
	{"p50_us", "ack p50 µs", latencyText(func(l Latency) time.Duration { return l.P50 })},
	{"p99_us", "ack p99 µs", latencyText(func(l Latency) time.Duration { return l.P99 })},
	{"p999_us", "ack p99.9 µs", latencyText(func(l Latency) time.Duration { return l.P999 })},
	{"max_us", "", latencyText(func(l Latency) time.Duration { return l.Max })},
	{"window_waits", "", func(r *Result) string { return itoa(r.WindowWaits) }},
	{"syncs", "", func(r *Result) string { return itoa(r.Syncs) }},
	{"records", "", func(r *Result) string { return engineInt(r, func(e *EngineReport) int64 { return e.Records }) }},
	{"preloaded", "", func(r *Result) string { return itoa(r.Preloaded) }},
	{"syncs_per_msg", "syncs/msg", func(r *Result) string {
		if v := r.SyncsPerMsg(); v >= 0 {
			return strconv.FormatFloat(v, 'g', 3, 64)
		}
		return ""
	}},
	{"target_cpu_s", "target CPU s", func(r *Result) string { return fnum(r.TargetCPU.Seconds(), 2) }},
	{"target_cpu_us_per_msg", "CPU µs/msg", func(r *Result) string {
		return fnum(float64(r.TargetCPUPerMsg())/float64(time.Microsecond), 2)
	}},
	{"publisher_cpu_s", "pub CPU s", func(r *Result) string { return fnum(r.PublisherCPU.Seconds(), 2) }},
	{"target_rss_mib", "target RSS MiB", func(r *Result) string { return fnum(float64(r.TargetRSS)/(1<<20), 0) }},
	{"target_heap_mib", "peak heap MiB", func(r *Result) string { return fnum(float64(r.PeakHeap)/(1<<20), 0) }},
	{"target_anon_mib", "peak anon MiB", func(r *Result) string { return fnum(float64(r.PeakAnon)/(1<<20), 0) }},
	{"dropped", "dropped", func(r *Result) string { return ffInt(r, r.Dropped) }},
	{"dropped_pct", "dropped %", func(r *Result) string {
		if r.Run.Load.Ack != FireAndForget || r.Dropped == 0 {
			return ""
		}
		return strconv.FormatFloat(r.DroppedPct(), 'f', 2, 64)
	}},
	{"lag_s", "lag s", func(r *Result) string {
		if r.Run.Load.Ack != FireAndForget || r.Lag == 0 {
			return ""
		}
		return strconv.FormatFloat(r.Lag.Seconds(), 'f', 3, 64)
	}},
	{"publisher_rss_mib", "", func(r *Result) string { return fnum(float64(r.PublisherRSS)/(1<<20), 0) }},
	{"valid", "valid", func(r *Result) string {
		if r.Valid {
			return "yes"
		}
		return "NO"
	}},
	{"problems", "", func(r *Result) string { return strings.Join(r.Problems, "; ") }},
	{"started", "", func(r *Result) string { return r.Started.UTC().Format(time.RFC3339) }},
	{"took_s", "", func(r *Result) string { return fnum(r.Took.Seconds(), 1) }},
	{"cpu_profile", "", func(r *Result) string { return r.Profile }},
	{"latency_hdr", "", func(r *Result) string { return r.Latency.Encoded }},
}

// markdownIdentity are the Markdown columns shown for an invalid run (the CSV keeps every
// column, for diagnosis).
var markdownIdentity = map[string]bool{"run": true, "target": true, "load": true, "valid": true}

// WriteCSV writes one header line and one line per result, every column included.
func WriteCSV(w io.Writer, rs []Result) error {
	cw := csv.NewWriter(w)
	var row []string
	for _, c := range columns {
		if c.csv != "" {
			row = append(row, c.csv)
		}
	}
	if err := cw.Write(row); err != nil {
		return err
	}
	for i := range rs {
		row = row[:0]
		for _, c := range columns {
			if c.csv != "" {
				row = append(row, c.val(&rs[i]))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes a heading, the table of the readable columns (one per group of runs
// when there are several: the sweeps), what made runs invalid and where the rate-limited runs
// took their rate, then the goals and the charts when there are any.
func WriteMarkdown(w io.Writer, info Info, rs []Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### `%s`\n\n", info.Command)
	fmt.Fprintf(&b, "%s, %s; %d runs in %s, %d invalid.\n\n", info.Started.UTC().Format(time.RFC3339),
		info.Host, info.TotalRuns, info.Took.Round(time.Second), info.Invalid)
	groups := groupOrder(rs)
	series := RoundSeriesOf(rs)
	for _, g := range groups {
		if len(groups) > 1 {
			fmt.Fprintf(&b, "#### %s\n\n", groupTitle(g))
		}
		writeTable(&b, rs, func(r *Result) bool { return r.Run.Group == g })
		b.WriteString("\n")
		writeRounds(&b, series, g)
	}
	var notes []string
	for i := range rs {
		r := &rs[i]
		if src := r.Run.rateSources(); len(src) > 0 && r.Run.Load.Rate > 0 {
			of := src[0]
			if len(src) > 1 {
				of = "the median of " + strings.Join(src, ", ")
			}
			notes = append(notes, fmt.Sprintf("%s: publishers limited to %s msgs/s, %.0f%% of %s.",
				r.Run.ID, count(int64(r.Run.Load.Rate)), 100*r.Run.RateFraction, of))
		}
		if !r.Valid {
			notes = append(notes, fmt.Sprintf("%s is INVALID: %s.", r.Run.ID, strings.Join(r.Problems, "; ")))
		}
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	writeGoals(&b, info.Goals)
	if len(info.Charts) > 0 {
		b.WriteString("#### Charts\n\n")
		for _, c := range info.Charts {
			fmt.Fprintf(&b, "![%s](%s)\n", c, c)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// writeTable writes the Markdown table of the results keep selects.
func writeTable(b *strings.Builder, rs []Result, keep func(*Result) bool) {
	var heads, rules []string
	for _, c := range columns {
		if c.md != "" {
			heads = append(heads, c.md)
			rules = append(rules, "---")
		}
	}
	fmt.Fprintf(b, "| %s |\n| %s |\n", strings.Join(heads, " | "), strings.Join(rules, " | "))
	for i := range rs {
		if !keep(&rs[i]) {
			continue
		}
		var cells []string
		for _, c := range columns {
			switch {
			case c.md == "":
			case !rs[i].Valid && !markdownIdentity[c.md]:
				cells = append(cells, "") // an invalid run's figures do not count: not shown
			default:
				cells = append(cells, strings.ReplaceAll(c.val(&rs[i]), "|", `\|`))
			}
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
	}
}

// groupOrder lists the runs' groups in the order they first appear.
func groupOrder(rs []Result) []string {
	var gs []string
	seen := map[string]bool{}
	for i := range rs {
		if g := rs[i].Run.Group; !seen[g] {
			seen[g] = true
			gs = append(gs, g)
		}
	}
	return gs
}

// groupTitle is the heading of a group's table.
func groupTitle(g string) string {
	if t, ok := groupTitles[g]; ok {
		return t
	}
	if g == "" {
		return "Runs"
	}
	return g
}

func loadText(l Load) string {
	s := fmt.Sprintf("%s %s p%d t%d", l.Ack, sizeText(l.BodySize), l.Publishers, l.Topics)
	if l.Ack.windowed() {
		s = fmt.Sprintf("%s w%d %s p%d t%d", l.Ack, l.Window, sizeText(l.BodySize), l.Publishers, l.Topics)
	}
	if l.Unpacked {
		s += " unpacked"
	}
	if l.Rate > 0 {
		s += " @" + count(int64(l.Rate)) + "/s"
	}
	return s
}

// ratioText shows a ratio to a reference run, or self when r is that reference.
func ratioText(r *Result, ref string, ratio float64, self string) string {
	switch {
	case ratio == 0:
		return ""
	case ref == r.Run.ID:
		return self
	}
	return fnum(ratio, 3)
}

// sizeText is a body size in bytes, KiB or MiB: 128B, 1KiB, 16KiB, 1MiB.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func latencyText(pick func(Latency) time.Duration) func(r *Result) string {
	return func(r *Result) string {
		if r.Latency.Count == 0 {
			return ""
		}
		return fnum(float64(pick(r.Latency))/float64(time.Microsecond), 0)
	}
}

// ffInt shows n for a fire-and-forget run of a target that counts its drops, "" for any other.
func ffInt(r *Result, n int64) string {
	if sc := scenarios[r.Run.Scenario]; r.Run.Load.Ack != FireAndForget || sc == nil || !sc.CountsDrops {
		return ""
	}
	return itoa(n)
}

func engineInt(r *Result, f func(*EngineReport) int64) string {
	if r.Engine == nil {
		return ""
	}
	return itoa(f(r.Engine))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fnum formats f with prec decimals, "" for zero (not measured).
func fnum(f float64, prec int) string {
	if f == 0 {
		return ""
	}
	return strconv.FormatFloat(f, 'f', prec, 64)
}
