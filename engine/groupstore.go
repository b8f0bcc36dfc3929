package engine

import (
	"context"
	"slices"
	"time"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// groupStore is what the consumer group coordinator (engine/groups) needs of the engine: the
// queues of a topic this engine serves, their bounds, and the store time of a message (for the
// lag in time).
type groupStore struct {
	e *Engine
	// queues is the queues per topic ingress makes; owned lists the partitions owned now under
	// partitioned ingest (nil otherwise), which are then the queues of every topic.
	queues int
	owned  func() []int
}

// Queues is every queue the store has of topic and every queue ingress would make for it; under
// partitioned ingest the partitions owned now (a partition with no message of the topic yet is
// an empty queue of it, as the read API answers it).
func (g groupStore) Queues(topic string) ([]int32, bool) {
	if g.owned != nil {
		if commitlog.ValidateTopic(topic) != nil {
			return nil, false
		}
		var out []int32
		for _, p := range g.owned() {
			out = append(out, int32(p))
		}
		return out, true
	}
	release, err := g.e.readStart()
	if err != nil {
		return nil, false
	}
	stored := g.e.cq.QueueIDs(topic)
	release()
	if len(stored) == 0 {
		return nil, false
	}
	out := slices.Clone(stored)
	for q := range int32(g.queues) {
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out, true
}

// Bounds is the queue's first offset and the offset of its next message (0, 0 for a queue not
// there yet).
func (g groupStore) Bounds(topic string, queueID int32) (int64, int64) {
	release, err := g.e.readStart()
	if err != nil {
		return 0, 0
	}
	defer release()
	cq := g.e.cq.Find(topic, queueID)
	if cq == nil {
		return 0, 0
	}
	return cq.MinOffset(), cq.MaxOffset()
}

// StoreTime is the store time of the message at offset, false when it cannot be read.
func (g groupStore) StoreTime(topic string, queueID int32, offset int64) (time.Time, bool) {
	res, err := g.e.Get(context.Background(), reader.GetRequest{Topic: topic, QueueID: queueID, Offset: offset, Max: 1, NoPropertyMap: true})
	if err != nil || len(res.Messages) == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(res.Messages[0].StoreTimestamp), true
}
