package reader

import (
	"errors"
	"fmt"
	"math"

	"github.com/rocketstore/engine/internal/store/consumequeue"
)

// OffsetForTime returns the first queue offset of (topic, queueID) whose message was stored
// at or after ts (ms), RocketMQ's getOffsetInQueueByTime: a binary search over the
// ConsumeQueue that reads each probed record's STORETIMESTAMP. If every message is older the
// result is MaxOffset; if none is, MinOffset. A record deleted by retention counts as older
// than any time.
func (r *Reader) OffsetForTime(topic string, queueID int32, ts int64) (int64, error) {
	cq, err := r.queue(topic, queueID)
	if err != nil {
		return 0, err
	}
	release, err := r.use()
	if err != nil {
		return 0, err
	}
	defer release()
	cur := cursor{q: r.log.Queue()}
	defer cur.release()
	return cq.OffsetByTime(ts, func(phys int64, _ int32) (int64, error) {
		return storeTime(&cur, phys)
	})
}

// storeTime is the STORETIMESTAMP of the record at phys; math.MinInt64 when it is gone,
// math.MaxInt64 when it is past the log an offline Reader has mapped (newer than anything).
func storeTime(cur *cursor, phys int64) (int64, error) {
	v, err := cur.view(phys)
	switch {
	case errors.Is(err, errGone):
		return math.MinInt64, nil
	case errors.Is(err, errAhead):
		return math.MaxInt64, nil
	case err != nil:
		return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	case v.PhysicalOffset() != phys:
		return 0, fmt.Errorf("%w: record at %d says it is at %d", ErrCorrupt, phys, v.PhysicalOffset())
	}
	return v.StoreTimestamp(), nil
}

// QueueOffsets are the bounds of one queue.
type QueueOffsets struct {
	QueueID int32
	// Min is the first offset that can be read, Max the offset the next message will get.
	Min, Max int64
	// MinStoreTime and MaxStoreTime are the store times (ms) of the messages at Min and at
	// Max-1; 0 when the queue is empty or the record is gone.
	MinStoreTime, MaxStoreTime int64
}

// Offsets returns the bounds of every queue of topic, by queue id; ErrUnknownQueue when the
// store has no queue of topic.
func (r *Reader) Offsets(topic string) ([]QueueOffsets, error) {
	ids := r.cq.QueueIDs(topic)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: topic %q", ErrUnknownQueue, topic)
	}
	release, err := r.use()
	if err != nil {
		return nil, err
	}
	defer release()
	cur := cursor{q: r.log.Queue()}
	defer cur.release()
	out := make([]QueueOffsets, 0, len(ids))
	for _, id := range ids {
		cq := r.cq.Find(topic, id)
		qo := QueueOffsets{QueueID: id, Min: cq.MinOffset(), Max: cq.MaxOffset()}
		if qo.Min < qo.Max {
			qo.MinStoreTime = unitTime(cq, &cur, qo.Min)
			qo.MaxStoreTime = unitTime(cq, &cur, qo.Max-1)
		}
		out = append(out, qo)
	}
	return out, nil
}

// unitTime is the store time of the message at queue offset n, 0 if it cannot be read.
func unitTime(cq *consumequeue.ConsumeQueue, cur *cursor, n int64) int64 {
	u, err := cq.Unit(n)
	if err != nil || u.IsBlank() {
		return 0
	}
	ts, err := storeTime(cur, u.Phys)
	if err != nil || ts == math.MinInt64 || ts == math.MaxInt64 {
		return 0
	}
	return ts
}

// TopicInfo names a topic and its queues.
type TopicInfo struct {
	Name   string
	Queues []int32 // queue ids, ascending
}

// Topics lists the topics of the store with their queue ids, sorted by name.
func (r *Reader) Topics() []TopicInfo {
	var out []TopicInfo
	for _, cq := range r.cq.Queues() { // sorted by topic, then queue id
		if n := len(out); n == 0 || out[n-1].Name != cq.Topic() {
			out = append(out, TopicInfo{Name: cq.Topic()})
		}
		last := &out[len(out)-1]
		last.Queues = append(last.Queues, cq.QueueID())
	}
	return out
}
