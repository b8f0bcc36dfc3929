package publisher

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// onAck handles one ack (nats.go's goroutine of the ack subscription).
func (p *Publisher) onAck(m *nats.Msg) {
	p.mu.Lock()
	err := wire.DecodeBatchAck(m.Data, &p.ack)
	if err != nil {
		if errors.Is(err, wire.ErrPlainReply) {
			p.breakLocked(fmt.Errorf("publisher: %w", err))
		}
		// Anything else on the inbox is not ours to act on.
	} else if p.ack.Stream == p.stream {
		p.stats.AckMessages++
		p.applyLocked(&p.ack, p.now())
	}
	answered := p.takeAnswered()
	p.mu.Unlock()
	p.callbacks(answered)
}

// applyLocked applies an ack: positions, refusals, missing sequences, the cumulative ack and a
// stream error. p.mu must be held.
func (p *Publisher) applyLocked(a *wire.BatchAck, now instant) {
	// Copies stored first, then duplicates: a message and a copy of it answered in one ack (a
	// resend that overtook its original) is acked as stored, not as a duplicate.
	for _, dup := range [2]bool{false, true} {
		for i := range a.Stored {
			if r := &a.Stored[i]; r.Dup == dup {
				p.ackRunLocked(r, now)
			}
		}
	}
	for i := range a.Refused {
		r := &a.Refused[i]
		for k := uint64(0); k < r.Count && r.Seq+k < p.next; k++ {
			f := p.pendingLocked(r.Seq + k)
			if f == nil {
				continue
			}
			refusal := &RefusedError{Code: r.Code, Description: r.Description}
			if refusal.retriable() && f.sends <= p.opts.MaxRetries {
				f.lastErr, f.retryAt = refusal, now.after(p.opts.RetryDelay)
				select { // the timer loop looks more often while a retry waits
				case p.retry <- struct{}{}:
				default:
				}
				continue
			}
			p.failLocked(f, refusal)
		}
	}
	for _, r := range a.Missing {
		for seq := max(r[0], p.floor+1); seq <= r[1] && seq < p.next; seq++ {
			if f := p.pendingLocked(seq); f != nil {
				p.resendLocked(f, &p.stats.ResentMissing, now)
			}
		}
	}
	// The cumulative ack: whatever it covers was stored, and its position was in this ack or an
	// earlier one. A future it covers that is still open lost its position with a lost ack:
	// resent, it is answered with its position as a duplicate.
	for seq := p.floor + 1; seq <= a.Through && seq < p.next; seq++ {
		if f := p.pendingLocked(seq); f != nil && f.retryAt == 0 {
			p.resendLocked(f, &p.stats.ResentLost, now)
		}
	}
	if a.Error != nil {
		// The engine dropped the stream's state (evicted from its full stream table). Nothing
		// is lost: it sent what it had first, later outcomes still come by position, and the
		// state is rebuilt from our floor. Only a gap it was deciding on goes unreported: the
		// timeout covers it. Resending everything in flight instead would make streams that
		// take turns in a full table evict each other for ever.
		p.stats.Evictions++
	}
	p.advanceLocked()
}

// ackRunLocked acks the open futures of a run of stored messages. p.mu must be held. Only the
// run's sequences in (floor, next) are visited: an ack's count and step come from the network,
// and seq+k*step past 2^64 would wrap back into the window.
func (p *Publisher) ackRunLocked(r *wire.StoredRun, now instant) {
	step := max(r.Step, 1)
	if r.Count == 0 || r.Seq >= p.next {
		return
	}
	k := uint64(0)
	if r.Seq <= p.floor {
		k = (p.floor-r.Seq)/step + 1 // the first k with r.Seq+k*step > floor
	}
	n := min(r.Count, (p.next-1-r.Seq)/step+1) // the run's sequences below next
	for ; k < n; k++ {
		seq := r.Seq + k*step
		if f := p.pendingLocked(seq); f != nil {
			p.ackLocked(f, Ack{Seq: seq, Topic: r.Topic, QueueID: r.QueueID,
				QueueOffset: r.QueueOffset + int64(k), Duplicate: r.Dup}, now)
		}
	}
}

// breakLocked fails every open future and every later Publish with err: the engine does not
// answer this stream with batched acks. p.mu must be held.
func (p *Publisher) breakLocked(err error) {
	if p.fatal != nil {
		return
	}
	p.fatal = err
	p.failUnsentLocked(err)
	for seq := p.floor + 1; seq < p.next; seq++ {
		if f := p.pendingLocked(seq); f != nil {
			p.failLocked(f, err)
		}
	}
	p.advanceLocked()
	close(p.moved) // wake Publish waiters: they return the error
	p.moved = make(chan struct{})
}
