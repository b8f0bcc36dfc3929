package engine

import (
	"context"
	"fmt"

	appender "github.com/rocketstore/engine/append"
)

// StartQueue makes queue (topic, queueID) take offset next as its next one: a partition taken
// over from another engine continues that engine's offsets. A queue this engine already has must
// end exactly there (taking back a partition nothing was written to since); otherwise its offsets
// would have a hole or overlap, and StartQueue refuses. The start is persisted before it returns.
// It first waits until everything written is dispatched, so that the queue's end is known.
func (e *Engine) StartQueue(ctx context.Context, topic string, queueID int32, next int64) error {
	if next < 0 || next > e.cq.MaxQueueOffset()+1 {
		return fmt.Errorf("engine: queue %s/%d: start offset %d: want 0 to %d, the end of a full queue", topic, queueID, next,
			e.cq.MaxQueueOffset()+1)
	}
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		return err
	}
	if cq := e.cq.Find(topic, queueID); cq != nil {
		if max := cq.MaxOffset(); max != next && (max > 0 || cq.MinOffset() > 0) {
			return fmt.Errorf("engine: queue %s/%d ends at %d here, not at %d: a partition can only "+
				"move back to an engine that holds nothing past its last offset there, and nothing before it", topic, queueID, max, next)
		} else if max == next {
			return nil
		}
	}
	return e.starts.Set(appender.QueueKey{Topic: topic, QueueID: queueID}, next)
}
