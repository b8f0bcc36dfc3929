package verify

import (
	"fmt"
	"slices"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// Plan is what Repair removes, worked out from the verification before anything is changed: it
// is told (Options.OnPlan) before the first change, and is all a dry run does.
type Plan struct {
	// Removals lists everything removed: from the CommitLog, then the ConsumeQueues, then the
	// IndexFiles.
	Removals []Removal `json:"removals"`
	// End is the CommitLog's end after the repair; PropCRCFrom the offset the new checkpoint
	// gives as the one from which every record carries the __CRC32# property.
	End         int64 `json:"end"`
	PropCRCFrom int64 `json:"prop_crc_from"`
	// RocketMQKeeps is the part of the CommitLog cut that RocketMQ's own recovery keeps (it
	// checks only the structure and the body CRC of a record); nil when it keeps none of it.
	// Repair refuses to remove it unless Options.ForceCut is set.
	RocketMQKeeps *Range `json:"rocketmq_keeps,omitempty"`
}

// Removal is one thing Repair removes.
type Removal struct {
	// File is the file removed from (for a ConsumeQueue, its directory), relative to the store.
	File string `json:"file"`
	// Part is "commitlog", "consumequeue" or "index".
	Part string `json:"part"`
	// [From, To) is the range removed: CommitLog offsets for the CommitLog, queue offsets for
	// a ConsumeQueue; for an IndexFile, the CommitLog offsets of its first and last entries.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Count is what the range holds: records that parse (CommitLog), units, or index entries.
	Count int64 `json:"count"`
	// Whole says the file (or queue directory) is deleted, not cut.
	Whole  bool   `json:"whole"`
	Reason string `json:"reason"`
}

// plan works out what repairing the verified store removes. It mirrors the repair's steps:
// the CommitLog cut (cutLog), the queues and IndexFiles deleted as broken (deleteBroken), the
// units and IndexFiles past the end (cutDerived).
func (v *verifier) plan() *Plan {
	c := v.chain
	p := &Plan{End: c.end, PropCRCFrom: max(c.start, c.noPropEnd)}
	v.planLog(p)
	v.planQueues(p)
	v.planIndex(p)
	return p
}

func (v *verifier) planLog(p *Plan) {
	c := v.chain
	if c.stop == nil || c.full || (c.stop.tail != commitlog.TailCorrupt && len(c.after) == 0) {
		return
	}
	s := c.stop
	if s.tail == commitlog.TailCorrupt {
		p.Removals = append(p.Removals, Removal{File: v.rel(s.name), Part: "commitlog", From: c.end, To: s.base + s.dataEnd,
			Count: s.salvaged, Reason: v.rep.CommitLog.TailReason})
		if s.rmqRecords > 0 {
			p.RocketMQKeeps = &Range{From: c.end, To: s.base + s.rmqEnd, Records: s.rmqRecords}
		}
	}
	i := slices.Index(v.scans, s)
	size := v.opts.CommitLogFileSize
	for _, a := range v.scans[i+1:] {
		why := "holds no data"
		if a.hasData() {
			why = fmt.Sprintf("%d valid records from its start; a segment after the log's end at %d is never read", a.records, c.end)
		}
		p.Removals = append(p.Removals, Removal{File: v.rel(a.name), Part: "commitlog", From: a.base, To: a.base + size,
			Count: a.records, Whole: true, Reason: "after the cut: " + why})
	}
}

func (v *verifier) planQueues(p *Plan) {
	end := v.chain.end
	for _, q := range v.queues {
		switch {
		case q.cq == nil:
		case q.broken():
			why := fmt.Sprintf("%d units do not name their records", q.bad)
			switch {
			case q.fileBad:
				why = "its files cannot be read as they are"
			case q.bad == 0:
				why = "records lack units below its end, where none can be appended"
			}
			p.Removals = append(p.Removals, Removal{File: v.rel(q.dir), Part: "consumequeue", From: q.min, To: q.max,
				Count: q.max - q.min, Whole: true, Reason: why + "; the queue is built anew from the CommitLog"})
		case q.pastEnd > 0:
			p.Removals = append(p.Removals, Removal{File: v.rel(q.dir), Part: "consumequeue", From: q.firstPastEnd, To: q.max,
				Count: q.max - q.firstPastEnd, Reason: fmt.Sprintf("the units point past the CommitLog's end at %d", end)})
		}
	}
}

func (v *verifier) planIndex(p *Plan) {
	end := v.chain.end
	first := slices.IndexFunc(v.index, func(x *indexCheck) bool { return x == nil || x.broken() })
	keep := len(v.index)
	if first >= 0 {
		keep = first
	}
	// What DropPast deletes of the files kept: the newest ones holding entries at or past end.
	last := keep
	for last > 0 && v.index[last-1] != nil && v.index[last-1].endPhy >= end {
		last--
	}
	for i, x := range v.index[last:] {
		if x == nil {
			continue
		}
		var why string
		switch {
		case last+i < keep:
			why = fmt.Sprintf("it holds entries at or past the CommitLog's end at %d", end)
		case x.broken():
			why = fmt.Sprintf("%d problems in it", x.bad)
		default:
			why = fmt.Sprintf("it follows the broken %s", v.rel(v.index[first].name))
		}
		p.Removals = append(p.Removals, Removal{File: v.rel(x.name), Part: "index", From: x.firstPhy, To: x.lastPhy,
			Count: x.entries, Whole: true, Reason: why + "; the index is rebuilt from the CommitLog"})
	}
}
