package reader

import (
	"context"
	"time"

	"github.com/rocketstore/engine/internal/store/consumequeue"
)

// Read what was acked. An engine acks a message once the CommitLog holds it at the promised level
// (Durable in sync mode, Written in async mode), and dispatch puts its ConsumeQueue unit and index
// keys in place a moment later: a read sent right after the ack could miss it (no unit yet, or a
// topic not created yet). So a read that finds nothing where an acked message may be (the head of
// a queue, a queue or topic the store does not have yet, no record at an id, a query) first waits,
// bounded by the Reader's ack wait, until Dispatched reaches the acked offset it saw when it
// arrived, and reads again. Every message acked before the read arrived is then found, as
// JetStream's direct get finds a message once its PubAck is back. A read that finds what it asked
// for never waits; when dispatch is idle (Dispatched at the acked offset) nothing waits at all.

// DefaultAckWait bounds how long a read waits for dispatch to reach the acked offset: dispatch
// lags by a few milliseconds, at most by MaxDispatchLag (256 MiB); it stalls only on a full disk
// (a ConsumeQueue or IndexFile that cannot grow), and the read then answers what it has.
const DefaultAckWait = 5 * time.Second

// SetAckLevel makes reads see every message acked before they arrive: acked is the watermark an
// ack waits for (the engine's Durable in sync mode, Written in async mode), and wait bounds how
// long a read waits for Dispatched to reach it (DefaultAckWait when <= 0). Set it before reads
// start; without it (and always offline) reads do not wait.
func (r *Reader) SetAckLevel(acked Watermark, wait time.Duration) {
	if wait <= 0 {
		wait = DefaultAckWait
	}
	r.acked, r.ackWait = acked, wait
}

// ackPoint is what a read saw as it arrived, before it read anything: the acked offset (what it
// must be able to see) and Dispatched.
type ackPoint struct {
	acked, dispatched int64
}

// ackMark is the read's ackPoint. Dispatched must be loaded before the read looks, not after:
// dispatch that passes the acked offset while the read looks may have put the unit in place just
// after the read missed it, and a Dispatched loaded then would say there is nothing more to see.
func (r *Reader) ackMark() ackPoint {
	if r.acked == nil || r.dispatched == nil {
		return ackPoint{}
	}
	acked := r.acked.Load() // first: Dispatched never passes what was written
	return ackPoint{acked: acked, dispatched: r.dispatched.Load()}
}

// catchUp waits until Dispatched reaches the acked offset of p, at most the ack wait, and says
// whether the read should look again: false when dispatch was there already as the read arrived
// (it saw everything acked) or ctx ended.
func (r *Reader) catchUp(ctx context.Context, p ackPoint) bool {
	if r.acked == nil || r.dispatched == nil || p.dispatched >= p.acked {
		return false
	}
	mark := p.acked
	wctx, cancel := context.WithTimeout(ctx, r.ackWait)
	defer cancel()
	// Timed out or failed (the engine stopping), the mark may still have moved: look again.
	_ = r.dispatched.Wait(wctx, mark)
	return ctx.Err() == nil
}

// seeAcked is the end of a Get that read res (req with its bounds set): when res stopped at the
// head of the queue short of its bounds (nothing found there, or fewer messages than asked) while
// dispatch had not reached mark, it waits for dispatch (catchUp) and reads on from where res
// ended, once, so that the Get holds every message acked before it arrived.
func (r *Reader) seeAcked(ctx context.Context, mark ackPoint, cq *consumequeue.ConsumeQueue, req GetRequest, f tagFilter, res GetResult) (GetResult, error) {
	if r.looked != nil {
		r.looked()
	}
	room := req.MaxBytes
	for i := range res.Messages {
		room -= int(res.Messages[i].Size)
	}
	if !short(res, req.Max, room) || !r.catchUp(ctx, mark) {
		return res, nil
	}
	if cq == nil {
		cq = r.cq.Find(req.Topic, req.QueueID) // a queue's first dispatch creates it
	}
	if len(res.Messages) == 0 {
		if res.Status == NoMatchedMessage {
			req.Offset = res.NextOffset // past units filtered out up to the head
		}
		return r.get(cq, req, f)
	}
	more := req
	more.Offset, more.Max, more.MaxBytes = res.NextOffset, req.Max-len(res.Messages), room
	m, err := r.get(cq, more, f)
	res.Messages = append(res.Messages, m.Messages...)
	res.MaxOffset, res.ScanStopped = max(res.MaxOffset, m.MaxOffset), m.ScanStopped
	if err != nil || len(m.Messages) > 0 || m.Status == NoMatchedMessage || m.Status == OffsetFoundNull {
		res.NextOffset = m.NextOffset // past what the second read consumed (or at its damaged unit)
	}
	return res, err
}

// short says a Get's result ended at the head of its queue, or found no queue, with room left
// for count more messages and room more bytes: where an acked message may have been about to
// appear.
func short(res GetResult, count, room int) bool {
	if len(res.Messages) == 0 {
		switch res.Status {
		case OffsetOverflowOne, OffsetOverflowBadly, NoMessageInQueue:
			return true
		case NoMatchedMessage:
			return res.NextOffset >= res.MaxOffset
		}
		return false
	}
	return res.Status == Found && res.NextOffset >= res.MaxOffset && len(res.Messages) < count && room > 0
}
