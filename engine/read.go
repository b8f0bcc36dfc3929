package engine

import (
	"context"
	"time"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/offsets"
)

// The read API's types, from internal/reader (which also serves offline readers).
type (
	// GetRequest asks for messages of one queue from an offset (see Engine.Get).
	GetRequest = reader.GetRequest
	// GetResult is what Get found, with the offset to ask for next.
	GetResult = reader.GetResult
	// ReadMessage is one stored message as read back.
	ReadMessage = reader.Message
	// QueryRequest asks for messages by key and time range (see Engine.Query).
	QueryRequest = reader.QueryRequest
	// QueueOffsets are a queue's bounds.
	QueueOffsets = reader.QueueOffsets
	// TopicInfo names a topic and its queues.
	TopicInfo = reader.TopicInfo
	// ReadStatus is a Get's outcome, as RocketMQ's pull statuses.
	ReadStatus = reader.Status
)

// Errors of the read API.
var (
	// ErrInvalidRequest: a request field is missing or out of range.
	ErrInvalidRequest = reader.ErrInvalidRequest
	ErrUnknownQueue   = reader.ErrUnknownQueue
	ErrBadMsgID       = reader.ErrBadMsgID
	ErrNotFound       = reader.ErrNotFound
	ErrIndexDisabled  = reader.ErrIndexDisabled
	ErrInvalidGroup   = offsets.ErrInvalidGroup
)

// Get reads messages of one queue from an offset, through the ConsumeQueue into the CommitLog,
// filtered by exact tags; at the head of the queue it waits up to req.Wait for new messages
// (woken by dispatch, never by polling).
func (e *Engine) Get(ctx context.Context, req GetRequest) (GetResult, error) {
	release, err := e.readStart()
	if err != nil {
		return GetResult{}, err
	}
	defer release()
	return e.reader.Get(ctx, req)
}

// Lookup reads the message an offset message id names.
func (e *Engine) Lookup(msgID string) (ReadMessage, error) {
	release, err := e.readStart()
	if err != nil {
		return ReadMessage{}, err
	}
	defer release()
	return e.reader.Lookup(msgID)
}

// Query finds messages of a topic by key or unique key in a time range, through the IndexFile,
// checking each message's real keys (the index compares hashes only). Newest first.
func (e *Engine) Query(ctx context.Context, req QueryRequest) ([]ReadMessage, error) {
	release, err := e.readStart()
	if err != nil {
		return nil, err
	}
	defer release()
	return e.reader.Query(ctx, req)
}

// OffsetForTime is the first queue offset whose message was stored at or after ts (ms).
func (e *Engine) OffsetForTime(topic string, queueID int32, ts int64) (int64, error) {
	release, err := e.readStart()
	if err != nil {
		return 0, err
	}
	defer release()
	return e.reader.OffsetForTime(topic, queueID, ts)
}

// QueueOffsets returns the bounds of every queue of a topic.
func (e *Engine) QueueOffsets(topic string) ([]QueueOffsets, error) {
	release, err := e.readStart()
	if err != nil {
		return nil, err
	}
	defer release()
	return e.reader.Offsets(topic)
}

// Topics lists the topics and their queues.
func (e *Engine) Topics() []TopicInfo {
	release, err := e.readStart()
	if err != nil {
		return nil
	}
	defer release()
	return e.reader.Topics()
}

// CommitOffset records a consumer group's offset in a queue (outside the group's membership:
// epoch 0, no member). It returns once the offset is in the offsets journal (fsynced in sync mode).
func (e *Engine) CommitOffset(group, topic string, queueID int32, offset int64) error {
	return e.offsets.Commit(offsets.Commit{Group: group, Topic: topic, QueueID: queueID, Offset: offset})
}

// FetchOffset returns a consumer group's committed offset in a queue.
func (e *Engine) FetchOffset(group, topic string, queueID int32) (int64, bool) {
	o, ok := e.offsets.Get(group, topic, queueID)
	return o.Offset, ok
}

// GroupOffsets is the consumer groups' committed offsets table.
func (e *Engine) GroupOffsets() *offsets.Table { return e.offsets }

// readStart admits a read while the stores are open: Close waits for admitted reads to end
// before it unmaps anything.
func (e *Engine) readStart() (release func(), err error) {
	e.reads.RLock()
	if e.storesClosed {
		e.reads.RUnlock()
		return nil, ErrClosed
	}
	return e.reads.RUnlock, nil
}

// syncOffsets fsyncs the consumer offsets journal on an interval in async flush mode, so that a
// power loss loses at most that interval of commits (sync mode fsyncs before each answer).
func (e *Engine) syncOffsets(ctx context.Context, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	done := e.dispatched.WaitChan(1<<63 - 1)
	for {
		select {
		case <-tick.C:
			if err := e.offsets.Sync(); err != nil {
				e.opts.Logger.Warn().Err(err).Msg("could not sync the consumer offsets journal")
			}
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Records reads several queues of a topic at once, each record as the CommitLog holds it,
// appended to buf (the batched read; reader.Records).
func (e *Engine) Records(ctx context.Context, req reader.RecordsRequest, buf []byte) ([]reader.QueueRecords, []byte, error) {
	release, err := e.readStart()
	if err != nil {
		return nil, buf, err
	}
	defer release()
	return e.reader.Records(ctx, req, buf)
}
