package recovery

import (
	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/vfs"
)

// stallBuilder is the Builder recovery re-dispatches through. A record it cannot build for want
// of disk space (a ConsumeQueue or IndexFile that cannot be made or grow: vfs.IsNoSpace) does
// not fail recovery, which would make every start on a full disk fail the same way, with
// retention, which frees space, never running: from that record on it builds nothing, and
// recovery goes on finding the log's end and cutting what lies past it. The engine then starts
// with its Dispatched watermark at the first record not built (Report.Dispatched), and live
// dispatch, which waits for space (dispatch.Dispatcher.NoSpace) while writes are refused, builds
// the rest through the same Builder, which skips what is built already.
//
// It also keeps, for each queue, the offset after the last record it did not build: those
// records hold their queue offsets in the CommitLog already, and the writer must continue after
// them, not after the ConsumeQueue's end.
type stallBuilder struct {
	Builder
	// from is the lowest record not built (-1 while every record was); err why the first was not.
	from int64
	err  error
	next map[appender.QueueKey]int64
}

func newStallBuilder(b Builder) *stallBuilder {
	return &stallBuilder{Builder: b, from: -1, next: make(map[appender.QueueKey]int64)}
}

// Apply builds the record at phys, or, once a record could not be for want of space, only
// notes it. Recovery applies records in several passes that are not in one order (re-indexing
// below the checkpoint comes after the scan), so from is the lowest of them.
func (b *stallBuilder) Apply(phys int64, v commitlog.View) error {
	if b.from < 0 {
		err := b.Builder.Apply(phys, v)
		if err == nil || !vfs.IsNoSpace(err) {
			return err
		}
		b.from, b.err = phys, err
	}
	b.from = min(b.from, phys)
	if derive.Queued(v.TransactionType()) {
		k := appender.QueueKey{Topic: string(v.Topic()), QueueID: v.QueueID()}
		b.next[k] = max(b.next[k], v.QueueOffset()+1)
	}
	return nil
}

// stalled says whether a record could not be built.
func (b *stallBuilder) stalled() bool { return b.from >= 0 }

// finish puts what the stall left to live dispatch into rep and next.
func (b *stallBuilder) finish(rep *Report, next map[appender.QueueKey]int64) {
	rep.Dispatched = rep.End
	if !b.stalled() {
		return
	}
	rep.Dispatched = min(b.from, rep.End)
	rep.NoSpace = b.err.Error()
	for k, off := range b.next {
		next[k] = max(next[k], off)
	}
}
