package flushers

import (
	"cmp"
	"context"
	"errors"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// ConsumeQueues is what the checkpointer needs of the ConsumeQueue store.
type ConsumeQueues interface {
	// FlushAll syncs every queue with at least leastPages dirty pages (0: every dirty queue).
	FlushAll(leastPages int) error
}

// Index is what the checkpointer needs of the IndexFile service.
type Index interface {
	Flush() error
}

// DispatchInfo tells the checkpointer the store timestamps RocketMQ's checkpoint holds.
type DispatchInfo interface {
	LastStoreTimestamp() int64
	IndexFilled() int64
}

// Checkpointer flushes the files derived from the CommitLog and writes the checkpoint. Like
// RocketMQ's FlushConsumeQueueService, it flushes ConsumeQueues with at least LeastPages dirty
// pages every Interval and everything every ThoroughInterval; only after a thorough flush does it
// move the checkpoint's dispatched offset, so that recovery re-dispatches from a point below
// which every unit and index entry is on disk. The checkpoint also carries the durable offset,
// below which recovery treats damage as corruption rather than a torn tail: it is written
// again every Interval in which it moved (sealDurable).
type Checkpointer struct {
	ConsumeQueues ConsumeQueues
	Index         Index // nil when indexing is off
	Info          DispatchInfo
	Durable       *stages.Watermark
	Dispatched    *stages.Watermark
	// Save writes the checkpoint (atomically).
	Save func(checkpoint.Checkpoint) error
	// PropCRCFrom is the CommitLog offset from which every record carries the whole-record CRC
	// (-1: not every record does), recorded for recovery.
	PropCRCFrom int64
	// Urgent, in async mode, is the CommitLog flusher's: a thorough flush asks it to sync what
	// dispatch has passed, so that no unit, entry or checkpoint it makes durable is ahead of the
	// records. Nil in sync mode, where dispatch follows Durable.
	Urgent chan<- struct{}

	// RocketMQ defaults: 1 s, 2 pages, 60 s.
	Interval         time.Duration
	LeastPages       int
	ThoroughInterval time.Duration
	Logger           zerolog.Logger

	// Saved, when set, is told every checkpoint written.
	Saved func(checkpoint.Checkpoint)

	// last is the last checkpoint written (Thorough, or the durable offset moved on since);
	// owned by Run's goroutine once it runs.
	last    checkpoint.Checkpoint
	hasLast bool
	// noSpace counts the saves refused for want of disk space since the last one written; while
	// it is not zero each tick tries a thorough flush and save again (noSpaceSince: the first).
	noSpace      int
	noSpaceSince time.Time
}

// Run flushes until Dispatched is closed, then does a last thorough flush and checkpoint and
// returns nil. A flush error stops it (and so the engine): derived files that cannot be synced
// must be rebuilt by recovery. A save refused for want of disk space does not (see save): the
// engine goes on, and each tick tries again.
func (c *Checkpointer) Run(ctx context.Context) error {
	tick := time.NewTicker(cmp.Or(c.Interval, time.Second))
	defer tick.Stop()
	thorough := cmp.Or(c.ThoroughInterval, time.Minute)
	least := cmp.Or(c.LeastPages, 2)
	done := c.Dispatched.WaitChan(math.MaxInt64)
	last := time.Now()
	for {
		select {
		case <-tick.C:
			if c.noSpace > 0 || time.Since(last) >= thorough {
				last = time.Now()
				if err := c.Thorough(); err != nil {
					return err
				}
				continue
			}
			if err := c.ConsumeQueues.FlushAll(least); err != nil {
				return err
			}
			if err := c.sealDurable(); err != nil {
				return err
			}
		case <-done:
			if err := c.Dispatched.Err(); !errors.Is(err, stages.ErrClosed) {
				return err // dispatch failed: leave the last good checkpoint for recovery
			}
			// In async mode dispatch follows Written and can finish before the flusher's last
			// sync: wait for it, so that the last checkpoint says durable = dispatched = end
			// and the next start takes the clean path.
			select {
			case <-c.Durable.WaitChan(math.MaxInt64):
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := c.Durable.Err(); !errors.Is(err, stages.ErrClosed) {
				return err // the last sync failed: recovery decides what survived
			}
			return c.Thorough()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Thorough flushes every derived file and writes the checkpoint.
func (c *Checkpointer) Thorough() error {
	// Read the marks before flushing: what is flushed covers at least them.
	dispatched, ts, indexTS := c.Dispatched.Load(), c.Info.LastStoreTimestamp(), c.Info.IndexFilled()
	durable := c.Durable.Load()
	if dispatched > durable && c.Urgent != nil {
		// Async: dispatch follows the written offset. Have the log synced past what is about to
		// be flushed and recorded (the flusher fails Durable if it stops, which ends the wait).
		select {
		case c.Urgent <- struct{}{}:
		default: // one is pending, and covers this
		}
		_ = c.Durable.Wait(context.Background(), dispatched) // failed: the clamp below
		durable = c.Durable.Load()
	}
	// Recovery scans the log from the dispatched offset, so it must never pass the durable one:
	// a power cut loses what was written and not synced, which a scan from past it would take
	// for a clean end, leaving a hole of lost records below it (and units naming them) in the
	// log that goes on from there. The timestamps then describe records that may be lost: only
	// the offsets are kept from them.
	if dispatched > durable {
		dispatched, ts, indexTS = durable, c.last.PhysicMsgTimestamp, c.last.IndexMsgTimestamp
	}
	if err := c.ConsumeQueues.FlushAll(0); err != nil {
		return err
	}
	if c.Index != nil {
		if err := c.Index.Flush(); err != nil {
			return err
		}
		indexTS = max(indexTS, ts)
	}
	cp := checkpoint.Checkpoint{
		PhysicMsgTimestamp: ts,
		LogicsMsgTimestamp: ts,
		IndexMsgTimestamp:  indexTS,
		Ext: checkpoint.Ext{
			Valid: true, DurableOffset: durable, DispatchedOffset: dispatched, PropCRCFrom: c.PropCRCFrom,
		},
	}
	return c.save(cp)
}

// Behind reports whether the last save was refused for want of disk space, so that the
// checkpoint on disk is older than the last one made. Run's goroutine owns what it reads once
// Run runs: call it before (Open, after its first Thorough) or after.
func (c *Checkpointer) Behind() bool { return c.noSpace > 0 }

// sealDurable writes the last checkpoint again with the durable offset moved on, when it has:
// recovery treats invalid data below that offset as damage to refuse, not a torn tail to cut,
// so an acked record is protected within an Interval of its sync rather than only after the
// next thorough flush. Nothing else changes: the dispatched offset and RocketMQ's timestamps
// still say what the last thorough flush covered.
func (c *Checkpointer) sealDurable() error {
	durable := c.Durable.Load()
	if !c.hasLast || durable <= c.last.Ext.DurableOffset {
		return nil
	}
	cp := c.last
	cp.Ext.DurableOffset = durable
	return c.save(cp)
}

// save writes cp. A disk with no space left (ENOSPC, EDQUOT) is not an error: the checkpoint
// is saved in place and needs no new block, so this is a file system that copies on write, or
// a checkpoint file that does not exist yet; the last checkpoint on disk stays, whole, and is
// only older: recovery after a crash starts from it and re-dispatches more (the Builder skips
// what is built), and retention, which deletes only below the last checkpoint written (Saved),
// deletes nothing newer. The engine goes on; Run tries again at each tick.
func (c *Checkpointer) save(cp checkpoint.Checkpoint) error {
	if err := c.Save(cp); err != nil {
		if !vfs.IsNoSpace(err) {
			return err
		}
		if c.noSpace == 0 {
			c.noSpaceSince = time.Now()
			c.Logger.Error().Err(err).Int64("durable", cp.Ext.DurableOffset).Int64("dispatched", cp.Ext.DispatchedOffset).
				Msg("no disk space to write the checkpoint: the engine goes on and retries every interval; " +
					"the last checkpoint on disk stays, so a crash meanwhile recovers from further back")
		}
		c.noSpace++
		return nil
	}
	if c.noSpace > 0 {
		c.Logger.Info().Int("refused", c.noSpace).Dur("for", time.Since(c.noSpaceSince)).Msg("checkpoint written again")
		c.noSpace = 0
	}
	c.last, c.hasLast = cp, true
	if c.Saved != nil {
		c.Saved(cp)
	}
	return nil
}
