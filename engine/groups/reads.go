package groups

import (
	"fmt"
	"iter"
)

// What a member's read may hand out: fencing at its start (AuthorizeRead) and again when it
// answers (StillReads, Served), and the count of messages redelivered as the new owner of a
// queue reads what its lost owner was served.

// AuthorizeRead says whether member may read queue at epoch now: it owns it at that epoch and
// is not asked to give it up. A read also keeps the member's session.
func (c *Coordinator) AuthorizeRead(key Key, memberID string, queueID int32, epoch int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, err := c.memberLocked(key, memberID)
	if err != nil {
		return err
	}
	m.timer.Reset(c.cfg.SessionTimeout)
	q := g.queues[queueID]
	if q == nil || q.owner != memberID || q.epoch != epoch || q.revoking {
		c.stats.fenced.Add(1)
		return fmt.Errorf("%w: member %s may not read queue %d of %s at epoch %d", ErrFenced, memberID, queueID, key, epoch)
	}
	return nil
}

// StillReads says whether member may still be handed what a read of queue at epoch found: it
// owns it at that epoch and is not asked to give it up (as AuthorizeRead, without keeping the
// session). A read authorized before a long poll asks again before it answers, since the queue
// may have moved meanwhile.
func (c *Coordinator) StillReads(key Key, memberID string, queueID int32, epoch int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readableLocked(key, memberID, queueID, epoch) != nil
}

func (c *Coordinator) readableLocked(key Key, memberID string, queueID int32, epoch int64) *queueState {
	g := c.groups[key]
	if g == nil {
		return nil
	}
	q := g.queues[queueID]
	if q == nil || q.owner != memberID || q.epoch != epoch || q.revoking {
		return nil
	}
	return q
}

// Served records that the owner of a queue is handed the messages at offsets (ascending) of a
// read that went on to next, and counts those an earlier owner was handed and never committed
// (a redelivery). offsets is iterated only while the queue has such messages left: a read's
// records are not walked again for nothing. It returns false, recording nothing, when the member may no longer be handed
// them (StillReads): the read answers FENCED instead.
func (c *Coordinator) Served(key Key, memberID string, queueID int32, epoch int64, offsets iter.Seq[int64], next int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.readableLocked(key, memberID, queueID, epoch)
	if q == nil {
		return false
	}
	g := c.groups[key]
	if q.redeliverTo > q.redeliverFrom {
		var n int64
		for off := range offsets {
			if off >= q.redeliverFrom && off < q.redeliverTo {
				n++
			}
		}
		if n > 0 {
			c.stats.redelivered.Add(n)
			g.redelivered += n
			if r := g.lastRebalance(); r != nil {
				r.Redelivered += n
			}
		}
		q.redeliverFrom = max(q.redeliverFrom, min(next, q.redeliverTo))
	}
	q.served = max(q.served, next)
	return true
}
