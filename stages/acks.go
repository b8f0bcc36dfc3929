package stages

import (
	"context"
	"fmt"
)

// Acks answers appended batches once they reach the promised durability: it waits until Level
// (Written in async mode, Durable in sync mode) reaches each batch's End, then calls its Done.
// Batches arrive in append order, so their Ends only grow and one wait covers many. If Level
// fails below a batch (a failed sync), that batch's stored records get the error instead: they
// are not durable, and the publisher must not be told they are.
type Acks struct {
	In    <-chan *Batch
	Level *Watermark
	// Durable is the level of batches marked Durable (the flusher's watermark).
	Durable *Watermark
}

// Run answers batches until In is closed (a clean stop) or ctx ends; then it answers what is
// left in In with the reason, without waiting, so that no publisher is left without a reply
// when something can still be sent.
func (a *Acks) Run(ctx context.Context) error {
	for {
		select {
		case b, ok := <-a.In:
			if !ok {
				return nil
			}
			level := a.levelOf(b)
			if err := level.Wait(ctx, b.End); err != nil {
				if ctx.Err() != nil {
					// The engine stopped: say why (a failed sync, say), not just "canceled".
					err = fmt.Errorf("engine stopped: %w", context.Cause(ctx))
				}
				failAbove(b, level.Load(), err)
			}
			b.Done(b)
		case <-ctx.Done():
			// Answer everything the writer hands over until it closes In (it always does on
			// its way out), without waiting for any level: records the level already covers
			// keep their success, the rest get the cause.
			cause := fmt.Errorf("engine stopped: %w", context.Cause(ctx))
			for b := range a.In {
				failAbove(b, a.levelOf(b).Load(), cause)
				b.Done(b)
			}
			return nil
		}
	}
}

// levelOf is the watermark b waits for.
func (a *Acks) levelOf(b *Batch) *Watermark {
	if b.Durable && a.Durable != nil {
		return a.Durable
	}
	return a.Level
}

// failAbove marks with err every record of b that has no error yet and does not end at or
// below reached (which did reach the level and keeps its success).
func failAbove(b *Batch, reached int64, err error) {
	for i := range b.Records {
		r := &b.Records[i]
		if r.Err == nil && (reached < 0 || r.End() > reached) {
			r.Err = err
		}
	}
}
