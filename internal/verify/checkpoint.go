package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/rocketstore/engine/internal/store/checkpoint"
)

// Byte positions of the checkpoint fields, for problems.
const (
	cpPhysic     = 0
	cpLogics     = 8
	cpIndex      = 16
	cpDurable    = 48
	cpDispatched = 56
)

// loadCheckpoint reads the checkpoint into the report. A damaged one is a problem; a missing
// one only when there is data (an engine writes one as soon as it has opened a store).
func (v *verifier) loadCheckpoint() (checkpoint.Checkpoint, bool) {
	cp, err := checkpoint.Load(v.opts.FS, path.Join(v.opts.Dir, checkpoint.FileName))
	r := &v.rep.Checkpoint
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cp, false
	case err != nil:
		r.Present = true
		v.problems.add(Problem{Kind: KindCheckpoint, File: checkpoint.FileName, Desc: fmt.Sprintf("cannot be decoded: %v", err)})
		return checkpoint.Checkpoint{}, false
	}
	r.Present = true
	r.PhysicMsgTimestamp, r.LogicsMsgTimestamp, r.IndexMsgTimestamp = cp.PhysicMsgTimestamp, cp.LogicsMsgTimestamp, cp.IndexMsgTimestamp
	r.Extension, r.DurableOffset, r.DispatchedOffset = cp.Ext.Valid, cp.Ext.DurableOffset, cp.Ext.DispatchedOffset
	switch {
	case cp.Ext.Stale:
		v.note("the checkpoint's version-1 extension no longer matches RocketMQ's fields (RocketMQ ran on the store?): " +
			"its offsets are ignored, as the engine ignores them; only the timestamps are checked")
	case !cp.Ext.Valid:
		v.note("the checkpoint has no offsets of ours (written by RocketMQ?): only its timestamps are checked")
	case cp.Ext.Rewritten:
		v.note("RocketMQ rewrote the checkpoint's fields since the engine wrote its offsets (RocketMQ ran on the store): " +
			"the offsets are a lower bound")
	}
	return cp, true
}

// checkCheckpoint checks the checkpoint against the log: its offsets within the valid data,
// the dispatched one on a record boundary, its timestamps no later than the newest record.
func (v *verifier) checkCheckpoint(cp checkpoint.Checkpoint, present bool, c *chain, scans []*segScan) {
	if !present {
		if v.rep.Checkpoint.Present || c.records == 0 {
			return // undecodable (reported) or nothing to check against
		}
		v.problems.add(Problem{Kind: KindCheckpoint, File: checkpoint.FileName,
			Desc: fmt.Sprintf("missing, while the CommitLog holds %d records", c.records)})
		return
	}
	add := func(off int64, format string, args ...any) {
		v.problems.add(Problem{Kind: KindCheckpoint, File: checkpoint.FileName, Offset: off, Desc: fmt.Sprintf(format, args...)})
	}
	for _, ts := range []struct {
		name string
		off  int64
		v    int64
	}{
		{"physicMsgTimestamp", cpPhysic, cp.PhysicMsgTimestamp},
		{"logicsMsgTimestamp", cpLogics, cp.LogicsMsgTimestamp},
		{"indexMsgTimestamp", cpIndex, cp.IndexMsgTimestamp},
	} {
		if ts.v > c.maxTS {
			add(ts.off, "%s %d is later than the newest record's store timestamp %d", ts.name, ts.v, c.maxTS)
		}
	}
	if !cp.Ext.Valid {
		return
	}
	if d := cp.Ext.DurableOffset; d > c.end {
		add(cpDurable, "durable offset %d is past the end of the valid CommitLog at %d", d, c.end)
	}
	d := cp.Ext.DispatchedOffset
	switch {
	case d > c.end:
		add(cpDispatched, "dispatched offset %d is past the end of the valid CommitLog at %d", d, c.end)
		return
	case d < c.start || d == c.end:
		return // below the log's start (retention) or at its end: both fine
	}
	i := (d - c.start) / v.opts.CommitLogFileSize
	if i >= int64(len(scans)) || scans[i] == nil {
		return
	}
	switch s := scans[i]; s.at {
	case probeInside:
		add(cpDispatched, "dispatched offset %d is inside the record at %d, not on a record boundary", d, s.atRecord)
	case probeFiller:
		add(cpDispatched, "dispatched offset %d is inside the blank filler at the end of %s, not on a record boundary", d, path.Base(s.name))
	}
}
