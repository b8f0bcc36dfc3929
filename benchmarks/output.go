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
	{"scenario", "target", func(r *Result) string { return r.Run.Scenario }},
	{"ack", "", func(r *Result) string { return string(r.Run.Load.Ack) }},
	{"window", "", func(r *Result) string { return itoa(int64(r.Run.Load.Window)) }},
	{"publishers", "", func(r *Result) string { return itoa(int64(r.Run.Load.Publishers)) }},
	{"topics", "", func(r *Result) string { return itoa(int64(r.Run.Load.Topics)) }},
	{"body_bytes", "", func(r *Result) string { return itoa(int64(r.Run.Load.BodySize)) }},
	{"", "load", func(r *Result) string { return loadText(r.Run.Load) }},
	{"rate_limit", "", func(r *Result) string { return fnum(r.Run.Load.Rate, 0) }},
	{"sent", "", func(r *Result) string { return itoa(r.Sent) }},
	{"found", "", func(r *Result) string { return itoa(r.Found) }},
	{"acked", "", func(r *Result) string { return itoa(r.Acked) }},
	{"elapsed_s", "", func(r *Result) string { return fnum(r.Elapsed.Seconds(), 3) }},
	{"msgs_per_s", "msgs/s", func(r *Result) string { return fnum(r.MsgsPerSec, 0) }},
	{"mb_per_s", "MB/s", func(r *Result) string { return fnum(r.MBPerSec, 1) }},
	{"ratio", "", func(r *Result) string { return fnum(r.Ratio, 3) }},
	{"", "vs ceiling", ratioText},
	{"ceiling_run", "", func(r *Result) string { return r.Ceiling }},
	{"publish_msgs_per_s", "", func(r *Result) string { return fnum(r.PublishPerSec, 0) }},
	{"p50_us", "ack p50 µs", latencyText(func(l Latency) time.Duration { return l.P50 })},
	{"p99_us", "ack p99 µs", latencyText(func(l Latency) time.Duration { return l.P99 })},
	{"p999_us", "ack p99.9 µs", latencyText(func(l Latency) time.Duration { return l.P999 })},
	{"max_us", "", latencyText(func(l Latency) time.Duration { return l.Max })},
	{"window_waits", "", func(r *Result) string { return itoa(r.WindowWaits) }},
	{"syncs", "", func(r *Result) string { return engineInt(r, func(e *EngineReport) int64 { return e.Syncs }) }},
	{"records", "", func(r *Result) string { return engineInt(r, func(e *EngineReport) int64 { return e.Records }) }},
	{"syncs_per_msg", "syncs/msg", func(r *Result) string {
		if r.Engine == nil {
			return ""
		}
		return strconv.FormatFloat(r.Engine.SyncsPerMsg, 'g', 3, 64)
	}},
	{"target_cpu_s", "target CPU s", func(r *Result) string { return fnum(r.TargetCPU.Seconds(), 2) }},
	{"target_cpu_us_per_msg", "CPU µs/msg", func(r *Result) string {
		return fnum(float64(r.TargetCPUPerMsg())/float64(time.Microsecond), 2)
	}},
	{"publisher_cpu_s", "pub CPU s", func(r *Result) string { return fnum(r.PublisherCPU.Seconds(), 2) }},
	{"target_rss_mib", "target RSS MiB", func(r *Result) string { return fnum(float64(r.TargetRSS)/(1<<20), 0) }},
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

// WriteMarkdown writes a heading, the table of the readable columns and, below it, what made
// runs invalid and where the rate-limited runs took their rate.
func WriteMarkdown(w io.Writer, info Info, rs []Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### `%s`\n\n", info.Command)
	fmt.Fprintf(&b, "%s, %s; %d runs in %s, %d invalid.\n\n", info.Started.UTC().Format(time.RFC3339),
		info.Host, info.TotalRuns, info.Took.Round(time.Second), info.Invalid)
	var heads, rules []string
	for _, c := range columns {
		if c.md != "" {
			heads = append(heads, c.md)
			rules = append(rules, "---")
		}
	}
	fmt.Fprintf(&b, "| %s |\n| %s |\n", strings.Join(heads, " | "), strings.Join(rules, " | "))
	for i := range rs {
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
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	var notes []string
	for i := range rs {
		r := &rs[i]
		if r.Run.RateOf != "" && r.Run.Load.Rate > 0 {
			notes = append(notes, fmt.Sprintf("%s: publishers limited to %s msgs/s, %.0f%% of %s.",
				r.Run.ID, count(int64(r.Run.Load.Rate)), 100*r.Run.RateFraction, r.Run.RateOf))
		}
		if !r.Valid {
			notes = append(notes, fmt.Sprintf("%s is INVALID: %s.", r.Run.ID, strings.Join(r.Problems, "; ")))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func loadText(l Load) string {
	s := fmt.Sprintf("%s %dB p%d t%d", l.Ack, l.BodySize, l.Publishers, l.Topics)
	if l.Ack == RequestReply {
		s = fmt.Sprintf("%s w%d %dB p%d t%d", l.Ack, l.Window, l.BodySize, l.Publishers, l.Topics)
	}
	if l.Rate > 0 {
		s += " @" + count(int64(l.Rate)) + "/s"
	}
	return s
}

func ratioText(r *Result) string {
	switch {
	case r.Ratio == 0:
		return ""
	case r.Ceiling == r.Run.ID:
		return "ceiling"
	}
	return fnum(r.Ratio, 3)
}

func latencyText(pick func(Latency) time.Duration) func(r *Result) string {
	return func(r *Result) string {
		if r.Latency.Count == 0 {
			return ""
		}
		return fnum(float64(pick(r.Latency))/float64(time.Microsecond), 0)
	}
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
