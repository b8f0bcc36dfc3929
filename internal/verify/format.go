package verify

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// WriteText writes the report for people: a summary of each part, the notes, the problems
// and the verdict.
func (r *Report) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	r.writeText(b, "")
	return b.Flush()
}

func (r *Report) writeText(b *bufio.Writer, indent string) {
	p := func(format string, args ...any) { fmt.Fprintf(b, indent+format+"\n", args...) }
	l := r.CommitLog
	p("store %s", r.Store)
	crc := "body CRC and whole-record CRC (where present)"
	if l.PropCRC == "required in range" {
		crc = fmt.Sprintf("body CRC and whole-record CRC (required %s, elsewhere where present)",
			ruleRange(commitlog.PropCRCRule{From: l.PropCRCFrom, To: l.PropCRCTo}))
	}
	p("  commitlog     %d segments of %s: [%d, %d), %s records, %s; %s checked", l.Segments, Bytes(l.SegmentSize),
		l.Start, l.End, count(l.Records), Bytes(l.Bytes), crc)
	tail := "  ends          " + l.Tail
	if l.TailReason != "" {
		tail += ": " + l.TailReason
	}
	p("%s", tail)
	if d := l.Drop; d != nil {
		p("  a cut drops   [%d, %d) of %s: %d records parse there, %d bytes do not", d.From, d.To, d.Segment, d.Records, d.Unparsed)
		if len(d.LaterSegments) > 0 {
			p("                and %d later segments: %s valid records, %s (%s)", len(d.LaterSegments), count(d.LaterRecords),
				Bytes(d.LaterBytes), strings.Join(d.LaterSegments, ", "))
		}
		if d.Sealed {
			p("                this is sealed data: acknowledged messages would be lost")
		}
	}
	q := r.ConsumeQueue
	p("  consumequeue  %d queues: %s units checked, %s records should have one", q.Queues, count(q.Units), count(q.Records))
	if x := r.Index; x.Checked {
		p("  index         %d files: %s entries checked, %s expired (their records removed by retention)", x.Files, count(x.Entries), count(x.Expired))
	} else {
		p("  index         not checked")
	}
	c := r.Checkpoint
	switch {
	case !c.Present:
		p("  checkpoint    none")
	case c.Extension:
		p("  checkpoint    durable %d, dispatched %d, whole-record CRC from %d; physic %s, logics %s, index %s", c.DurableOffset,
			c.DispatchedOffset, c.PropCRCFrom, stamp(c.PhysicMsgTimestamp), stamp(c.LogicsMsgTimestamp), stamp(c.IndexMsgTimestamp))
	default:
		p("  checkpoint    physic %s, logics %s, index %s (no offsets)", stamp(c.PhysicMsgTimestamp),
			stamp(c.LogicsMsgTimestamp), stamp(c.IndexMsgTimestamp))
	}
	rate := ""
	if s := r.Took.Seconds(); s > 0 && l.Bytes > 0 {
		rate = fmt.Sprintf(": %.0f MB/s of records, %s of segments read", float64(l.Bytes)/s/1e6, Bytes(l.Scanned))
	}
	p("  took          %s%s", r.Took.Round(time.Millisecond), rate)
	for _, n := range r.Notes {
		p("  note: %s", n)
	}
	if total := len(r.Problems) + int(r.Omitted); total > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(r.Counts)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, r.Counts[k]))
		}
		p("problems: %d (%s)", total, strings.Join(kinds, ", "))
		for _, pr := range r.Problems {
			p("  %-22s %s @%d: %s", pr.Kind, pr.File, pr.Offset, pr.Desc)
		}
		if r.Omitted > 0 {
			p("  ... and %d more of the same kinds, not listed", r.Omitted)
		}
	}
	p("verdict: %s", r.Verdict)
}

// WriteText writes the repair for people: what was found, the plan (exactly what is removed),
// what was removed and rebuilt, and the verification afterwards.
func (r *RepairReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	r.Before.writeText(b, "")
	if r.Plan != nil {
		r.Plan.writeText(b)
	}
	r.writeDone(b)
	return b.Flush()
}

// WriteDoneText writes what WriteText writes after the plan, for a caller that wrote the
// verification and the plan before the repair changed anything.
func (r *RepairReport) WriteDoneText(w io.Writer) error {
	b := bufio.NewWriter(w)
	r.writeDone(b)
	return b.Flush()
}

// WriteText writes the plan for people: one line per removal with its file, range, count and
// reason.
func (p *Plan) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	p.writeText(b)
	return b.Flush()
}

func (p *Plan) writeText(b *bufio.Writer) {
	f := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	f("repair plan (worked out before anything is changed):")
	if len(p.Removals) == 0 {
		f("  remove        nothing; only missing units and index entries are added")
	}
	for _, r := range p.Removals {
		verb := "cut"
		if r.Whole {
			verb = "delete"
		}
		var what string
		switch r.Part {
		case "commitlog":
			what = fmt.Sprintf("[%d, %d): %s records", r.From, r.To, count(r.Count))
		case "consumequeue":
			what = fmt.Sprintf("units [%d, %d): %s units", r.From, r.To, count(r.Count))
		default:
			what = fmt.Sprintf("%s entries naming [%d, %d]", count(r.Count), r.From, r.To)
		}
		f("  %-13s %s %s (%s)", verb, r.File, what, r.Reason)
	}
	f("  keep          the CommitLog up to %d; the checkpoint then says durable = dispatched = %d, whole-record CRC from %d", p.End, p.End, p.PropCRCFrom)
	if k := p.RocketMQKeeps; k != nil {
		f("  RocketMQ      its own recovery keeps %s records of the cut, [%d, %d): repair removes them only with --force-cut", count(k.Records), k.From, k.To)
	}
}

func (r *RepairReport) writeDone(b *bufio.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	if !r.Needed {
		p("repair: nothing to repair")
		return
	}
	if r.DryRun {
		p("repair: dry run, nothing was changed")
		return
	}
	done := r.Checkpoint.Present
	if done {
		p("repair:")
	} else {
		p("repair: stopped before it was done (see the error); what it changed:")
	}
	if c := r.Cut; c != nil {
		if c.Sealed {
			p("  DATA LOSS: the cut is inside sealed data; every record after %d is gone", c.From)
		}
		p("  commitlog     cut at %d in %s: [%d, %d) removed (%d records parsed there, %d bytes did not); the rest of the segment zeroed (up to %d bytes)",
			c.End, c.Segment, c.From, c.To, c.Records, c.Unparsed, c.Zeroed)
		if len(c.Deleted) > 0 {
			p("                deleted %d later segments: %s (%s valid records, %s)", len(c.Deleted), strings.Join(c.Deleted, ", "),
				count(c.LaterRecords), Bytes(c.LaterBytes))
		}
	} else {
		p("  commitlog     kept whole")
	}
	if len(r.Queues) == 0 {
		p("  consumequeue  no queue changed")
	}
	for _, q := range r.Queues {
		what := fmt.Sprintf("%s units dropped, %s added", count(q.Dropped), count(q.Added))
		switch {
		case q.Rebuilt && q.Unreadable:
			what = fmt.Sprintf("deleted (its files could not be read) and rebuilt: %s units", count(q.Added))
		case q.Rebuilt:
			what = fmt.Sprintf("deleted (%s units) and rebuilt: %s units", count(q.Dropped), count(q.Added))
		}
		p("  consumequeue  %s: %s", q.Queue, what)
	}
	p("  index         %s deleted, %s created", files(r.IndexDeleted), files(r.IndexCreated))
	if d := r.Redispatched; d != nil {
		p("  rebuilt from  [%d, %d): %s records run through dispatch", d.From, d.To, count(d.Records))
	}
	c := r.Checkpoint
	old := "none"
	if o := r.OldCheckpoint; o != nil {
		old = fmt.Sprintf("durable %d, dispatched %d", o.DurableOffset, o.DispatchedOffset)
	}
	if done {
		p("  checkpoint    written: durable %d, dispatched %d, whole-record CRC from %d, physic/logics %s, index %s (was %s)", c.DurableOffset,
			c.DispatchedOffset, c.PropCRCFrom, stamp(c.PhysicMsgTimestamp), stamp(c.IndexMsgTimestamp), old)
	}
	if r.AbortRemoved {
		p("  abort         removed: the engine opens the store as after a clean stop")
	}
	if r.After != nil {
		p("after repair:")
		r.After.writeText(b, "  ")
	}
}

// Bytes formats a byte count with a binary unit.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 5 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[u-1])
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// stamp formats a store timestamp (ms) in UTC.
func stamp(ms int64) string {
	if ms == 0 {
		return "0"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// files formats a list of files: "no file", "1 file (a)", "2 files (a, b)".
func files(names []string) string {
	switch len(names) {
	case 0:
		return "no file"
	case 1:
		return "1 file (" + names[0] + ")"
	}
	return fmt.Sprintf("%d files (%s)", len(names), strings.Join(names, ", "))
}
